package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// drainOptions are the flags and argument of vip drain.
type drainOptions struct {
	Node    string
	To      string
	Quiet   time.Duration
	Timeout time.Duration
	Reason  string
	Force   bool
	JSON    bool
	Store   storeOptions
}

// DefaultQuiet is how long vip drain waits with no traffic reaching the old
// owner: twice the gratuitous window (5 s), by when every neighbour that
// heard the new owner's burst has moved, and an active flow whose cache is
// stale has sent to the old owner (a cache Linux did not update goes stale
// and probes by unicast, which the old owner counts).
const DefaultQuiet = 10 * time.Second

// DefaultDrainTimeout is how long vip drain waits for quiet by default.
const DefaultDrainTimeout = 2 * time.Minute

// drainPoll is how often vip drain reads the old owner's counts, which its
// agent writes at most once a second.
const drainPoll = 250 * time.Millisecond

// drainUnlisted is how long after the moves vip drain waits for the old
// owner's record to list a moved address before it says it is not counted.
const drainUnlisted = 5 * time.Second

// drainStale is how long the old owner's record may go unwritten while
// addresses linger there: its agent writes it at least every
// agent.lingerHeartbeat (5 s) then.
const drainStale = 15 * time.Second

// errNotQuiet makes vip drain exit 3 when traffic still reaches the old
// owner at --timeout.
var errNotQuiet = errors.New("still gets traffic")

// errUncounted makes vip drain exit 3 when the old owner did not count a
// moved address: its quiet is not shown.
var errUncounted = errors.New("did not count")

