package announce

import (
	"sync"

	"github.com/vipctl/vip/internal/event"
)

// EventKind names what an Event reports.
type EventKind = event.Kind

// The kinds of Event, as `vip events` prints them.
const (
	EventClaim       = event.Claim
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

// hub fans events out to subscribers without ever blocking the publisher:
// a subscriber that does not keep up loses events and is told how many.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch     chan Event
	missed int
}

func newHub() *hub { return &hub{subs: make(map[*subscriber]struct{})} }

// subscribe returns a channel of events buffered for n, and a function that
// ends the subscription and closes the channel.
func (h *hub) subscribe(n int) (<-chan Event, func()) {
	s := &subscriber{ch: make(chan Event, max(n, 1))}
	h.mu.Lock()
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

func (h *hub) publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
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
