package commands

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/store"
)

// errNotHeld makes release --strict and refresh fail: exit 1.
var errNotHeld = errors.New("not held")

// addrsOptions are the flags and arguments of vip release and vip refresh.
type addrsOptions struct {
	Addrs  []string
	All    bool
	Strict bool
	JSON   bool
	// Group names a group's addresses instead.
	Group string
	// Reason is a release's or a refresh's, for the history.
	Reason string
}

func (o *addrsOptions) request() (api.AddrsRequest, error) {
	args := o.Addrs
	switch {
	case o.Group != "" && (o.All || len(args) > 0):
		return api.AddrsRequest{}, badInput("give addresses, --all or --group NAME, one of the three")
	case o.Group != "":
	case o.All && len(args) > 0:
		return api.AddrsRequest{}, badInput("give addresses or --all, not both")
	case !o.All && len(args) == 0:
		return api.AddrsRequest{}, badInput("name at least one address, --all or --group NAME")
	}
	r := api.AddrsRequest{Addrs: args, All: o.All, Group: o.Group}
	if o.Reason != "" {
		if err := checkReason(o.Reason); err != nil {
			return r, err
		}
		r.Reason, r.By = o.Reason, store.LocalUser()
	}
	if _, err := api.ParseAddrsRequest(r); err != nil {
		return r, err
	}
	return r, nil
}

// newReleaseCmd builds vip release; runF, when set, runs instead, so tests
// check the flags apart.
func newReleaseCmd(d *deps, runF func(context.Context, *addrsOptions) error) *cobra.Command {
	o := &addrsOptions{}
	c := &cobra.Command{
		Use:   "release ADDR... | --all | --group NAME",
		Short: "Give addresses up: stop answering for them at once",
		Long: `Release stops answering for each address at once, ends its gratuitous window,
leaves its multicast group and removes the address from the interface if
--assign added it.

Releasing an address that is not held is not an error (exit 0, with a note),
so scripts can run it twice; --strict makes it exit 1 instead.`,
		Example: `  sudo vip release 192.0.2.10
  sudo vip release --all
  sudo vip release --group web`,
		ValidArgsFunction: heldCompletion(d),
		RunE: func(c *cobra.Command, args []string) error {
			o.Addrs = args
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runRelease(c.Context(), d, o)
		},
	}
	c.Flags().BoolVar(&o.All, "all", false, "release every held address")
	addGroupFlag(c, &o.Group, "release every address of the group (vip claim --group)")
	c.Flags().BoolVar(&o.Strict, "strict", false, "exit 1 when an address was not held")
	addReasonFlag(c, &o.Reason, "why the addresses are released (an agent with --store)")
	c.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	return c
}

// newRefreshCmd builds vip refresh; runF, when set, runs instead, so tests
// check the flags apart.
func newRefreshCmd(d *deps, runF func(context.Context, *addrsOptions) error) *cobra.Command {
	o := &addrsOptions{}
	c := &cobra.Command{
		Use:   "refresh ADDR... | --all | --group NAME",
		Short: "Re-arm the gratuitous burst of held addresses",
		Long: `Refresh re-opens the gratuitous window of each held address from now, as
claiming it again would: the way to re-assert ownership after a split brain or
when a slow node rejoins. An address that is not held makes it exit 1.

On an agent with --store, the history records each refresh of an address this
node holds, with who asked and --reason.`,
		Example:           `  sudo vip refresh --all`,
		ValidArgsFunction: heldCompletion(d),
		RunE: func(c *cobra.Command, args []string) error {
			o.Addrs = args
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runRefresh(c.Context(), d, o)
		},
	}
	c.Flags().BoolVar(&o.All, "all", false, "refresh every held address")
	addGroupFlag(c, &o.Group, "refresh every address of the group (vip claim --group)")
	addReasonFlag(c, &o.Reason, "why the addresses are refreshed (an agent with --store)")
	c.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	return c
}

// errConflict makes status --check and probe exit 3.
var errConflict = errors.New("a competing claimer is present")

