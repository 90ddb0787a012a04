package commands

import (
	"github.com/spf13/cobra"

	"github.com/vipctl/vip/announce/bpfresp"
	"github.com/vipctl/vip/internal/agent"
)

// responderOptions are the flags that say what answers who-has requests,
// the same on vip agent and vip claim --foreground.
type responderOptions struct {
	Mode string
	Hook string
	// given says whether any of the flags was on the command line.
	given bool
}

func (r *responderOptions) addFlags(c *cobra.Command, where string) {
	f := c.Flags()
	f.StringVar(&r.Mode, "responder", string(agent.ResponderAuto), "what answers ARP and neighbor solicitations: ebpf (in the kernel), socket (in vip), or auto (ebpf where the kernel and privileges allow)"+where)
	f.StringVar(&r.Hook, "responder-hook", bpfresp.TCX.String(), "where the eBPF responder runs: tcx (shares tc ingress, captures see everything), xdp-generic or xdp-native (captures see nothing it answers)"+where)
	_ = c.RegisterFlagCompletionFunc("responder", cobra.FixedCompletions([]string{"auto", "ebpf", "socket"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("responder-hook", cobra.FixedCompletions([]string{"tcx", "xdp-generic", "xdp-native"}, cobra.ShellCompDirectiveNoFileComp))
}

// parsed notes which of the flags c's command line gave.
func (r *responderOptions) parsed(c *cobra.Command) {
	r.given = c.Flags().Changed("responder") || c.Flags().Changed("responder-hook")
}

// config reads the flags, refusing unknown values before anything starts.
func (r *responderOptions) config() (agent.ResponderConfig, error) {
	mode, err := agent.ParseResponderMode(r.Mode)
	if err != nil {
		return agent.ResponderConfig{}, badInput("--responder: %v", err)
	}
	hook, err := bpfresp.ParseHook(r.Hook)
	if err != nil {
		return agent.ResponderConfig{}, badInput("--responder-hook: %v", err)
	}
	if mode == agent.ResponderSocket && r.Hook != bpfresp.TCX.String() {
		return agent.ResponderConfig{}, badInput("--responder-hook places the eBPF responder, and --responder socket answers on sockets: drop one of them")
	}
	return agent.ResponderConfig{Mode: mode, Hook: hook}, nil
}