func newDrainCmd(d *deps, runF func(context.Context, *drainOptions) error) *cobra.Command {
	o := &drainOptions{}
	c := &cobra.Command{
		Use:   "drain NODE [--to NODE] [--quiet DUR] [--timeout DUR]",
		Short: "Cordon a node, move its addresses away and wait until no traffic reaches it",
		Long: `Drain cordons NODE (vip cordon; an existing cordon is kept) and moves every
address it holds, as vip move does: to --to, else each to one of its standbys
that is live and not cordoned (the first by name). An address with nowhere to
go refuses the drain before anything changes, and is named.

Then it waits until the old owner has counted no traffic for the moved
addresses for --quiet (default 10s: twice the 5-second gratuitous window, by
when neighbours that heard the new owner have moved and an active flow with a
stale cache has shown itself). The old owner's agent keeps counting each
released address in the kernel for its --linger (default 5m): the packets
sent to its MAC, and who sent them. Drain prints per address the packets that
still reached the old owner after the move, the last one's time (in that
node's clock) and the senders (MAC and address: the hosts whose caches are
stale). It exits 0 once every address is quiet, and 3 at --timeout with the
addresses that still get traffic and from whom.

The counts need the old owner's eBPF responder: a node that answers on packet
sockets counts nothing after a release, and drain refuses to wait on it; give
--quiet 0 to move without the proof.`,
		Example: `  vip drain a --reason "kernel upgrade"
  vip drain a --to b --quiet 30s --timeout 5m
  vip drain a --json --store etcd://192.0.2.5:2379`,
		Args:              cordonArgs("drain"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, args []string) error {
			o.Node = args[0]
			o.Store.parsed(c, storeFlagNames...)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runDrain(c.Context(), d, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.To, "to", "", "move every address to this node (default: each to a live standby that is not cordoned)")
	f.DurationVar(&o.Quiet, "quiet", DefaultQuiet, "how long no traffic may reach the old owner before the drain is done; 0 moves without waiting")
	f.DurationVar(&o.Timeout, "timeout", DefaultDrainTimeout, "how long to wait for quiet, then exit 3 naming who still sends")
	addReasonFlag(c, &o.Reason, "why the node is drained, kept in its cordon and its moves")
	f.BoolVar(&o.Force, "force", false, "move to a cordoned --to all the same")
	f.BoolVar(&o.JSON, "json", false, "print the drain as JSON")
	o.Store.addFlags(c)
	_ = c.RegisterFlagCompletionFunc("to", cobra.NoFileCompletions)
	for _, name := range []string{"quiet", "timeout"} {
		_ = c.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
	}
	return c
}

// check refuses bad flags before anything connects.
func (o *drainOptions) check() error {
	if o.To != "" {
		if err := store.CheckNode(o.To); err != nil {
			return badInput("--to: %v: name a node as vip fleet lists it", err)
		}
	}
	if o.Quiet < 0 || o.Quiet > time.Hour {
		return badInput("--quiet %v: give how long the old owner must see no traffic, from 0 (do not wait) to 1h", o.Quiet)
	}
	if o.Quiet > 0 && o.Timeout < o.Quiet {
		return badInput("--timeout %v is shorter than --quiet %v: give a timeout of at least the quiet", o.Timeout, o.Quiet)
	}
	return (&cordonOptions{Reason: o.Reason}).check()
}

func runDrain(ctx context.Context, d *deps, o *drainOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	c, err := o.Store.open(ctx, "drain")
	if err != nil {
		return err
	}
	defer c.Close()
	now := time.Now()
	v, err := c.Fleet(ctx)
	if err != nil {
		return fmt.Errorf("drain node %s: %w", o.Node, err)
	}
	if _, live := v.NodeByName(o.Node); !live {
		return badInput("node %s is not alive in the store (live nodes: %s): check the name; a node that is gone holds nothing, its standbys take its addresses", o.Node, liveNodes(ctx, c))
	}
	plan, err := fleet.PlanDrain(v, o.Node, o.To, o.Force, now)
	if err != nil {
		return &inputError{err: err}
	}
	if len(plan.Nowhere) > 0 {
		return badInput("drain of node %s refused, nothing changed: %s %s no standby that is live and not cordoned: give --to NODE, or add a standby (vip claim ADDR --standby on another node)",
			o.Node, joinAddrs(plan.Nowhere), plural(len(plan.Nowhere), "has", "have"))
	}
	var counts *store.Lingering
	if o.Quiet > 0 && len(plan.To) > 0 {
		if counts, err = c.ReadLingering(ctx, o.Node); err != nil {
			return fmt.Errorf("drain node %s: read what it counts after a release: %w", o.Node, err)
		}
		if err := o.canProve(counts, v, plan); err != nil {
			return err
		}
	}

	resp := api.DrainResponse{Node: o.Node, Quiet: api.Duration(o.Quiet)}
	cordon, err := o.cordon(ctx, c, v, now)
	if err != nil {
		return err
	}
	resp.Cordon = cordon.API(now)

	targets, byTarget := plan.Targets()
	mover := fleet.NewMover(c)
	defer mover.Close()
	released := map[netip.Addr]time.Time{}
	to := map[netip.Addr]string{}
	for _, target := range targets {
		results, err := mover.Move(ctx, store.MoveRequest{Addrs: byTarget[target], From: o.Node, To: target, TrafficWindow: time.Second, Force: o.Force,
			Actor: c.LocalActor(drainReason(o.Reason))})
		if err != nil {
			return fmt.Errorf("drain node %s: move to %s: %w", o.Node, target, err)
		}
		for _, r := range results {
			resp.Moves = append(resp.Moves, r.API())
			if !r.Done() || r.Already {
				continue
			}
			at := r.Released
			if at.IsZero() {
				at = r.Live
			}
			released[r.Addr], to[r.Addr] = at, r.To
		}
	}
	moveErr := movesError(resp.Moves)

	var quiet *fleet.Quiet
	var waitErr error
	if o.Quiet > 0 && len(released) > 0 {
		quiet = fleet.NewQuiet(o.Quiet, released)
		// The moves are printed whatever became of the wait.
		waitErr = o.waitQuiet(ctx, c, quiet, to)
		now := time.Now()
		for _, qa := range quiet.Addrs() {
			resp.Addrs = append(resp.Addrs, drainAddr(quiet, qa, to[qa.Addr], now))
		}
	}
	resp.Done = moveErr == nil && waitErr == nil && (quiet == nil || quiet.Done(time.Now()))

	if o.JSON {
		if err := writeJSON(d, resp); err != nil {
			return err
		}
	} else if err := printDrain(d.io.Out, d.io.ErrOut, resp); err != nil {
		return err
	}
	if moveErr != nil {
		return moveErr
	}
	if waitErr != nil {
		return waitErr
	}
	return drainError(resp)
}

// canProve refuses, before anything changes, a drain whose quiet the old
// owner cannot show: its agent writes no counts, counts nothing after a
// release, answers on sockets where an address lives, or stops counting
// before the timeout.
func (o *drainOptions) canProve(counts *store.Lingering, v store.View, plan fleet.DrainPlan) error {
	const without = "give --quiet 0 to drain without waiting for quiet"
	switch {
	case counts == nil:
		return badInput("node %s's agent has written no counts of traffic after a release (it is a vip older than this one, or could not write to the store yet): %s", o.Node, without)
	case counts.Linger == 0:
		return badInput("node %s's agent runs with --linger 0 and counts no traffic after a release: %s, or restart it without --linger 0", o.Node, without)
	case time.Duration(counts.Linger) < o.Timeout:
		return badInput("--timeout %v is past node %s's --linger %v, when it stops counting: give a timeout of at most %v", o.Timeout, o.Node, time.Duration(counts.Linger), time.Duration(counts.Linger))
	case len(plan.To) > store.MaxLingerAddrs:
		return badInput("node %s holds %d addresses, and its counts after a release list at most %d: move some first with vip move, or %s", o.Node, len(plan.To), store.MaxLingerAddrs, without)
	}
	for a := range plan.To {
		cv, _ := v.ClaimOf(a)
		if slices.Contains(counts.Uncounted, cv.Claim.Interface) {
			return badInput("node %s answers on packet sockets on %s (%s is there) and cannot count traffic after a release: %s, or run its agent with --responder ebpf", o.Node, cv.Claim.Interface, a, without)
		}
	}
	return nil
}

// drainReason is the reason a drain records, in its cordon and its moves.
func drainReason(reason string) string {
	if reason == "" {
		return "drain"
	}
	return "drain: " + reason
}

// cordon cordons the node unless a cordon holds already, which is kept.
func (o *drainOptions) cordon(ctx context.Context, c *store.Client, v store.View, now time.Time) (store.Cordon, error) {
	if rec, ok := v.CordonOf(o.Node); ok && rec.Active(now) {
		return rec, nil
	}
	rec, _, err := c.PutCordon(ctx, store.Cordon{Node: o.Node, Reason: drainReason(o.Reason), By: store.LocalUser(), Since: now.UTC()}, 0)
	if err != nil {
		return store.Cordon{}, fmt.Errorf("drain node %s: cordon it: %w", o.Node, err)
	}
	return rec, nil
}

// waitQuiet reads the old owner's counts, and those of former owners
// that still count a drained address, until every address is quiet, or
// the timeout. to is each address's new owner.
func (o *drainOptions) waitQuiet(ctx context.Context, c *store.Client, q *fleet.Quiet, to map[netip.Addr]string) error {
	start := time.Now()
	deadline := start.Add(o.Timeout)
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	missing := 0
	for {
		// Every node's record: the drained node's, and those of former
		// owners that still count a drained address.
		all, err := c.ReadAllLingering(ctx)
		now := time.Now()
		var rec *store.Lingering
		for i := range all {
			if all[i].Node == o.Node {
				rec = &all[i]
			} else {
				q.ObserveFormer(all[i], func(a netip.Addr) string { return to[a] }, now)
			}
		}
		switch {
		case err != nil && !errors.Is(err, store.ErrUnreachable):
			return fmt.Errorf("drain node %s: the moves are done, but its counts cannot be read: %w", o.Node, err)
		case err != nil:
			// A store that does not answer for a moment is read again.
		case rec == nil:
			missing++
			if missing*int(drainPoll) >= int(drainUnlisted) {
				return fmt.Errorf("node %s's counts after the release are gone from the store (its agent stopped, or its lease ended): the moves are done, but quiet cannot be shown; check with vip fleet", o.Node)
			}
		default:
			missing = 0
			q.Observe(rec, now)
		}
		if q.Stale(now) > drainStale {
			return fmt.Errorf("node %s has not written its counts for %v while addresses linger there (its agent is stuck, or cannot write to the store): the moves are done, but quiet cannot be shown; check its agent's log", o.Node, q.Stale(now).Round(time.Second))
		}
		// Past drainUnlisted an address still not counted will not be:
		// waiting longer shows nothing.
		if q.Done(now) || !now.Before(deadline) || now.Sub(start) > drainUnlisted && q.Uncounted() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func drainAddr(q *fleet.Quiet, qa *fleet.QuietAddr, to string, now time.Time) api.DrainAddr {
	l := qa.Linger
	out := api.DrainAddr{
		Addr: qa.Addr.String(), To: to, Counted: qa.Counted && !qa.Lost, Quiet: q.IsQuiet(qa, now),
		Packets: l.Packets, Bytes: l.Bytes, Last: l.Last, MoreSenders: l.MoreSenders, MorePackets: l.MorePackets,
	}
	for _, s := range l.Senders {
		out.Senders = append(out.Senders, api.DrainSender{MAC: s.MAC, From: s.From.String(), Packets: s.Packets, Last: s.Last})
	}
	for _, f := range q.FormersOf(qa.Addr) {
		df := api.DrainFormer{Node: f.Node, Quiet: q.FormerQuiet(f, now), Packets: f.Packets()}
		if df.Packets > 0 {
			df.Last = f.Linger.Last
			for _, s := range f.Linger.Senders {
				df.Senders = append(df.Senders, api.DrainSender{MAC: s.MAC, From: s.From.String(), Packets: s.Packets, Last: s.Last})
			}
		}
		out.Formers = append(out.Formers, df)
	}
	return out
}

// printDrain prints the cordon, the moves, then a line per address.
func printDrain(out, errOut io.Writer, r api.DrainResponse) error {
	if r.Cordon != nil {
		fmt.Fprintf(out, "node %s is cordoned (reason %q): it takes no address by move, take-over or standby\n", r.Node, r.Cordon.Reason)
	}
	if len(r.Moves) == 0 {
		fmt.Fprintf(out, "node %s holds no address: nothing to move\n", r.Node)
	}
	if err := printMoves(out, errOut, r.Moves); err != nil {
		return err
	}
	for _, a := range r.Addrs {
		_, err := fmt.Fprintln(out, describeDrained(a, r.Node, time.Duration(r.Quiet)))
		if err != nil {
			return err
		}
	}
	return nil
}

// describe says in one line what still reached node for the address.
func describeDrained(a api.DrainAddr, node string, quiet time.Duration) string {
	var b strings.Builder
	switch {
	case !a.Counted:
		fmt.Fprintf(&b, "%s: not counted: node %s did not count it after the release (or stopped: its agent restarted)", a.Addr, node)
		return b.String()
	case a.Quiet && a.Packets == 0:
		fmt.Fprintf(&b, "%s: quiet: no packet reached %s after the move (%v waited)", a.Addr, node, quiet)
		describeFormers(&b, a)
		return b.String()
	case a.Quiet:
		fmt.Fprintf(&b, "%s: quiet for %v: %d %s reached %s after the move, the last at %s (%s's clock)", a.Addr, quiet, a.Packets, plural(int(a.Packets), "packet", "packets"), node, a.Last.Local().Format("15:04:05.000"), node)
	default:
		fmt.Fprintf(&b, "%s: still gets traffic: %d %s reached %s after the move, the last at %s (%s's clock)", a.Addr, a.Packets, plural(int(a.Packets), "packet", "packets"), node, a.Last.Local().Format("15:04:05.000"), node)
	}
	var from []string
	for _, s := range a.Senders {
		from = append(from, fmt.Sprintf("%s (%s, %d)", s.MAC, s.From, s.Packets))
	}
	switch {
	case a.MoreSenders > 0 && a.MorePackets == 0:
		// An agent that did not count what they sent.
		from = append(from, fmt.Sprintf("%d more", a.MoreSenders))
	case a.MoreSenders > 0:
		from = append(from, fmt.Sprintf("%d more %s (%d)", a.MoreSenders, plural(a.MoreSenders, "sender", "senders"), a.MorePackets))
	}
	// The node remembers a bounded number of senders: the packets of
	// those it forgot are counted all the same, and said, so that the
	// list adds up to the count.
	if n := a.Unremembered(); n > 0 && len(from) == 0 {
		from = append(from, "senders not remembered")
	} else if n > 0 {
		from = append(from, fmt.Sprintf("%d from senders not remembered", n))
	}
	if len(from) > 0 {
		fmt.Fprintf(&b, ", from %s", strings.Join(from, ", "))
	}
	describeFormers(&b, a)
	return b.String()
}

// describeFormers adds what reached the address's former owners, which
// still count it, since the drain began.
func describeFormers(b *strings.Builder, a api.DrainAddr) {
	for _, f := range a.Formers {
		switch {
		case f.Quiet && f.Packets == 0:
			fmt.Fprintf(b, "; quiet at former owner %s too", f.Node)
		case f.Quiet:
			fmt.Fprintf(b, "; quiet at former owner %s too, after %d %s", f.Node, f.Packets, plural(int(f.Packets), "packet", "packets"))
		default:
			fmt.Fprintf(b, "; former owner %s still gets traffic for it: %d %s since the drain began, the last at %s (%s's clock)%s",
				f.Node, f.Packets, plural(int(f.Packets), "packet", "packets"), f.Last.Local().Format("15:04:05.000"), f.Node, sendersOf(f.Senders))
		}
	}
}

// sendersOf lists senders as ", from MAC (IP, packets), ...", or nothing.
func sendersOf(senders []api.DrainSender) string {
	if len(senders) == 0 {
		return ""
	}
	from := make([]string, len(senders))
	for i, s := range senders {
		from[i] = fmt.Sprintf("%s (%s, %d)", s.MAC, s.From, s.Packets)
	}
	return ", from " + strings.Join(from, ", ")
}

// drainError names the addresses that are not quiet, and who still sends,
// and those the old owner did not count.
func drainError(r api.DrainResponse) error {
	var loud, uncounted, formers []string
	for _, a := range r.Addrs {
		for _, f := range a.Formers {
			if !f.Quiet {
				formers = append(formers, fmt.Sprintf("node %s for %s (from %s)", f.Node, a.Addr, whoSent(f.Senders, 0)))
			}
		}
		switch {
		case a.Quiet:
		case !a.Counted:
			uncounted = append(uncounted, a.Addr)
		default:
			loud = append(loud, fmt.Sprintf("%s (from %s)", a.Addr, whoSent(a.Senders, a.MoreSenders)))
		}
	}
	var errs []error
	if len(loud) > 0 {
		errs = append(errs, fmt.Errorf("node %s %w for %s: their caches still name it; wait longer (--timeout), or clear them (ip neigh flush on those hosts)", r.Node, errNotQuiet, strings.Join(loud, "; ")))
	}
	if len(formers) > 0 {
		errs = append(errs, fmt.Errorf("a former owner %w: %s: their caches still name it, and it answers no more; wait longer (--timeout), or clear them (ip neigh flush on those hosts)", errNotQuiet, strings.Join(formers, "; ")))
	}
	if len(uncounted) > 0 {
		errs = append(errs, fmt.Errorf("node %s %w %s after the release (its agent restarted, or stopped counting): check with tcpdump on it", r.Node, errUncounted, strings.Join(uncounted, ", ")))
	}
	return errors.Join(errs...)
}

// whoSent names the senders, "IP MAC" each, or says none was remembered
// (more of them not listed).
func whoSent(senders []api.DrainSender, more int) string {
	if len(senders) == 0 {
		if more > 0 {
			return fmt.Sprintf("%d senders not listed", more)
		}
		return "no sender remembered"
	}
	s := make([]string, len(senders))
	for i, x := range senders {
		s[i] = x.From + " " + x.MAC
	}
	return strings.Join(s, ", ")
}

func joinAddrs(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
