package cmd

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/store"
)

// cordonOptions are the flags and argument of vip cordon and vip uncordon.
type cordonOptions struct {
	Node   string
	For    time.Duration
	Reason string
	JSON   bool
	Store  storeOptions
}

// maxReasonLen bounds a cordon's reason: a sentence, not a file.
const maxReasonLen = 200

// newCordonCmd builds vip cordon; runF, when set, runs instead, so tests
// check the flags apart.
func newCordonCmd(d *deps, runF func(context.Context, *cordonOptions) error) *cobra.Command {
	o := &cordonOptions{}
	c := &cobra.Command{
		Use:   "cordon NODE [--for DUR] [--reason TEXT]",
		Short: "Keep new addresses off a node of the fleet for maintenance",
		Long: `Cordon marks NODE in the store (--store, or $VIP_STORE), from any host that
reaches it: while the cordon holds, the node takes no address by vip move,
claim --take-over or as a standby (a move with --force excepted), and keeps
the addresses it holds. vip fleet, vip status, the live view and the agent's
metrics show the cordon, its reason and the time left.

With --for, the cordon lifts itself at the end, even with nobody connected
then: its record lives under a lease of the store that ends with it. Without,
it holds until vip uncordon NODE. A node that is not alive can be cordoned:
the cordon holds when it comes back. Cordoning a cordoned node replaces its
cordon.`,
		Example: `  vip cordon a --for 30m --reason "kernel upgrade"
  vip cordon a --store etcd://192.0.2.5:2379`,
		Args:              cordonArgs("cordon"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE:              o.runE(d, runF, runCordon),
	}
	f := c.Flags()
	f.DurationVar(&o.For, "for", 0, "lift the cordon by itself after this long (default: until vip uncordon)")
	f.StringVar(&o.Reason, "reason", "", "why the node is cordoned, shown wherever the cordon is")
	f.BoolVar(&o.JSON, "json", false, "print the cordon as JSON")
	o.Store.addFlags(c)
	_ = c.RegisterFlagCompletionFunc("for", cobra.NoFileCompletions)
	_ = c.RegisterFlagCompletionFunc("reason", cobra.NoFileCompletions)
	return c
}

// newUncordonCmd builds vip uncordon.
func newUncordonCmd(d *deps, runF func(context.Context, *cordonOptions) error) *cobra.Command {
	o := &cordonOptions{}
	c := &cobra.Command{
		Use:   "uncordon NODE",
		Short: "Let a cordoned node take addresses again",
		Long: `Uncordon lifts NODE's cordon (vip cordon) in the store: the node takes
addresses again by move, take-over and as a standby, and as a standby it
takes at once what it stands by for and what nobody took while it was
cordoned. Uncordoning a node that is not cordoned changes nothing.`,
		Example: `  vip uncordon a
  vip uncordon a --json --store etcd://192.0.2.5:2379`,
		Args:              cordonArgs("uncordon"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE:              o.runE(d, runF, runUncordon),
	}
	c.Flags().BoolVar(&o.JSON, "json", false, "print the cordon lifted as JSON")
	o.Store.addFlags(c)
	return c
}

// runE takes the node and the store flags, then runs run (or runF, for
// the tests of the flags).
func (o *cordonOptions) runE(d *deps, runF func(context.Context, *cordonOptions) error, run func(context.Context, *deps, *cordonOptions) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		o.Node = args[0]
		o.Store.parsed(c, storeFlagNames...)
		if runF != nil {
			return runF(c.Context(), o)
		}
		return run(c.Context(), d, o)
	}
}

// cordonArgs takes one node name.
func cordonArgs(cmd string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return badInput("vip %s takes one node, as vip fleet names it, like: vip %s a", cmd, cmd)
		}
		if err := store.CheckNode(args[0]); err != nil {
			return badInput("%v: name a node as vip fleet lists it", err)
		}
		return nil
	}
}

// check refuses bad flags before anything connects.
func (o *cordonOptions) check() error {
	if o.For < 0 || o.For > store.MaxCordonFor {
		return badInput("--for %v: give how long the cordon holds, from 1s to %v, or leave it out to hold until vip uncordon", o.For, store.MaxCordonFor)
	}
	if o.For > 0 && o.For < time.Second {
		return badInput("--for %v: the store's leases count whole seconds: give 1s or more", o.For)
	}
	if len(o.Reason) > maxReasonLen {
		return badInput("--reason is %d bytes: say it in at most %d", len(o.Reason), maxReasonLen)
	}
	for _, r := range o.Reason {
		if !unicode.IsPrint(r) {
			return badInput("--reason holds a control character: give it as one line of text")
		}
	}
	return nil
}

func runCordon(ctx context.Context, d *deps, o *cordonOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	c, err := o.Store.open(ctx, "cordon")
	if err != nil {
		return err
	}
	defer c.Close()
	now := time.Now()
	rec, err := c.PutCordon(ctx, store.Cordon{Node: o.Node, Reason: o.Reason, By: whoAmI(), Since: now.UTC()}, o.For)
	if err != nil {
		return fmt.Errorf("cordon node %s: %w", o.Node, err)
	}
	live := nodeLive(ctx, c, o.Node)
	if o.JSON {
		return writeJSON(d, api.CordonResponse{Cordon: rec.API(now), Live: live})
	}
	lasts := "until vip uncordon " + o.Node
	if o.For > 0 {
		lasts = "for " + o.For.String() + ", then it lifts by itself"
	}
	fmt.Fprintf(d.io.Out, "node %s is cordoned %s: it takes no address by move, take-over or standby", o.Node, lasts)
	if !live {
		fmt.Fprintf(d.io.Out, "; it is not alive in the store now, and the cordon holds when it comes back\n")
		return nil
	}
	fmt.Fprintf(d.io.Out, ", and keeps what it holds\n")
	return nil
}

func runUncordon(ctx context.Context, d *deps, o *cordonOptions) error {
	c, err := o.Store.open(ctx, "uncordon")
	if err != nil {
		return err
	}
	defer c.Close()
	now := time.Now()
	rec, ok, err := c.DeleteCordon(ctx, o.Node)
	if err != nil {
		return fmt.Errorf("uncordon node %s: %w", o.Node, err)
	}
	ok = ok && rec.Active(now)
	live := nodeLive(ctx, c, o.Node)
	if o.JSON {
		resp := api.CordonResponse{Lifted: ok, Live: live}
		if ok {
			resp.Cordon = rec.API(now)
		}
		return writeJSON(d, resp)
	}
	if !ok {
		fmt.Fprintf(d.io.Out, "node %s was not cordoned: nothing changed\n", o.Node)
		return nil
	}
	fmt.Fprintf(d.io.Out, "node %s is uncordoned: it takes addresses again by move, take-over and standby\n", o.Node)
	return nil
}

// nodeLive says whether node is alive in the store; a store that does not
// answer now says no.
func nodeLive(ctx context.Context, c *store.Client, node string) bool {
	live, err := c.Live(ctx, node)
	return err == nil && live
}

// whoAmI names the operator for the record: the user (the one behind
// sudo, when run through it) at this host.
func whoAmI() string {
	name := os.Getenv("SUDO_USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	host, _ := os.Hostname()
	switch {
	case name == "":
		return host
	case host == "":
		return name
	}
	return name + "@" + host
}