// statusOptions are the flags of vip status.
type statusOptions struct {
	JSON  bool
	Check bool
}

// newStatusCmd builds vip status; runF, when set, runs instead, so tests
// check the flags apart.
func newStatusCmd(d *deps, runF func(context.Context, *statusOptions) error) *cobra.Command {
	o := &statusOptions{}
	c := &cobra.Command{
		Use:   "status",
		Short: "Show every claim the agent holds",
		Long: `Status lists every claim: address, interface, MAC, state (announcing while
a gratuitous window runs, holding, waiting while its interface is down or
gone), time since the last claim or refresh, window remaining, requests
answered, gratuitous frames sent, competing claimers, what answers (ebpf and
its hook, socket, or kernel for an address on the interface) and, where the
eBPF responder counts it, the traffic arriving: packets/s, bytes/s and the
totals since the claim ("-" where it is unknown). On an agent guarded by a
store, a first line says its place there: node, lease, how long it may still
answer without a renewal (its answer deadline, checked where frames leave),
the frames withheld past it, and whether it is fenced.`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runStatus(c.Context(), d, o)
		},
	}
	c.Flags().BoolVar(&o.JSON, "json", false, "print the status as JSON")
	c.Flags().BoolVar(&o.Check, "check", false, "exit 3 while a competing claimer was seen in the last 10s, or a guarded claim is fenced or lost (is the failover clean?)")
	return c
}

// printStatusJSON prints the agent's answer as it comes when the agent
// formats it as writeJSON would: with 10,000 claims, decoding it and
// encoding it again took most of vip status --json's time. An answer cut
// short leaves what came of it printed, and fails.
func printStatusJSON(ctx context.Context, d *deps) error {
	body, indented, err := d.client().StatusJSON(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	if !indented {
		// An agent from before ?indent=true sends compact JSON.
		b, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		var st api.StatusResponse
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("read the agent's answer: %w", err)
		}
		return writeJSON(d, st)
	}
	_, err = io.Copy(d.io.Out, body)
	return err
}

func printStatus(d *deps, st api.StatusResponse, now time.Time) error {
	if st.Agent.Store != nil {
		fmt.Fprintln(d.io.Out, storeLine(*st.Agent.Store, now))
	}
	if len(st.Claims) == 0 {
		fmt.Fprintf(d.io.Out, "no claims (agent pid %d on %s)\n", st.Agent.PID, st.Agent.Socket)
		return nil
	}
	rows := make([]statusRow, 1, 1+len(st.Claims))
	rows[0] = statusRow{"ADDRESS", "INTERFACE", "MAC", "STATE", "REFRESHED", "WINDOW", "ANSWERED", "GRATUITOUS", "CLAIMERS", "RESPONDER", "TRAFFIC"}
	for _, c := range st.Claims {
		window := "-"
		if c.WindowRemaining > 0 {
			window = time.Duration(c.WindowRemaining).Round(100 * time.Millisecond).String()
		}
		mac := c.MAC
		if mac == "" {
			mac = "-"
		}
		claimers := "-"
		if len(c.Claimers) > 0 {
			macs := make([]string, len(c.Claimers))
			for i, cl := range c.Claimers {
				macs[i] = cl.MAC
			}
			claimers = strings.Join(macs, ",")
		}
		responder := c.Responder
		if responder == "" {
			responder = "-"
		}
		// A standby was never refreshed: a zero time is no age.
		refreshed := "-"
		if !c.RefreshedAt.IsZero() {
			refreshed = now.Sub(c.RefreshedAt).Round(time.Second).String() + " ago"
		}
		rows = append(rows, statusRow{c.Addr, c.Interface, mac, c.State, refreshed,
			window, strconv.FormatUint(c.Answered, 10), strconv.FormatUint(c.GratuitousFrames, 10), claimers, responder, c.Traffic.Summary()})
	}
	out := bufio.NewWriterSize(d.io.Out, 64<<10)
	if err := writeTable(out, rows); err != nil {
		return err
	}
	// What the store says of a claim, under the table rather than in a
	// column: few claims have a note, and the table stays as scripts
	// read it.
	for _, c := range st.Claims {
		if c.Note != "" {
			fmt.Fprintf(out, "%s: %s\n", c.Addr, c.Note)
		}
	}
	for _, g := range groupsOf(st.Claims) {
		fmt.Fprintf(out, "group %s: %s\n", g.name, strings.Join(g.addrs, " "))
	}
	return out.Flush()
}

