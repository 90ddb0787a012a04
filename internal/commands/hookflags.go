package commands

import (
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/hook"
)

// hookOptions are vip agent's flags that run a program on each change of
// state of its claims.
type hookOptions struct {
	Program string
	Timeout time.Duration
	// timeoutGiven says whether --on-change-timeout was on the command
	// line.
	timeoutGiven bool
}

func (h *hookOptions) addFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&h.Program, "on-change", "", "run PROGRAM (a path, no shell: a script brings its own) on each change of state of this node's claims, with VIP_ADDR, VIP_OLD_STATE, VIP_NEW_STATE and more in its environment (default: off)")
	f.DurationVar(&h.Timeout, "on-change-timeout", hook.DefaultTimeout, "how long a hook may run before it is killed with its process group, up to "+hook.MaxTimeout.String())
	_ = c.RegisterFlagCompletionFunc("on-change-timeout", cobra.NoFileCompletions)
}

// parsed notes which of the flags c's command line gave.
func (h *hookOptions) parsed(c *cobra.Command) {
	h.timeoutGiven = c.Flags().Changed("on-change-timeout")
}

// check refuses a timeout out of bounds, or a program that cannot run,
// before anything is claimed; it makes the program's path absolute.
func (h *hookOptions) check() error {
	switch {
	case h.Program == "" && h.timeoutGiven:
		return badInput("--on-change-timeout bounds the hook that --on-change PROGRAM runs: give --on-change too")
	case h.Timeout <= 0 || h.Timeout > hook.MaxTimeout:
		return badInput("--on-change-timeout %v: give how long a hook may run, more than 0 and at most %v", h.Timeout, hook.MaxTimeout)
	case h.Program == "":
		return nil
	}
	path, err := exec.LookPath(h.Program)
	if err == nil {
		path, err = filepath.Abs(path)
	}
	if err != nil {
		return badInput("--on-change %q cannot run (%v): give the path of an executable program, such as a script with a #! line and chmod +x", h.Program, err)
	}
	h.Program = path
	return nil
}

func (h *hookOptions) config() agent.HookConfig {
	return agent.HookConfig{Program: h.Program, Timeout: h.Timeout}
}
