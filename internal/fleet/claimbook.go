package fleet

import (
	"context"
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
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
// Beside its place, an entry keeps this node's standby for the address,
// which lasts through the node's turns as owner (standBy, dropStandby);
// what a standby put off: an owner's lease that expired while this node
// was cordoned (passOver) or fenced (missTake), looked at again later; a
// move to this node whose owner has not let go (await, incomingOf,
// forgetIncoming) and whether its record is polled (poll, polled); and
// the watch of the address's key (watch, unwatchIfIdle), while it stands by or
// a move is awaited. The Member's mu guards the book.
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
	// standby is this node's standby record for the address (nil: it
	// does not stand by), and standbyRev the store's revision at which
	// it was last written or read, so that a read older than it (a
	// resync that raced a registration) never forgets it.
	standby    *store.Standby
	standbyRev int64
	// passedOver is the owner whose lease expired while this node, its
	// standby, was cordoned; missed says that an owner's key went while
	// this node was fenced, missedPrev that owner's record (nil: not
	// known).
	passedOver *store.Claim
	missed     bool
	missedPrev *store.Claim
	// incoming is a move to this node whose owner has not let go (nil:
	// none), polling whether its record is read again soon, and
	// unwatch ends the watch of the address's key (nil: not watched).
	incoming *MoveRecord
	polling  bool
	unwatch  context.CancelFunc
}

// empty says whether e keeps nothing.
func (e *claimEntry) empty() bool {
	return e.place == event.StateNone && e.standby == nil && e.passedOver == nil && !e.missed &&
		e.incoming == nil && !e.polling && e.unwatch == nil
}

func newClaimBook() *claimBook {
	return &claimBook{entries: map[netip.Addr]*claimEntry{}, counts: map[event.State]int{}}
}

// entry is a's entry, made if it has none.
func (b *claimBook) entry(a netip.Addr) *claimEntry {
	e, ok := b.entries[a]
	if !ok {
		e = &claimEntry{place: event.StateNone}
		b.entries[a] = e
	}
	return e
}

// move puts a's claim in place (StateNone: none), with o or l kept there.
func (b *claimBook) move(a netip.Addr, place event.State, o owned, l lostClaim) {
	e := b.entry(a)
	if e.place != event.StateNone {
		b.counts[e.place]--
	}
	e.place, e.owned, e.lost = place, o, l
	if place != event.StateNone {
		b.counts[place]++
	}
	b.tidy(a, e)
}

// tidy drops a's entry once it keeps nothing.
func (b *claimBook) tidy(a netip.Addr, e *claimEntry) {
	if e.empty() {
		delete(b.entries, a)
	}
}

// hold records a claim the engine holds now: as owner, or as fenced when
// a fence came while it was being claimed (and the engine keeps it
// silent). Whatever place the address had (a loss, a fence) is replaced.
func (b *claimBook) hold(a netip.Addr, o owned, fenced bool) {
	place := event.StateOwner
	if fenced {
		place = event.StateFenced
	}
	b.move(a, place, o, lostClaim{})
}