// storeLine is the status's line about the agent's place in the store.
func storeLine(s api.Store, now time.Time) string {
	line := fmt.Sprintf("store: node %s on %s (prefix %s), lease TTL %s", s.Node, strings.Join(s.Endpoints, ","), s.Prefix, time.Duration(s.LeaseTTL))
	if !s.Renewed.IsZero() {
		line += ", renewed " + now.Sub(s.Renewed).Round(100*time.Millisecond).String() + " ago"
	}
	if s.DeadlineClosed {
		line += ", answers nothing until the store acknowledges a renewal"
		if s.Withheld > 0 {
			line += fmt.Sprintf(" (%d frames withheld)", s.Withheld)
		}
	}
	if !s.Deadline.IsZero() {
		if left := time.Duration(s.DeadlineLeft); left > 0 {
			line += ", answers for " + left.Round(100*time.Millisecond).String() + " more without a renewal"
		} else {
			line += ", answer deadline passed " + (-left).Round(100*time.Millisecond).String() + " ago"
		}
		if s.Withheld > 0 {
			line += fmt.Sprintf(" (%d frames withheld)", s.Withheld)
		}
	}
	if s.Unreachable && s.Failsafe == nil && s.Fenced.IsZero() {
		line += fmt.Sprintf("; STORE UNREACHABLE since %s: no renewal acknowledged for %s",
			s.Renewed.Local().Format(time.TimeOnly), now.Sub(s.Renewed).Round(100*time.Millisecond))
	}
	if f := s.Failsafe; f != nil && !f.AloneUntil.IsZero() {
		line += fmt.Sprintf("; store unreachable since %s: ANSWERING ON FAILSAFE since %s, alone (no other node could take its addresses) until %s (%s more)",
			s.Renewed.Local().Format(time.TimeOnly), f.Since.Local().Format(time.TimeOnly), f.AloneUntil.Local().Format(time.TimeOnly),
			f.AloneUntil.Sub(now).Round(100*time.Millisecond))
	} else if f != nil {
		line += fmt.Sprintf("; store unreachable since %s: ANSWERING ON FAILSAFE since %s, acknowledged by %s %s ago",
			s.Renewed.Local().Format(time.TimeOnly), f.Since.Local().Format(time.TimeOnly), strings.Join(f.AckedBy, ", "),
			now.Sub(f.AckedAt).Round(100*time.Millisecond))
	}
	if s.FailsafeUnready != "" && s.Failsafe == nil && s.Fenced.IsZero() {
		line += "; no failsafe through a store outage now: " + s.FailsafeUnready
	}
	if p := s.Promised; p != nil && p.Until.After(now) {
		line += fmt.Sprintf("; PROMISED %s to take none of its addresses until %s (%s more): takes nothing through the store until then",
			p.Owner, p.Until.Local().Format(time.TimeOnly), p.Until.Sub(now).Round(100*time.Millisecond))
	}
	if !s.Fenced.IsZero() {
		line += ", FENCED since " + s.Fenced.Local().Format(time.TimeOnly) + ": it answers for no guarded claim until it renews its lease"
	}
	if c := s.Cordon; c != nil {
		line += ", CORDONED (" + describeCordon(*c, now) + "): it takes no address by move, take-over or standby"
	}
	return line
}

// statusRow is a line of the plain status, cell by cell.
type statusRow [11]string

// writeTable writes rows with their cells aligned: each column but the
// last as wide as its widest cell and two spaces.
func writeTable(w io.Writer, rows []statusRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		if _, err := io.WriteString(tw, strings.Join(r[:], "\t")+"\n"); err != nil {
			return err
		}
	}
	return tw.Flush()
}

