package commands

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// cordonOptions are the flags and argument of vip cordon and vip uncordon.
type cordonOptions struct {
	Node   string
	For    time.Duration
	Reason string
	// Return, for uncordon, moves home every address whose home is Node.
	Return bool
	// Force, for cordon, cordons a node that is not alive now.
	Force bool
	JSON  bool
	Store storeOptions
}

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
it holds until vip uncordon NODE. A node that is not alive is refused (a
typo would leave the real node open), unless --force: the cordon then holds
when it comes back. Cordoning a cordoned node replaces its cordon, and says
whose it replaced. A move asked before the cordon still completes, and a
plain vip claim on the node itself is not refused: the operator there asks
for it.`,
		Example: `  vip cordon a --for 30m --reason "kernel upgrade"
  vip cordon a --store etcd://192.0.2.5:2379`,
		Args:              cordonArgs("cordon"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE:              o.runE(d, runF, runCordon),
	}
	f := c.Flags()
	f.DurationVar(&o.For, "for", 0, "lift the cordon by itself after this long (default: until vip uncordon)")
	addReasonFlag(c, &o.Reason, "why the node is cordoned, shown wherever the cordon is")
	f.BoolVar(&o.Force, "force", false, "cordon NODE even though it is not alive in the store now")
	f.BoolVar(&o.JSON, "json", false, "print the cordon as JSON")
	o.Store.addFlags(c)
	_ = c.RegisterFlagCompletionFunc("for", cobra.NoFileCompletions)
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
cordoned. Uncordoning a node that is not cordoned changes nothing.

With --return it then moves home every address whose home is NODE (the node
a move or a standby took it from: vip fleet shows each address's home while
it is away), as vip move does, with its timeline and the traffic counted at
NODE in the second after each is live. It exits 1 if any did not move.`,
		Example: `  vip uncordon a
  vip uncordon a --return
  vip uncordon a --json --store etcd://192.0.2.5:2379`,
		Args:              cordonArgs("uncordon"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE:              o.runE(d, runF, runUncordon),
	}
	c.Flags().BoolVar(&o.Return, "return", false, "then move home every address whose home is NODE")
	addReasonFlag(c, &o.Reason, "why the cordon is lifted (and the addresses moved home)")
	c.Flags().BoolVar(&o.JSON, "json", false, "print the cordon lifted (and the moves home) as JSON")
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
	return checkReason(o.Reason)
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
	live, err := c.Live(ctx, o.Node)
	if err != nil {
		return fmt.Errorf("cordon node %s: %w", o.Node, err)
	}
	if !live && !o.Force {
		return badInput("node %s is not alive in the store (live nodes: %s): check the name, or give --force to cordon it for when it comes back", o.Node, liveNodes(ctx, c))
	}
	now := time.Now()
	rec, replaced, err := c.PutCordon(ctx, store.Cordon{Node: o.Node, Reason: o.Reason, By: store.LocalUser(), Since: now.UTC()}, o.For)
	if err != nil {
		return fmt.Errorf("cordon node %s: %w", o.Node, err)
	}
	if o.JSON {
		resp := api.CordonResponse{Cordon: rec.API(now), Live: live}
		if replaced != nil && replaced.Active(now) {
			resp.Replaced = replaced.API(now)
		}
		return writeJSON(d, resp)
	}
	if replaced != nil && replaced.Active(now) {
		fmt.Fprintf(d.io.Out, "replaced the cordon of node %s: %s\n", o.Node, describeCordon(*replaced.API(now), now))
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
	if err := checkReason(o.Reason); err != nil {
		return err
	}
	c, err := o.Store.open(ctx, "uncordon")
	if err != nil {
		return err
	}
	defer c.Close()
	now := time.Now()
	rec, ok, err := c.DeleteCordon(ctx, o.Node, c.LocalActor(o.Reason))
	if err != nil {
		return fmt.Errorf("uncordon node %s: %w", o.Node, err)
	}
	ok = ok && rec.Active(now)
	live := nodeLive(ctx, c, o.Node)
	resp := api.CordonResponse{Lifted: ok, Live: live}
	if ok {
		resp.Cordon = rec.API(now)
	}
	var moveErr error
	if o.Return {
		if resp.Moves, moveErr = moveHome(ctx, c, o.Node, c.LocalActor(o.Reason)); moveErr == nil {
			moveErr = movesError(resp.Moves)
		}
	}
	if o.JSON {
		if err := writeJSON(d, resp); err != nil {
			return err
		}
		return moveErr
	}
	if !ok {
		fmt.Fprintf(d.io.Out, "node %s was not cordoned\n", o.Node)
	} else {
		fmt.Fprintf(d.io.Out, "node %s is uncordoned: it takes addresses again by move, take-over and standby\n", o.Node)
	}
	if o.Return {
		if len(resp.Moves) == 0 && moveErr == nil {
			fmt.Fprintf(d.io.Out, "no address has node %s as its home: nothing to move\n", o.Node)
		}
		if err := printMoves(d.io.Out, d.io.ErrOut, resp.Moves); err != nil {
			return err
		}
	}
	return moveErr
}

// moveHome moves to node every address whose home it is, and counts the
// traffic that reaches node in the second after each is live.
func moveHome(ctx context.Context, c *store.Client, node string, who store.Actor) ([]api.MoveResult, error) {
	v, err := c.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	for _, cv := range v.Claims {
		if cv.Claim.Home == node {
			addrs = append(addrs, cv.Claim.Addr)
		}
	}
	if len(addrs) == 0 {
		return nil, nil
	}
	mover := fleet.NewMover(c)
	defer mover.Close()
	results, err := mover.Move(ctx, store.MoveRequest{Addrs: addrs, To: node, TrafficWindow: time.Second, Actor: who})
	if err != nil {
		return nil, fmt.Errorf("move home to %s: %w", node, err)
	}
	out := make([]api.MoveResult, len(results))
	for i, r := range results {
		out[i] = r.API()
	}
	return out, nil
}

// nodeLive says whether node is alive in the store; a store that does not
// answer now says no.
func nodeLive(ctx context.Context, c *store.Client, node string) bool {
	live, err := c.Live(ctx, node)
	return err == nil && live
}

// liveNodes names the live nodes, for a refusal.
func liveNodes(ctx context.Context, c *store.Client) string {
	v, err := c.Nodes(ctx)
	if err != nil || len(v) == 0 {
		return "none"
	}
	return strings.Join(v, ", ")
}
