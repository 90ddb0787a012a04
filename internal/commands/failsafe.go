package commands

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/store"
)

// failsafeOptions are the flags and argument of vip failsafe and vip
// failsafe clear.
type failsafeOptions struct {
	Node   string
	Reason string
	JSON   bool
	Store  storeOptions
}

// newFailsafeCmd builds vip failsafe, and its clear; runF and clearF, when
// set, run instead, so tests check the flags apart.
func newFailsafeCmd(d *deps, runF, clearF func(context.Context, *failsafeOptions) error) *cobra.Command {
	o := &failsafeOptions{}
	c := &cobra.Command{
		Use:   "failsafe",
		Short: "List the owners' failsafe sets, and which nodes they hold",
		Long: `Failsafe lists, from the store (--store, or $VIP_STORE), the failsafe set of
every owner that runs vip agent --failsafe: the nodes it asks to answer on
when the store is unreachable. While the owner's lease lives, a set only
says whom it would ask. Once the lease is gone, the owner may still answer
on failsafe, on the promises of the nodes of its set: the live nodes it
leaves out take nothing through the store (no claim, take-over or move)
until a node of the set reaches the store and clears it, which it does by
itself once its promises to the owner ended.

A set whose owner and nodes are all gone for good holds those nodes until
an operator clears it: vip failsafe clear NODE.`,
		Example: `  vip failsafe
  vip failsafe --json --store etcd://192.0.2.5:2379`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 0 {
				return badInput("vip failsafe takes no argument: to clear a lapsed owner's set, run vip failsafe clear NODE")
			}
			return nil
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, _ []string) error {
			o.Store.parsed(c, storeFlagNames...)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runFailsafe(c.Context(), d, o)
		},
	}
	c.Flags().BoolVar(&o.JSON, "json", false, "print the sets as JSON")
	o.Store.addFlags(c)
	c.AddCommand(newFailsafeClearCmd(d, clearF))
	return c
}

// newFailsafeClearCmd builds vip failsafe clear.
func newFailsafeClearCmd(d *deps, runF func(context.Context, *failsafeOptions) error) *cobra.Command {
	o := &failsafeOptions{}
	c := &cobra.Command{
		Use:   "clear NODE [--reason TEXT]",
		Short: "Clear the failsafe set of an owner gone for good",
		Long: `Clear deletes NODE's failsafe set from the store, so that the nodes it left
out take addresses again, and records who did in the history (vip history).

Clear only the set of an owner that is gone for good, with every node of
its set: while NODE's agent runs somewhere cut off from the store, with a
node of its set beside it, it may answer on failsafe for its addresses, and
a node you let take one answers beside it. A node of the set clears it by
itself once it reaches the store again. The set of an owner whose lease
lives is refused: it goes when that agent stops.`,
		Example:           `  vip failsafe clear a --reason "host a decommissioned, b with it"`,
		Args:              cordonArgs("failsafe clear"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, args []string) error {
			o.Node = args[0]
			o.Store.parsed(c, storeFlagNames...)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runFailsafeClear(c.Context(), d, o)
		},
	}
	addReasonFlag(c, &o.Reason, "why the set is cleared")
	c.Flags().BoolVar(&o.JSON, "json", false, "print the set cleared as JSON")
	o.Store.addFlags(c)
	return c
}

// failsafeSetOf is s as vip failsafe says it, against the live nodes.
func failsafeSetOf(s store.FailsafeSet, nodes []store.Node) api.FailsafeSet {
	out := api.FailsafeSet{Node: s.Node, Lease: strconv.FormatInt(s.Lease, 16), Nodes: s.Named(nodes), Lapsed: s.Lapsed(nodes), AloneMS: s.AloneMS}
	if out.Lapsed {
		out.Holds = s.Outside(nodes)
	}
	return out
}

// namedBefore moves, of the nodes a lapsed set holds, those it named under
// an earlier record (had, at the set's revision, says whether one stood
// then) to NamedBefore: as the agents read it (fleet's namedBefore). One
// that cannot be told (etcd compacted the revision away) stays held.
func namedBefore(s store.FailsafeSet, out *api.FailsafeSet, had func(node string, rev int64) (bool, error)) {
	if !out.Lapsed || s.Unreadable || s.Format < store.FailsafeFormat || s.Rev <= 0 {
		return
	}
	var holds []string
	for _, n := range out.Holds {
		if ok, err := had(n, s.Rev); err == nil && ok {
			out.NamedBefore = append(out.NamedBefore, n)
		} else {
			holds = append(holds, n)
		}
	}
	out.Holds = holds
}