func writeJSON(d *deps, v any) error {
	enc := json.NewEncoder(d.io.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// heldCompletion completes the addresses the agent holds.
func heldCompletion(d *deps) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(c.Context(), time.Second)
		defer cancel()
		st, err := d.client().Status(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := make([]string, len(st.Claims))
		for i, cl := range st.Claims {
			out[i] = cl.Addr + "\t" + cl.Interface
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func runRelease(ctx context.Context, d *deps, o *addrsOptions) error {
	req, err := o.request()
	if err != nil {
		return err
	}
	resp, err := d.client().Release(ctx, req)
	if errors.Is(err, api.ErrUnreachable) {
		// No agent: nothing is held.
		resp, err = api.ReleaseResponse{Released: []string{}, NotHeld: req.Addrs}, nil
		fmt.Fprintf(d.io.ErrOut, "vip: no agent answers on %s, so nothing is held\n", d.socket)
	}
	if err != nil {
		return err
	}
	if o.JSON {
		if err := writeJSON(d, resp); err != nil {
			return err
		}
	} else {
		for _, a := range resp.Released {
			fmt.Fprintf(d.io.Out, "released %s\n", a)
		}
		for _, a := range resp.NotHeld {
			fmt.Fprintf(d.io.ErrOut, "vip: %s was not held\n", a)
		}
	}
	if o.Strict && len(resp.NotHeld) > 0 {
		return fmt.Errorf("%d address(es) %w: drop --strict to take an address not held as released", len(resp.NotHeld), errNotHeld)
	}
	return nil
}

func runRefresh(ctx context.Context, d *deps, o *addrsOptions) error {
	req, err := o.request()
	if err != nil {
		return err
	}
	resp, err := d.client().Refresh(ctx, req)
	if err != nil {
		return err
	}
	if o.JSON {
		if err := writeJSON(d, resp); err != nil {
			return err
		}
	} else {
		for _, a := range resp.Refreshed {
			fmt.Fprintf(d.io.Out, "refreshed %s\n", a)
		}
	}
	if len(resp.NotHeld) > 0 {
		return fmt.Errorf("%v %w: claim it first", resp.NotHeld, errNotHeld)
	}
	return nil
}

func runStatus(ctx context.Context, d *deps, o *statusOptions) error {
	// The command reads one answer, megabytes at 10,000 claims, and
	// ends: a garbage collection would free next to nothing, yet
	// scan every global of the binary, a tenth of its time.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if o.JSON && !o.Check {
		return printStatusJSON(ctx, d)
	}
	st, err := d.client().Status(ctx)
	if err != nil {
		return err
	}
	if o.JSON {
		err = writeJSON(d, st)
	} else {
		err = printStatus(d, st, time.Now())
	}
	if err != nil || !o.Check {
		return err
	}
	return checkStatus(st)
}

// checkStatus is the verdict of status --check: a competing claimer, or a
// guarded claim this host does not answer for (fenced, or lost to another
// node), makes it exit 3.
func checkStatus(st api.StatusResponse) error {
	var conflicted, unguarded []string
	for _, cl := range st.Claims {
		switch cl.State {
		case api.StateConflict:
			conflicted = append(conflicted, cl.Addr)
		case api.StateFenced, api.StateLost:
			unguarded = append(unguarded, cl.Addr+" ("+cl.State+")")
		}
	}
	var lost error
	if len(unguarded) > 0 {
		verb := "are"
		if len(unguarded) == 1 {
			verb = "is"
		}
		lost = fmt.Errorf("%s %s %w: check the store and the network to it (vip status shows each note)", strings.Join(unguarded, ", "), verb, errUnguarded)
	}
	switch {
	case len(conflicted) > 0 && lost != nil:
		return fmt.Errorf("%w for %s, and %w", errConflict, strings.Join(conflicted, ", "), lost)
	case len(conflicted) > 0:
		return fmt.Errorf("%w for %s: check its MAC in the CLAIMERS column and stop that host's claim, or run vip release here", errConflict, strings.Join(conflicted, ", "))
	}
	return lost
}
