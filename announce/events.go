package announce

import (
	"fmt"
	"sync"
	"time"

	"github.com/vipctl/vip/internal/event"
)

// EventKind names what an Event reports.
type EventKind = event.Kind

// The kinds of Event, as `vip events` prints them.
const (
	EventClaim       = event.Claim
	EventResume      = event.Resume // a claim taken back, not claimed anew (Engine.Adopt, Engine.Resume)
	EventRefresh     = event.Refresh
	EventRelease     = event.Release
	EventSuspend     = event.Suspend // claims the fence stopped at once (Engine.Suspend)
	EventBurstStart  = event.BurstStart
	EventBurstEnd    = event.BurstEnd
	EventInterface   = event.Interface
	EventConflict    = event.Conflict
	EventOwnerChange = event.OwnerChange // an address not held here moved, or flip-flopped
	EventMissed      = event.Missed      // how many events a slow subscriber missed
)

// Event is one thing that happened to a claim or an interface; the
// agent's clients read the same type (package event).
type Event = event.Event

// keptEvents is how many of the latest events the hub keeps for a
// subscriber that asks for those since a time (SubscribeSince): a view that
// lost its agent for a while reads what it missed, and a 4096-event ring is
// about 1 MB at most.
const keptEvents = 4096

// hub fans events out to subscribers without ever blocking the publisher:
// a subscriber that does not keep up loses events and is told how many. It
// keeps the latest keptEvents in a ring.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
	// kept is the ring of the latest events, next where the next goes;
	// full once it has wrapped, and dropped is the time of the newest
	// event it no longer keeps.
	kept    []Event
	next    int
	full    bool
	dropped time.Time
}

type subscriber struct {
	ch     chan Event
	missed int
}

func newHub() *hub { return &hub{subs: make(map[*subscriber]struct{})} }

// subscribe returns a channel of events buffered for n, and a function that
// ends the subscription and closes the channel.
func (h *hub) subscribe(n int) (<-chan Event, func()) { return h.subscribeSince(n, time.Time{}) }

// subscribeSince is subscribe, with the channel starting with the kept
// events later than since (none when since is zero), in order, and before
// them a missed event when some later than since are no longer kept. The
// kept events and the live ones meet without a gap or a repeat: both are
// taken under the lock publish holds.
func (h *hub) subscribeSince(n int, since time.Time) (<-chan Event, func()) {
	h.mu.Lock()
	var back []Event
	if !since.IsZero() {
		back = h.keptSince(since)
		if h.dropped.After(since) {
			back = append([]Event{{Time: h.dropped, Kind: EventMissed,
				Message: fmt.Sprintf("events from %s to %s are no longer kept by the agent (it keeps the latest %d)",
					since.Format("15:04:05.000"), h.dropped.Format("15:04:05.000"), keptEvents)}}, back...)
		}
	}
	s := &subscriber{ch: make(chan Event, max(n, 1)+len(back))}
	for _, ev := range back {
		s.ch <- ev
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs, s)
			h.mu.Unlock()
			close(s.ch)
		})
	}
}

// keptSince returns the kept events later than since, oldest first.
func (h *hub) keptSince(since time.Time) []Event {
	var out []Event
	add := func(evs []Event) {
		for _, ev := range evs {
			if ev.Time.After(since) {
				out = append(out, ev)
			}
		}
	}
	if h.full {
		add(h.kept[h.next:])
	}
	add(h.kept[:h.next])
	return out
}

// keep puts ev in the ring, in place of the oldest once it is full.
func (h *hub) keep(ev Event) {
	if len(h.kept) < keptEvents {
		h.kept = append(h.kept, ev)
		h.next = len(h.kept) % keptEvents
		h.full = h.next == 0
		return
	}
	if h.kept[h.next].Time.After(h.dropped) {
		h.dropped = h.kept[h.next].Time
	}
	h.kept[h.next] = ev
	h.next = (h.next + 1) % keptEvents
}

func (h *hub) publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.keep(ev)
	for s := range h.subs {
		if s.missed > 0 {
			select {
			case s.ch <- Event{Time: ev.Time, Kind: EventMissed, Count: s.missed, Message: "events were missed: this subscriber did not keep up"}:
				s.missed = 0
			default:
				s.missed++
				continue
			}
		}
		select {
		case s.ch <- ev:
		default:
			s.missed++
		}
	}
}
