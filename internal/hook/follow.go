package hook

import (
	"context"
	"fmt"
	"time"

	"github.com/vipctl/vip/internal/event"
)

// Follow reads events until ctx is done or events is closed, and hands the
// changes t finds in them to r. It only enqueues, so that it keeps up with
// the engine however slow the hooks; a change it does find it read too
// late for (events the publisher dropped) is logged and reported.
func Follow(ctx context.Context, events <-chan event.Event, t *Tracker, r *Runner) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var due <-chan time.Time
	enqueue := func(cs []Change) {
		for _, c := range cs {
			if c.Group == "" && r.cfg.Group != nil {
				c.Group = r.cfg.Group(c.Addr)
			}
			r.Enqueue(c)
		}
		due = nil
		if at, ok := t.Next(); ok {
			timer.Reset(time.Until(at))
			due = timer.C
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-due:
			enqueue(t.Due(now))
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Kind == event.Missed {
				r.missed(ev)
				continue
			}
			enqueue(t.Event(ev))
		}
	}
}

// missed says that the hooks' reader missed events, among which changes
// may have been: their hooks never run.
func (r *Runner) missed(ev event.Event) {
	r.cfg.Log.Warn("the hooks missed events: a change of state among them ran no hook; vip status shows the claims' states now", "missed", ev.Count)
	r.cfg.Report(event.Event{Kind: event.HookFailed, Count: ev.Count,
		Message: fmt.Sprintf("the hooks' reader missed %d events: a change of state among them ran no hook; vip status shows the claims' states now", ev.Count)})
}
