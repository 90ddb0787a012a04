package hook

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/vipctl/vip/internal/event"
)

// Tracker turns the agent's events into Changes: it keeps each address's
// last state (for Change.Old), leaves out what is no change of state (a
// refresh, a burst, an address already in the state said), and, in a
// guarded agent, holds an engine's claim or release up to Settle for the
// fleet's event that explains it (a standby took over, a move, a yield).
// It is not safe for concurrent use: Follow's loop owns it.
type Tracker struct {
	node    string
	settle  time.Duration
	last    map[netip.Addr]State
	ifaces  map[netip.Addr]string // each address's interface, as last said
	pending map[netip.Addr]pending
}

// pending is a claim or release waiting for its explanation until due.
type pending struct {
	c   Change
	due time.Time
}

// NewTracker returns a Tracker for this node; settle is how long a claim or
// release waits for its explanation, zero (an agent without a store, whose
// events come alone) for not at all.
func NewTracker(node string, settle time.Duration) *Tracker {
	return &Tracker{node: node, settle: settle, last: map[netip.Addr]State{}, ifaces: map[netip.Addr]string{}, pending: map[netip.Addr]pending{}}
}

// Event returns the changes ev makes ready, in the order they happened.
func (t *Tracker) Event(ev event.Event) []Change {
	a, msg := ev.Addr, ev.Message
	if ev.Kind == event.Failsafe {
		return t.failsafe(ev)
	}
	if !a.IsValid() {
		return nil // a fence, a resumption, a stall: their addresses' events come apart
	}
	c := Change{Event: string(ev.Kind), Addr: a, Interface: ev.Interface, Node: t.node, Reason: msg, Code: string(ev.Reason), Time: ev.Time}
	switch ev.Kind {
	case event.Claim:
		c.New = Owner
		return append(t.flush(a), t.hold(c)...)
	case event.Resume:
		// A claim taken back: after a fence (fenced -> owner), or after
		// a restart of the agent or a move that gave up, when this host
		// was the owner all along (owner -> owner, told all the same,
		// so that a hook can tell a restart from a change of owner).
		c.New = Owner
		out := t.flush(a)
		c.Old = t.state(a)
		if c.Old != Fenced {
			c.Old = Owner
		}
		t.commit(c)
		return append(out, c)
	case event.Release:
		c.New = None
		return append(t.flush(a), t.hold(c)...)
	case event.Suspend:
		c.Event, c.New = "fence", Fenced
		return t.now(c)
	case event.Taken:
		c.New, c.Peer = Lost, ev.Peer
		return t.now(c)
	case event.Standby:
		c.Peer = ev.Peer
		switch ev.To {
		case Owner: // took the address as a standby
			c.New = Owner
			return t.explain(c, Owner)
		case Standby, None: // registered, made or removed as a standby
			c.New = ev.To
			return t.now(c)
		}
	case event.Move:
		c.Peer = ev.Peer
		switch ev.To {
		case Standby:
			// Released for a move: it stands by for the address it let
			// go.
			c.New = Standby
			return t.explain(c, None)
		case Owner: // moved here, or kept when the move gave up
			c.New = Owner
			return t.explain(c, Owner)
		}
	case event.Conflict:
		if ev.To == None { // yielded to a competing claimer
			c.New, c.Peer = None, ev.Peer
			return t.explain(c, None)
		}
	}
	return nil
}

// failsafe turns the node's start or end of answering on failsafe (the
// store unreachable, every other node having promised to take none of its
// addresses) into a change of each address it owns, owner to owner as a
// resume is: a hook that pages or drains on a store outage sees every
// address that now rests on the other nodes' promises, and when the store
// acknowledged it again ("failsafe-end"). A failsafe that ends in a fence
// is told by the fence's own changes.
func (t *Tracker) failsafe(ev event.Event) []Change {
	name := "failsafe"
	if ev.State != "failsafe" {
		name = "failsafe-end"
	}
	var out []Change
	for _, a := range slices.SortedFunc(maps.Keys(t.last), netip.Addr.Compare) {
		if t.last[a] != Owner {
			continue
		}
		out = append(out, Change{Event: name, Addr: a, Interface: t.ifaces[a], Old: Owner, New: Owner, Node: t.node, Reason: ev.Message, Time: ev.Time})
	}
	return out
}

// Due returns the held changes whose wait for an explanation ended by now.
func (t *Tracker) Due(now time.Time) []Change {
	var out []Change
	for a, p := range t.pending {
		if !p.due.After(now) {
			out = append(out, t.flush(a)...)
		}
	}
	return out
}

// Next returns when the next held change is due, if one is held.
func (t *Tracker) Next() (time.Time, bool) {
	var next time.Time
	for _, p := range t.pending {
		if next.IsZero() || p.due.Before(next) {
			next = p.due
		}
	}
	return next, !next.IsZero()
}

func (t *Tracker) state(a netip.Addr) State {
	if s, ok := t.last[a]; ok {
		return s
	}
	return None
}

// now returns c as a change, after the one held for its address, unless
// its address is in c's state already.
func (t *Tracker) now(c Change) []Change {
	out := t.flush(c.Addr)
	c.Old = t.state(c.Addr)
	if c.Old == c.New {
		return out
	}
	t.commit(c)
	return append(out, c)
}

// hold keeps c until its explanation comes or Settle passes.
func (t *Tracker) hold(c Change) []Change {
	if t.settle <= 0 {
		return t.now(c)
	}
	c.Old = t.state(c.Addr)
	if c.Old == c.New {
		return nil
	}
	t.pending[c.Addr] = pending{c: c, due: c.Time.Add(t.settle)}
	return nil
}

// explain merges expl into the change held for its address when that one
// ends in want (the claim a standby took, the release of a move) and
// returns it at once; without one (the explanation came late, or alone),
// expl is a change of its own if it changes the state.
func (t *Tracker) explain(expl Change, want State) []Change {
	p, ok := t.pending[expl.Addr]
	if !ok || p.c.New != want {
		return t.now(expl)
	}
	delete(t.pending, expl.Addr)
	c := p.c
	c.Event, c.New, c.Peer, c.Reason, c.Code = expl.Event, expl.New, expl.Peer, expl.Reason, expl.Code
	if c.Interface == "" {
		c.Interface = expl.Interface
	}
	if c.Old == c.New {
		return nil
	}
	t.commit(c)
	return []Change{c}
}

// flush returns the change held for a, if any, as ready.
func (t *Tracker) flush(a netip.Addr) []Change {
	p, ok := t.pending[a]
	if !ok {
		return nil
	}
	delete(t.pending, a)
	t.commit(p.c)
	return []Change{p.c}
}

func (t *Tracker) commit(c Change) {
	if c.New == None {
		delete(t.last, c.Addr)
		delete(t.ifaces, c.Addr)
		return
	}
	t.last[c.Addr] = c.New
	if c.Interface != "" {
		t.ifaces[c.Addr] = c.Interface
	}
}
