package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// moveOptions are the flags and arguments of vip move.
type moveOptions struct {
	Addrs     []string
	All       bool
	Group     string
	From      string
	To        string
	Interface string
	Timeout   time.Duration
	// Traffic is the window after the move over which the target counts
	// what arrives for each address.
	Traffic time.Duration
	// Force moves to a cordoned node all the same.
	Force bool
	// Home, when set, is the home the moved addresses take.
	Home   string
	JSON   bool
	Reason string
	Store  storeOptions
}

// newMoveCmd builds vip move; runF, when set, runs instead, so tests check
// the flags apart.
func newMoveCmd(d *deps, runF func(context.Context, *moveOptions) error) *cobra.Command {
	o := &moveOptions{}
	c := &cobra.Command{
		Use:   "move ADDR... --to NODE [-i IFACE] | move --all --from NODE --to NODE | move --group NAME --to NODE",
		Short: "Move addresses between the nodes of a fleet guarded by a store, without overlap",
		Long: `Move moves each ADDR to node NODE, through the store (--store, or
$VIP_STORE) and without an agent on this host: the target claims an address
only after its owner has stopped answering for it and deleted its key, and
move returns once the target is live, printing a timeline in milliseconds
(asked, released by the old owner, live on the new one).

An owner that does not answer (dead, or cut off from the store) is waited for
until its lease expires; move then completes, and says that it waited. It
never overlaps. An address nobody holds is claimed on NODE. A move to a node
that is not alive, that is cordoned (vip cordon; --force moves there all the
same), or that has no interface for an address, is refused before anything
changes (exit 1). Standbys of the addresses stay in place, and the old owner
joins them: it stands by in the target's place.

A moved address remembers its home: the node it was first moved (or taken by
a standby) from, or the one --home names. vip fleet shows it while the address
is away, and vip uncordon NODE --return moves home every address whose home is
NODE. A move back home clears it.

A group (vip claim --group) moves whole: moving one of its addresses moves
all of them, --group NAME names them all, and the old owner hands them over in
one transaction, so no reader of the store sees the group on two nodes.

With --all --from NODE, move empties NODE: every address it holds moves to
--to. vip drain does that and more for maintenance: it cordons NODE first and
waits until no traffic reaches it.

Without -i, the target picks the interface whose prefix holds the address,
or else the one of the owner's name.`,
		Example: `  vip move 192.0.2.10 --to b
  vip move 192.0.2.10 2001:db8::10 --to b -i eth1 --store etcd://192.0.2.5:2379
  vip move --all --from a --to b
  vip move --group web --to b --reason "kernel upgrade on a"`,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, args []string) error {
			o.Addrs = args
			o.Store.parsed(c, storeFlagNames...)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runMove(c.Context(), d, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.To, "to", "", "the node to move the addresses to (required)")
	f.BoolVar(&o.All, "all", false, "move every address --from holds (vip drain also cordons it and waits for quiet)")
	addGroupFlag(c, &o.Group, "move every address of the group, wherever it is held")
	f.StringVar(&o.From, "from", "", "the node the addresses move from: with --all, every address it holds; otherwise a check")
	f.StringVarP(&o.Interface, "interface", "i", "", "the target's interface (default: the one whose prefix holds each address)")
	f.DurationVar(&o.Timeout, "timeout", 0, "give up after this long (0: as long as the owners' leases make necessary, twice the TTL and 10s)")
	f.DurationVar(&o.Traffic, "traffic-window", time.Second, "once live, count the traffic arriving for each address at the target over this long and print it (0: do not wait for it)")
	f.BoolVar(&o.Force, "force", false, "move to --to even while it is cordoned (vip cordon)")
	f.StringVar(&o.Home, "home", "", "the node each address lives on when at home, which vip uncordon --return takes it back to (default: the home it has, else the node it leaves)")
	_ = c.RegisterFlagCompletionFunc("home", cobra.NoFileCompletions)
	f.BoolVar(&o.JSON, "json", false, "print the moves as JSON")
	addReasonFlag(c, &o.Reason, "why the addresses move")
	o.Store.addFlags(c)
	_ = c.RegisterFlagCompletionFunc("to", cobra.NoFileCompletions)
	_ = c.RegisterFlagCompletionFunc("from", cobra.NoFileCompletions)
	_ = c.RegisterFlagCompletionFunc("interface", cobra.NoFileCompletions)
	return c
}

// request checks the flags and builds the store's move request, as the
// agent's POST /v1/move does.
func (o *moveOptions) request() (store.MoveRequest, error) {
	r, err := fleet.ParseMoveRequest(api.MoveRequest{
		Addrs: o.Addrs, All: o.All, From: o.From, Group: o.Group, To: o.To, Interface: o.Interface,
		Timeout: api.Duration(o.Timeout), TrafficWindow: api.Duration(o.Traffic), Force: o.Force, Home: o.Home,
		Reason: o.Reason,
	})
	if err != nil {
		return r, &inputError{err: err}
	}
	return r, nil
}

// errMoveFailed makes a move of which some address failed exit 1.
var errMoveFailed = errors.New("not moved")

func runMove(ctx context.Context, d *deps, o *moveOptions) error {
	req, err := o.request()
	if err != nil {
		return err
	}
	c, err := o.Store.open(ctx, "move")
	if err != nil {
		return err
	}
	defer c.Close()
	req.Actor = c.LocalActor(req.Actor.Reason)
	mover := fleet.NewMover(c)
	defer mover.Close()
	results, err := mover.Move(ctx, req)
	if err != nil {
		return err
	}
	resp := api.MoveResponse{Moves: make([]api.MoveResult, len(results))}
	for i, r := range results {
		resp.Moves[i] = r.API()
	}
	if o.JSON {
		err = writeJSON(d, resp)
	} else {
		err = printMoves(d.io.Out, d.io.ErrOut, resp.Moves)
	}
	if err != nil {
		return err
	}
	return movesError(resp.Moves)
}

// movesError counts the moves that failed; each was printed with its reason.
func movesError(moves []api.MoveResult) error {
	failed := 0
	for _, m := range moves {
		if !m.OK {
			failed++
		}
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d addresses %w: check each reason above, and vip fleet for where they are", failed, len(moves), errMoveFailed)
}

// printMoves prints one line per move: its timeline on out, its failure on
// errOut.
func printMoves(out, errOut io.Writer, moves []api.MoveResult) error {
	for _, m := range moves {
		if !m.OK {
			fmt.Fprintf(errOut, "vip: %s\n", m.Summary())
			continue
		}
		if _, err := fmt.Fprintln(out, m.Summary()); err != nil {
			return err
		}
	}
	return nil
}

// fleetOptions are the flags of vip fleet.
type fleetOptions struct {
	JSON  bool
	Store storeOptions
}

// newFleetCmd builds vip fleet; runF, when set, runs instead, so tests
// check the flags apart.
func newFleetCmd(d *deps, runF func(context.Context, *fleetOptions) error) *cobra.Command {
	o := &fleetOptions{}
	c := &cobra.Command{
		Use:   "fleet",
		Short: "Show every live node and every claim in the store",
		Long: `Fleet reads the store (--store, or $VIP_STORE) directly, without an agent on
this host, and shows every live node (version, host, pid, interfaces with
their MACs, lease TTL) and every address in the store (its node, interface,
MAC, since when, state, standbys, and the node it is moving to).

A node that stands by for an address but has no registration is named as
such: its agent is stopped, or could not reach the store for longer than its
lease (which expired, and its registration and claims with it); the store
cannot tell which. An address nobody holds is free when a registered node
stands by for it, and unknown when none does.

A key under the prefix that is not one of vip's records is skipped, and
named on standard error with the reason.`,
		Example: `  vip fleet --store etcd://192.0.2.5:2379
  vip fleet --json`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, _ []string) error {
			o.Store.parsed(c, storeFlagNames...)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runFleet(c.Context(), d, o)
		},
	}
	c.Flags().BoolVar(&o.JSON, "json", false, "print the fleet as JSON")
	o.Store.addFlags(c)
	return c
}

func runFleet(ctx context.Context, d *deps, o *fleetOptions) error {
	c, err := o.Store.open(ctx, "fleet")
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.Fleet(ctx)
	if err != nil {
		return err
	}
	c.ReadLeases(ctx, &v)
	now := time.Now()
	f := v.API(now)
	fleet.Annotate(&f)
	for _, s := range f.Skipped {
		fmt.Fprintf(d.io.ErrOut, "vip: skipped %s: %s\n", s.Key, s.Error)
	}
	if o.JSON {
		return writeJSON(d, f)
	}
	return printFleet(d.io.Out, f, now)
}

// printFleet prints the fleet as two tables, the nodes and the claims.
func printFleet(out io.Writer, f api.FleetResponse, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	switch {
	case len(f.Nodes) == 0 && len(f.Unregistered) == 0:
		fmt.Fprintln(w, "no live node: start agents with vip agent --store")
	case len(f.Nodes) == 0:
		// Nodes that stand by are known to the store, registered or
		// not: whether they live, it cannot say (see below).
		fmt.Fprintln(w, "no node registered")
	default:
		fmt.Fprintln(w, "NODE\tVERSION\tHOST\tPID\tLEASE TTL\tRENEWED\tINTERFACES\tCORDON")
		for _, n := range f.Nodes {
			ifs := make([]string, len(n.Interfaces))
			for i, ifc := range n.Interfaces {
				ifs[i] = ifc.Name
				if ifc.MAC != "" {
					ifs[i] += " " + ifc.MAC
				}
				if !ifc.Up {
					ifs[i] += " (down)"
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", n.Node, n.Version, n.Host, n.PID, time.Duration(n.LeaseTTL), renewed(n),
				orDash(strings.Join(ifs, ", ")), orDash(cordonOf(f.Cordons, n.Node, now)))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, n := range f.Unregistered {
		fmt.Fprintf(out, "node %s stands by but is not registered: its agent is stopped, or its lease expired while it could not reach the store (it registers again once it does)\n", n)
	}
	// Cordons of nodes not registered now hold when they come back.
	for _, c := range f.Cordons {
		if !slices.ContainsFunc(f.Nodes, func(n api.FleetNode) bool { return n.Node == c.Node }) {
			fmt.Fprintf(out, "node %s, not registered now, is cordoned: %s\n", c.Node, describeCordon(c, now))
		}
	}
	fmt.Fprintln(out)
	if len(f.Claims) == 0 {
		_, err := fmt.Fprintln(out, "no claims in the store")
		return err
	}
	// A GROUP column only where groups are: a fleet without them reads
	// as it always did.
	grouped := slices.ContainsFunc(f.Claims, func(c api.FleetClaim) bool { return c.Group != "" })
	group := func(c api.FleetClaim) string {
		if !grouped {
			return ""
		}
		return orDash(c.Group) + "\t"
	}
	if grouped {
		fmt.Fprint(w, "GROUP\t")
	}
	fmt.Fprintln(w, "ADDRESS\tNODE\tINTERFACE\tMAC\tSINCE\tSTATE\tSTANDBYS\tMOVING TO\tHOME")
	for _, c := range f.Claims {
		since := "-"
		if !c.ClaimedAt.IsZero() {
			since = now.Sub(c.ClaimedAt).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", group(c), c.Addr, orDash(c.Node), orDash(c.Interface), orDash(c.MAC), since,
			c.State, orDash(strings.Join(c.Standbys, ",")), orDash(c.MovingTo), orDash(c.Home))
	}
	return w.Flush()
}

// cordonOf describes node's cordon among cordons, or is empty.
func cordonOf(cordons []api.Cordon, node string, now time.Time) string {
	i := slices.IndexFunc(cordons, func(c api.Cordon) bool { return c.Node == node })
	if i < 0 {
		return ""
	}
	return describeCordon(cordons[i], now)
}

// describeCordon says in a phrase why a node is cordoned and for how long
// more: `"kernel upgrade", 41m0s left, cordoned 4m0s ago by ops@c`.
func describeCordon(c api.Cordon, now time.Time) string {
	var parts []string
	if c.Reason != "" {
		parts = append(parts, fmt.Sprintf("%q", c.Reason))
	}
	if c.Until.IsZero() {
		parts = append(parts, "until uncordoned")
	} else {
		parts = append(parts, c.Until.Sub(now).Round(time.Second).String()+" left")
	}
	when := "cordoned"
	if !c.Since.IsZero() {
		when += " " + now.Sub(c.Since).Round(time.Second).String() + " ago"
	}
	if c.By != "" {
		when += " by " + c.By
	}
	if when == "cordoned" {
		return strings.Join(parts, ", ")
	}
	return strings.Join(append(parts, when), ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// renewed says how long ago the node's last renewal reached the store, and
// what that means once its renewals stopped: "5s ago, FENCED (expires in
// 1s)".
func renewed(n api.FleetNode) string {
	if n.RenewedAgo == nil {
		return "-"
	}
	s := time.Duration(*n.RenewedAgo).String() + " ago"
	switch n.Health {
	case api.HealthStale:
		s += ", STALE: renewals stopped"
	case api.HealthFenced:
		s += ", FENCED: renewals stopped, it answers nothing"
	default:
		return s
	}
	if n.LeaseLeft != nil {
		s += fmt.Sprintf(" (lease expires in %s)", time.Duration(*n.LeaseLeft))
	}
	return s
}
