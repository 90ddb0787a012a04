package commands

import (
	"context"
	"errors"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/tui"
)

// watchOptions are the flags of vip watch.
type watchOptions struct {
	Interface   string
	NoAutostart bool
}

// newWatchCmd builds vip watch; runF, when set, runs instead of the view,
// so tests check the flags apart.
func newWatchCmd(d *deps, runF func(context.Context, *watchOptions) error) *cobra.Command {
	o := &watchOptions{}
	c := &cobra.Command{
		Use:   "watch [-i IFACE]",
		Short: "Watch claims, who-has traffic and competing claimers live, and steer claims from the keyboard",
		Long: `Watch opens a full-screen view of the agent on --socket: its claims (state,
window countdown, requests answered, gratuitous frames, conflicts), the who-has
traffic its captures see, competing claimers of held addresses, and its events
as they happen.

Keys: c claims an address (type "192.0.2.10" or "192.0.2.10 eth0"), r releases
the selected claim after a y/n question, g refreshes it (a new gratuitous
burst), / filters every pane, s changes the traffic's order, tab moves between
panes, ? shows every key, q quits. Quitting leaves the claims with the agent.

When the agent is guarded by a store (vip agent --store), a fleet pane shows
every live node and every claim in the store, read every second, and m moves the
selected claim (this agent's, or any node's in the fleet pane) to a node
picked from the live ones, showing the move's timeline when it is done. A
claim of a group (vip claim --group) moves with its whole group, and the
panes show a GROUP column with a group's addresses together. h shows the
store's history of the selected claim (of its group, if it has one) in the
events pane's place, read again with the fleet; h again goes back.

With -i, the panes show only claims and events on IFACE, and a claim typed
without an interface goes to IFACE. When no agent answers, watch starts one
like claim does (unless --no-autostart); an agent started that way exits once
it holds nothing and no client watches it. Watch needs a terminal: from a
script, follow "vip events" instead.`,
		Example: `  sudo vip watch
  sudo vip watch -i eth0`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runWatch(c.Context(), d, o)
		},
	}
	c.Flags().StringVarP(&o.Interface, "interface", "i", "", "show only claims and events on IFACE, and claim on it by default")
	addNoAutostartFlag(c, &o.NoAutostart)
	return c
}

func runWatch(ctx context.Context, d *deps, o *watchOptions) error {
	if o.Interface != "" {
		if _, err := d.sys.Interface(o.Interface); err != nil {
			if errors.Is(err, netcheck.ErrNoInterface) {
				return badInput("interface %q does not exist: list the interfaces with \"ip link\"", o.Interface)
			}
			return err
		}
	}
	if !isTerminal(d.io.Out) {
		return badInput(`vip watch needs a terminal, and standard output is not one: to follow the agent from a script or a pipe, use "vip events" (add --json for one JSON object a line) or "vip status"`)
	}
	c := d.client()
	// The view's event stream keeps an agent started here alive; it exits
	// after the view if it holds nothing.
	if err := d.withAgent(ctx, o.NoAutostart, announce.DefaultRate, func() error {
		_, err := c.Status(ctx)
		return err
	}); err != nil {
		return err
	}
	in := d.io.In
	if !isTerminal(in) {
		in = nil // read the keyboard from the controlling terminal
	}
	return tui.Run(ctx, tui.ClientBackend(c), tui.Options{
		Socket:    d.socket,
		Interface: o.Interface,
		In:        in,
		Out:       d.io.Out,
	})
}

// isTerminal reports whether f, a stream of IO, is a terminal: a file
// that x/term says is one. A stream with no descriptor (a test's buffer)
// is not.
func isTerminal(f any) bool {
	fd, ok := f.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(fd.Fd()))
}
