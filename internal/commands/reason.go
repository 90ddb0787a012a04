package commands

import (
	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/store"
)

// addReasonFlag adds --reason to a command that changes the fleet: the
// history records it with the change (vip history), beside who asked.
func addReasonFlag(c *cobra.Command, reason *string, what string) {
	c.Flags().StringVar(reason, "reason", "", what+", kept in the history (vip history)")
	_ = c.RegisterFlagCompletionFunc("reason", cobra.NoFileCompletions)
}

// checkReason refuses a --reason the history cannot keep.
func checkReason(reason string) error {
	if err := store.CheckReason(reason); err != nil {
		return badInput("%v", err)
	}
	return nil
}
