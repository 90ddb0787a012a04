package fleet

import (
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/event"
)

// claimBook keeps a guarded claim's place on this node, one entry an
// address: owner (the engine holds the claim and answers for it), fenced
// (the engine keeps it silent while the store is away, to resume it) or
// lost (another node took it while this one was fenced). The places
// exclude each other, so an address is in one at most, and its
// transitions are the methods below:
//
//	none    -> owner, fenced  hold (fenced: a fence came while it was claimed)
//	owner   -> fenced         fenceAll
//	fenced  -> owner          hold (resumed)
//	fenced  -> lost           lose
//	owner   -> none           releaseOwner (the engine let it go)
//	any     -> none           release
//
// A standby's and a move's state for an address are the Member's other
// fields. The Member's mu guards the book.
type claimBook struct {
	entries map[netip.Addr]*claimEntry
	counts  map[event.State]int
}

// claimEntry is one address's place and what it keeps there.
type claimEntry struct {
	place event.State
	// owned is the claim and the MAC it answers with, as owner or
	// fenced; lost what is kept of a claim lost.
	owned owned
	lost  lostClaim
}

func newClaimBook() *claimBook {
	return &claimBook{entries: map[netip.Addr]*claimEntry{}, counts: map[event.State]int{}}
}

func (b *claimBook) set(a netip.Addr, e *claimEntry) {
	if old, ok := b.entries[a]; ok {
		b.counts[old.place]--
	}
	if e == nil {
		delete(b.entries, a)
		return
	}
	b.entries[a] = e
	b.counts[e.place]++
}

// hold records a claim the engine holds now: as owner, or as fenced when
// a fence came while it was being claimed (and the engine keeps it
// silent). Whatever place the address had (a loss, a fence) is replaced.
func (b *claimBook) hold(a netip.Addr, o owned, fenced bool) {
	place := event.StateOwner
	if fenced {
		place = event.StateFenced
	}
	b.set(a, &claimEntry{place: place, owned: o})
}

// fenceAll moves every owner's claim to fenced, and returns their
// addresses.
func (b *claimBook) fenceAll() []netip.Addr {
	addrs := make([]netip.Addr, 0, b.counts[event.StateOwner])
	for a, e := range b.entries {
		if e.place == event.StateOwner {
			b.set(a, &claimEntry{place: event.StateFenced, owned: e.owned})
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// lose moves a's fenced claim to lost: to took it, at says when this
// node found it, taken when to says it took it (zero: unknown). It says
// whether a was fenced.
func (b *claimBook) lose(a netip.Addr, to string, at, taken time.Time) bool {
	e, ok := b.entries[a]
	if !ok || e.place != event.StateFenced {
		return false
	}
	b.set(a, &claimEntry{place: event.StateLost, lost: lostClaim{claim: e.owned.claim, to: to, at: at, taken: taken}})
	return true
}

// release forgets a's claim, whatever its place, and returns that place
// (StateNone: it had none).
func (b *claimBook) release(a netip.Addr) event.State {
	e, ok := b.entries[a]
	if !ok {
		return event.StateNone
	}
	b.set(a, nil)
	return e.place
}

// releaseOwner forgets a's claim if this node is its owner, and says
// whether it was.
func (b *claimBook) releaseOwner(a netip.Addr) bool {
	if b.place(a) != event.StateOwner {
		return false
	}
	b.set(a, nil)
	return true
}

// place is a's place, StateNone when it has none.
func (b *claimBook) place(a netip.Addr) event.State {
	if e, ok := b.entries[a]; ok {
		return e.place
	}
	return event.StateNone
}

// claim is a's claim as owner or fenced, and its place.
func (b *claimBook) claim(a netip.Addr) (owned, event.State) {
	e, ok := b.entries[a]
	if !ok || e.place == event.StateLost {
		return owned{}, event.StateNone
	}
	return e.owned, e.place
}

// count is how many addresses are in place.
func (b *claimBook) count(place event.State) int { return b.counts[place] }

// in calls fn with each address in one of places, and its entry.
func (b *claimBook) in(fn func(a netip.Addr, e *claimEntry), places ...event.State) {
	for a, e := range b.entries {
		for _, p := range places {
			if e.place == p {
				fn(a, e)
				break
			}
		}
	}
}

// addrs are the addresses in one of places.
func (b *claimBook) addrs(places ...event.State) []netip.Addr {
	var out []netip.Addr
	b.in(func(a netip.Addr, _ *claimEntry) { out = append(out, a) }, places...)
	return out
}
