package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/store"
)

// historyOptions are the flags and argument of vip history.
type historyOptions struct {
	Addr   string
	Node   string
	Group  string
	Since  time.Duration
	JSON   bool
	Follow bool
	Store  storeOptions
}

// newHistoryCmd builds vip history; runF, when set, runs instead, so tests
// check the flags apart.
func newHistoryCmd(d *deps, runF func(context.Context, *historyOptions) error) *cobra.Command {
	o := &historyOptions{}
	c := &cobra.Command{
		Use:   "history [ADDR | --group NAME] [--node NODE] [--since DUR] [-f]",
		Short: "Show who moved what, when and why: the store's history of ownership",
		Long: `History reads the store (--store, or $VIP_STORE) from any host and lists every
change of ownership it kept, oldest first: claims, releases, moves (with when
each was asked and released), take-overs, standby takeovers (whose owner's
lease expired), fences and resumptions, losses, cordons and uncordons. Each
has the writer's time, the store's revision (the order the store made them
in), the node, the address, and for an operator's change who asked (user
and host, and the user the store authenticated) and the --reason given.

A change is written in the same transaction as the change itself, so the
history holds it if and only if the store does. A fenced node reaches no
store: its fence is written when it lifts, with the time it began. Each
address and each node keeps its last 64 changes.

ADDR lists that address's changes (and the fences that silenced it); --group
those of the addresses the group has in the store now; --node
those of one node (as owner, as the node it left, or its own); --since leaves
out older ones. -f then follows: each new change is printed as it is made.`,
		Example: `  vip history
  vip history 192.0.2.10 --since 24h
  vip history --node a -f
  vip history --group web
  vip history --json --store etcd://192.0.2.5:2379`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return badInput("vip history takes at most one address, like: vip history 192.0.2.10")
			}
			return nil
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Addr = args[0]
			}
			o.Store.parsed(c, storeFlagNames...)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runHistory(c.Context(), d, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Node, "node", "", "list the changes of this node only")
	addGroupFlag(c, &o.Group, "list the changes of the group's addresses (those it has in the store now)")
	f.DurationVar(&o.Since, "since", 0, "leave out changes older than this, such as 24h (default: all that are kept)")
	f.BoolVarP(&o.Follow, "follow", "f", false, "then print each new change as it is made, until interrupted")
	f.BoolVar(&o.JSON, "json", false, "print the changes as JSON (with -f, one change per line)")
	o.Store.addFlags(c)
	_ = c.RegisterFlagCompletionFunc("node", cobra.NoFileCompletions)
	_ = c.RegisterFlagCompletionFunc("since", cobra.NoFileCompletions)
	return c
}

// query checks the flags and builds the store's query.
func (o *historyOptions) query(now time.Time) (store.HistoryQuery, error) {
	var q store.HistoryQuery
	if o.Addr != "" {
		a, err := netip.ParseAddr(o.Addr)
		if err != nil || a.Zone() != "" {
			return q, badInput("%q is not an IP address: give one such as 192.0.2.10 or 2001:db8::10", o.Addr)
		}
		q.Addr = a.Unmap()
	}
	if o.Group != "" {
		if o.Addr != "" {
			return q, badInput("give an address or --group NAME, not both")
		}
		if err := api.CheckGroup(o.Group); err != nil {
			return q, &inputError{err: err}
		}
	}
	if o.Node != "" {
		if err := store.CheckNode(o.Node); err != nil {
			return q, badInput("%v: name a node as vip fleet lists it", err)
		}
		q.Node = o.Node
	}
	switch {
	case o.Since < 0:
		return q, badInput("--since %v is negative: give how far back to look, such as 24h", o.Since)
	case o.Since > 0:
		q.Since = now.Add(-o.Since)
	}
	return q, nil
}

func runHistory(ctx context.Context, d *deps, o *historyOptions) error {
	q, err := o.query(time.Now())
	if err != nil {
		return err
	}
	if o.Follow {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
	}
	c, err := o.Store.open(ctx, "history")
	if err != nil {
		return err
	}
	defer c.Close()
	if o.Group != "" {
		if q.Addrs, err = groupMembers(ctx, c, o.Group); err != nil {
			return err
		}
	}
	changes, rev, skipped, err := c.History(ctx, q)
	if err != nil {
		return fmt.Errorf("read the history: %w", err)
	}
	if skipped > 0 {
		fmt.Fprintf(d.io.ErrOut, "vip: skipped %d history records this vip cannot read (written by a newer vip, or not vip's)\n", skipped)
	}
	switch {
	case o.JSON && o.Follow:
		enc := json.NewEncoder(d.io.Out)
		for _, ch := range changes {
			if err := enc.Encode(ch.API()); err != nil {
				return err
			}
		}
	case o.JSON:
		resp := api.HistoryResponse{Revision: rev, Changes: make([]api.HistoryChange, len(changes)), Skipped: skipped}
		for i, ch := range changes {
			resp.Changes[i] = ch.API()
		}
		return writeJSON(d, resp)
	default:
		if len(changes) == 0 && !o.Follow {
			fmt.Fprintln(d.io.Out, "no change of ownership is kept in the store for this query")
			return nil
		}
		printHistory(d.io.Out, changes, true)
	}
	if !o.Follow {
		return nil
	}
	return followHistory(ctx, d, c, q, rev, o.JSON)
}

// followHistory prints each change from after rev as it is made, until
// ctx is done. A watch that breaks (the store lost, its leader changed)
// is made again from the last revision seen, after reading what it
// missed.
func followHistory(ctx context.Context, d *deps, c *store.Client, q store.HistoryQuery, rev int64, asJSON bool) error {
	enc := json.NewEncoder(d.io.Out)
	emit := func(changes []store.Change) error {
		for _, ch := range changes {
			rev = max(rev, ch.Rev)
		}
		if asJSON {
			for _, ch := range changes {
				if err := enc.Encode(ch.API()); err != nil {
					return err
				}
			}
			return nil
		}
		printHistory(d.io.Out, changes, false)
		return nil
	}
	for ctx.Err() == nil {
		for batch := range c.WatchHistory(ctx, q, rev) {
			if err := emit(batch); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			break
		}
		// The watch broke: read what it missed, then watch again.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
		missed := q
		missed.After = rev
		changes, at, _, err := c.History(ctx, missed)
		if err != nil {
			fmt.Fprintf(d.io.ErrOut, "vip: %v: following again once the store answers\n", err)
			continue
		}
		if err := emit(changes); err != nil {
			return err
		}
		rev = max(rev, at)
	}
	return nil
}

// printHistory prints changes as a table, with its header when head.
func printHistory(out io.Writer, changes []store.Change, head bool) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if head {
		fmt.Fprintln(tw, "TIME\tREV\tCHANGE\tWHAT\tBY\tREASON")
	}
	for _, ch := range changes {
		by := ch.By
		if ch.Identity != "" {
			if by != "" {
				by += " "
			}
			by += "(store user " + ch.Identity + ")"
		}
		reason := ""
		if ch.Reason != "" {
			reason = strconv.Quote(ch.Reason)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", ch.Time.Local().Format("2006-01-02 15:04:05.000"), ch.Rev, ch.Kind,
			ch.Describe(), dash(by), dash(reason))
	}
	_ = tw.Flush()
}

// dash is s, or "-" when it is empty, for a table's cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
