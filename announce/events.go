package announce

import (
	"net/netip"
	"sync"
	"time"
)

// EventKind names what an Event reports.
type EventKind string

// The kinds of Event, as `vip events` prints them.
const (
	EventClaim   EventKind = "claim"
	EventRefresh EventKind = "refresh"
	EventRelease EventKind = "release"
	// EventRevoke reports claims the book took back (Engine.Revoke).
	EventRevoke     EventKind = "revoke"
	EventBurstStart EventKind = "burst-start"
	EventBurstEnd   EventKind = "burst-end"
	EventInterface  EventKind = "interface"
	EventConflict   EventKind = "conflict"
	// EventOwnerChange reports an address this host does not hold moving
	// to another MAC, or flip-flopping back.
	EventOwnerChange EventKind = "owner-change"
	// EventLost tells a slow subscriber how many events it missed.
	EventLost EventKind = "lost"
)

// Event is one thing that happened to a claim or an interface.
type Event struct {
	Time      time.Time  `json:"time"`
	Kind      EventKind  `json:"kind"`
	Addr      netip.Addr `json:"addr,omitzero"`
	Interface string     `json:"interface,omitempty"`
	MAC       string     `json:"mac,omitempty"`
	State     string     `json:"state,omitempty"`
	// Rounds and Frames count a finished burst; Count the events lost.
	Rounds int `json:"rounds,omitempty"`
	Frames int `json:"frames,omitempty"`
	Count  int `json:"count,omitempty"`
	// Message says in words what happened, for logs and terminals.
	Message string `json:"message,omitempty"`
}

// hub fans events out to subscribers without ever blocking the publisher:
// a subscriber that does not keep up loses events and is told how many.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch   chan Event
	lost int
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
		if s.lost > 0 {
			select {
			case s.ch <- Event{Time: ev.Time, Kind: EventLost, Count: s.lost, Message: "events were lost: this subscriber did not keep up"}:
				s.lost = 0
			default:
				s.lost++
				continue
			}
		}
		select {
		case s.ch <- ev:
		default:
			s.lost++
		}
	}
}