func runFailsafe(ctx context.Context, d *deps, o *failsafeOptions) error {
	c, err := o.Store.open(ctx, "failsafe")
	if err != nil {
		return err
	}
	defer c.Close()
	sets, nodes, _, err := c.FailsafeSets(ctx)
	if err != nil {
		return fmt.Errorf("read the failsafe sets: %w", err)
	}
	resp := api.FailsafeSetsResponse{Sets: []api.FailsafeSet{}}
	for _, s := range sets {
		out := failsafeSetOf(s, nodes)
		namedBefore(s, &out, func(node string, rev int64) (bool, error) {
			created, err := c.NodeAt(ctx, node, rev)
			return created > 0, err
		})
		resp.Sets = append(resp.Sets, out)
	}
	if o.JSON {
		return writeJSON(d, resp)
	}
	if len(resp.Sets) == 0 {
		fmt.Fprintln(d.io.Out, "no failsafe set in the store: no agent runs with --failsafe")
		return nil
	}
	tw := tabwriter.NewWriter(d.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OWNER\tLEASE\tASKS\tSTATE")
	for _, s := range resp.Sets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Node, s.Lease, orNone(slices.Concat(s.Nodes, s.NamedBefore)), describeSet(s))
	}
	return tw.Flush()
}

// describeSet says what a set does now.
func describeSet(s api.FailsafeSet) string {
	switch {
	case !s.Lapsed:
		return "owner live"
	case len(s.Nodes) == 0 && s.AloneMS > 0:
		return fmt.Sprintf("owner's lease gone, and it had no other node to ask: it may answer alone on failsafe for up to %s after; nodes take nothing that long after they find the lease gone",
			time.Duration(s.AloneMS)*time.Millisecond)
	case len(s.Holds) == 0 && len(s.NamedBefore) > 0:
		return fmt.Sprintf("owner's lease gone: holds no live node (a node of its set clears it once it reaches the store; %s joined again since, named under an earlier record)",
			strings.Join(s.NamedBefore, ", "))
	case len(s.Holds) == 0:
		return "owner's lease gone: holds no live node (a node of its set clears it once it reaches the store)"
	default:
		return fmt.Sprintf("owner's lease gone: %s take nothing until a node of its set clears it (or vip failsafe clear %s, if %s and its set are gone for good)",
			strings.Join(s.Holds, ", "), s.Node, s.Node)
	}
}

func orNone(nodes []string) string {
	if len(nodes) == 0 {
		return "-"
	}
	return strings.Join(nodes, ",")
}

func runFailsafeClear(ctx context.Context, d *deps, o *failsafeOptions) error {
	if err := checkReason(o.Reason); err != nil {
		return err
	}
	c, err := o.Store.open(ctx, "failsafe clear")
	if err != nil {
		return err
	}
	defer c.Close()
	sets, nodes, _, err := c.FailsafeSets(ctx)
	if err != nil {
		return fmt.Errorf("read the failsafe sets: %w", err)
	}
	i := slices.IndexFunc(sets, func(s store.FailsafeSet) bool { return s.Node == o.Node })
	if i < 0 {
		var owners []string
		for _, s := range sets {
			owners = append(owners, s.Node)
		}
		return badInput("node %s has no failsafe set in the store (sets: %s): vip failsafe lists them", o.Node, orNone(owners))
	}
	s := sets[i]
	if !s.Lapsed(nodes) {
		return badInput("node %s renews the lease its failsafe set was written under: its agent runs, and the set goes when it stops; clear only the set of an owner gone for good", o.Node)
	}
	ok, err := c.ClearFailsafeSet(ctx, s, c.LocalActor(o.Reason))
	if err != nil {
		return fmt.Errorf("clear node %s's failsafe set: %w", o.Node, err)
	}
	if !ok {
		return fmt.Errorf("node %s's failsafe set changed as it was cleared (its owner is back, or a node of its set cleared it): see vip failsafe", o.Node)
	}
	out := failsafeSetOf(s, nodes)
	out.Cleared = true
	if o.JSON {
		return writeJSON(d, out)
	}
	fmt.Fprintf(d.io.Out, "cleared node %s's failsafe set (it asked %s)", o.Node, orNone(out.Nodes))
	if len(out.Holds) > 0 {
		fmt.Fprintf(d.io.Out, ": %s take addresses again", strings.Join(out.Holds, ", "))
	}
	fmt.Fprintln(d.io.Out)
	return nil
}