// fenceAll moves every owner's claim to fenced, and returns their
// addresses.
func (b *claimBook) fenceAll() []netip.Addr {
	addrs := make([]netip.Addr, 0, b.counts[event.StateOwner])
	for a, e := range b.entries {
		if e.place == event.StateOwner {
			b.move(a, event.StateFenced, e.owned, lostClaim{})
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
	b.move(a, event.StateLost, owned{}, lostClaim{claim: e.owned.claim, to: to, at: at, taken: taken})
	return true
}

// release forgets a's claim, whatever its place, and returns that place
// (StateNone: it had none).
func (b *claimBook) release(a netip.Addr) event.State {
	was := b.place(a)
	if was != event.StateNone {
		b.move(a, event.StateNone, owned{}, lostClaim{})
	}
	return was
}

// releaseOwner forgets a's claim if this node is its owner, and says
// whether it was.
func (b *claimBook) releaseOwner(a netip.Addr) bool {
	if b.place(a) != event.StateOwner {
		return false
	}
	b.move(a, event.StateNone, owned{}, lostClaim{})
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

// standbyOf is this node's standby record for a, if it stands by for it.
func (b *claimBook) standbyOf(a netip.Addr) (store.Standby, bool) {
	if e, ok := b.entries[a]; ok && e.standby != nil {
		return *e.standby, true
	}
	return store.Standby{}, false
}

// standBy notes this node's standby record s, written or read at rev.
func (b *claimBook) standBy(s store.Standby, rev int64) {
	e := b.entry(s.Addr)
	e.standby, e.standbyRev = &s, max(e.standbyRev, rev)
}

// dropStandby forgets this node's standby for a, unless asOf is 0 or more
// and its record was written or read after asOf (kept). It returns the
// record it had, if any.
func (b *claimBook) dropStandby(a netip.Addr, asOf int64) (s store.Standby, had, kept bool) {
	e, ok := b.entries[a]
	if !ok || e.standby == nil {
		return store.Standby{}, false, false
	}
	if asOf >= 0 && e.standbyRev > asOf {
		return *e.standby, true, true
	}
	s = *e.standby
	e.standby, e.standbyRev = nil, 0
	b.tidy(a, e)
	return s, true, false
}

// standbys calls fn with each standby record of this node.
func (b *claimBook) standbys(fn func(s store.Standby)) {
	for _, e := range b.entries {
		if e.standby != nil {
			fn(*e.standby)
		}
	}
}

// standbyOnly says whether this node only stands by for a: it is in a's
// standbys, and neither holds it nor keeps it fenced or lost (the set
// lasts through its turns as owner).
func (b *claimBook) standbyOnly(a netip.Addr) bool {
	e, ok := b.entries[a]
	return ok && e.standby != nil && e.place == event.StateNone
}

// passOver keeps prev, the owner whose lease expired while this node was
// cordoned, for when the cordon lifts.
func (b *claimBook) passOver(a netip.Addr, prev store.Claim) {
	b.entry(a).passedOver = &prev
}

// takePassedOver returns, and forgets, every owner passed over whose
// address this node still stands by for.
func (b *claimBook) takePassedOver() map[netip.Addr]store.Claim {
	out := map[netip.Addr]store.Claim{}
	for a, e := range b.entries {
		if e.passedOver == nil {
			continue
		}
		if e.standby != nil {
			out[a] = *e.passedOver
		}
		e.passedOver = nil
		b.tidy(a, e)
	}
	return out
}

// missTake notes that a's owner's key went while this node was fenced,
// with that owner's record (nil: not known).
func (b *claimBook) missTake(a netip.Addr, prev *store.Claim) {
	e := b.entry(a)
	e.missed, e.missedPrev = true, prev
}

// takeMissed returns, and forgets, the takes missed while fenced.
func (b *claimBook) takeMissed() map[netip.Addr]*store.Claim {
	out := map[netip.Addr]*store.Claim{}
	for a, e := range b.entries {
		if e.missed {
			out[a] = e.missedPrev
			e.missed, e.missedPrev = false, nil
			b.tidy(a, e)
		}
	}
	return out
}

// await notes r, a move to this node whose owner has not let go.
func (b *claimBook) await(r MoveRecord) { b.entry(r.Move.Addr).incoming = &r }

// incomingOf is the move to this node awaited for a, if any.
func (b *claimBook) incomingOf(a netip.Addr) (MoveRecord, bool) {
	if e, ok := b.entries[a]; ok && e.incoming != nil {
		return *e.incoming, true
	}
	return MoveRecord{}, false
}

// forgetIncoming stops awaiting a move of a.
func (b *claimBook) forgetIncoming(a netip.Addr) {
	if e, ok := b.entries[a]; ok {
		e.incoming = nil
		b.tidy(a, e)
	}
}

// poll marks a's awaited move as polled, and says whether it was not
// already (so that one poll runs at a time).
func (b *claimBook) poll(a netip.Addr) bool {
	e := b.entry(a)
	if e.polling {
		return false
	}
	e.polling = true
	return true
}

// polled ends a's poll.
func (b *claimBook) polled(a netip.Addr) {
	if e, ok := b.entries[a]; ok {
		e.polling = false
		b.tidy(a, e)
	}
}

// watch keeps cancel, the end of the watch of a's key, and says whether a
// was not watched already (if it was, cancel is not kept).
func (b *claimBook) watch(a netip.Addr, cancel context.CancelFunc) bool {
	e := b.entry(a)
	if e.unwatch != nil {
		return false
	}
	e.unwatch = cancel
	return true
}

// watched says whether a's key is watched.
func (b *claimBook) watched(a netip.Addr) bool {
	e, ok := b.entries[a]
	return ok && e.unwatch != nil
}

// unwatchIfIdle ends the watch of a's key unless this node still stands by
// for a or awaits a move of it, and says whether it did.
func (b *claimBook) unwatchIfIdle(a netip.Addr) bool {
	e, ok := b.entries[a]
	if !ok || e.unwatch == nil || e.standby != nil || e.incoming != nil {
		return false
	}
	e.unwatch()
	e.unwatch = nil
	b.tidy(a, e)
	return true
}
