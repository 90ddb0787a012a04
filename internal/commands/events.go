package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
)

// eventsOptions are the flags of vip events.
type eventsOptions struct {
	JSON bool
	// Retry follows the agent across its restarts: a stream that ends
	// is opened again once the agent answers.
	Retry bool
	// Since starts with the events of that long ago the agent still
	// keeps; zero for none.
	Since time.Duration
}

// newEventsCmd builds vip events; runF, when set, runs instead, so tests
// check the flags apart.
func newEventsCmd(d *deps, runF func(context.Context, *eventsOptions) error) *cobra.Command {
	o := &eventsOptions{}
	c := &cobra.Command{
		Use:   "events",
		Short: "Follow the agent's events: claims, refreshes, releases, bursts, interfaces",
		Long: `Events prints the agent's events as they happen, one a line, until
interrupted: claim, refresh, release, revoke, burst-start, burst-end, interface,
conflict and owner-change; on an agent guarded by a store also fence, resume,
taken, move, standby, withheld (frames held back because the lease's answer
deadline had passed, and how many) and stall (the agent did not run past its
deadline: for how long, whether its lease expired, who holds its addresses
now). With --json each line is a JSON object.

With --since DURATION it first prints the events of that long ago that the
agent still keeps (the latest 4096), then follows.

When the agent stops, events exits 4 (the agent is unreachable); with --retry
it waits for the agent instead, follows it again within a second of its
return, says on standard error how long it was away, and first prints the
events the agent kept from after the last one it printed (after a restart,
the new agent's own since it started; a line says when some are no longer
kept).`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), o)
			}
			if o.Since < 0 {
				return badInput("--since %s is negative: give how long ago to start, such as 10m", o.Since)
			}
			return runEvents(c.Context(), d, o)
		},
	}
	c.Flags().BoolVar(&o.JSON, "json", false, "print each event as a JSON object")
	c.Flags().BoolVar(&o.Retry, "retry", false, "when the agent stops or restarts, wait for it and follow it again, from the events it kept since")
	c.Flags().DurationVar(&o.Since, "since", 0, "first print the events of this long ago that the agent still keeps, such as 10m")
	_ = c.RegisterFlagCompletionFunc("since", cobra.NoFileCompletions)
	return c
}

func formatEvent(ev api.Event) string {
	return ev.Time.Format("15:04:05.000") + " " + ev.Summary()
}

func runEvents(ctx context.Context, d *deps, o *eventsOptions) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	enc := json.NewEncoder(d.io.Out)
	var (
		gone time.Time // when the stream last ended, with --retry
		// from is where the next stream starts: the time of the last
		// event printed, once one was.
		from time.Time
	)
	if o.Since > 0 {
		from = time.Now().Add(-o.Since)
	}
	for {
		s, err := d.client().EventsSince(ctx, from)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !o.Retry || !errors.Is(err, api.ErrUnreachable) {
				return err
			}
			if gone.IsZero() {
				gone = time.Now()
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(eventsRetry):
			}
			continue
		}
		if !gone.IsZero() {
			fmt.Fprintf(d.io.ErrOut, "vip: following the agent again after %v away, from the events it kept since %s\n",
				time.Since(gone).Round(100*time.Millisecond), from.Format("15:04:05.000"))
			gone = time.Time{}
		}
		err = followEvents(s, enc, o.JSON, d.io.Out, &from)
		s.Close()
		if ctx.Err() != nil {
			return nil
		}
		if out := (*outputError)(nil); errors.As(err, &out) {
			return out
		}
		if !o.Retry {
			return fmt.Errorf("%w: the agent ended the event stream (%v); it stopped or restarted: vip events --retry follows it across restarts", errStreamEnded, err)
		}
		fmt.Fprintf(d.io.ErrOut, "vip: the agent ended the event stream (%v): waiting for it\n", err)
		gone = time.Now()
		if from.IsZero() {
			from = gone
		}
	}
}

// eventsRetry is how often events --retry looks for the agent again.
const eventsRetry = 200 * time.Millisecond

// errStreamEnded makes vip events exit 4 when its agent goes away.
var errStreamEnded = errors.New("the agent is gone")

// followEvents prints the stream's events until it ends, and says why;
// last is set to the time of each event printed.
func followEvents(s *api.EventStream, enc *json.Encoder, asJSON bool, out io.Writer, last *time.Time) error {
	for {
		ev, err := s.Next()
		if err != nil {
			return err
		}
		if ev.Time.After(*last) {
			*last = ev.Time
		}
		if asJSON {
			if err := enc.Encode(ev); err != nil {
				return &outputError{err}
			}
			continue
		}
		if _, err := fmt.Fprintln(out, formatEvent(ev)); err != nil {
			return &outputError{err}
		}
	}
}

// outputError is a failure to write what vip prints (a closed pipe): no
// agent's fault, and no reason to follow it again.
type outputError struct{ err error }

func (e *outputError) Error() string { return "write the events: " + e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }
