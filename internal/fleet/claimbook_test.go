package fleet

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// TestClaimBookTransitions: each transition of a claim's place, from each
// place, as a table: where the address ends, what the call says, and the
// counts by place (which the failsafe's tick and the metrics read).
func TestClaimBookTransitions(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.10")
	at := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	o := owned{claim: announce.Claim{Addr: a, Interface: "eth0"}, mac: "02:00:00:00:00:0a"}
	const (
		none   = event.StateNone
		owner  = event.StateOwner
		fenced = event.StateFenced
		lost   = event.StateLost
	)
	// from puts a in place.
	from := func(place event.State) *claimBook {
		b := newClaimBook()
		switch place {
		case owner:
			b.hold(a, o, false)
		case fenced:
			b.hold(a, o, true)
		case lost:
			b.hold(a, o, true)
			b.lose(a, "b", at, at.Add(-time.Second))
		}
		return b
	}
	tests := []struct {
		name string
		from event.State
		do   func(b *claimBook) bool // what the call says, if anything
		want event.State
		says bool
	}{
		{"claimed", none, func(b *claimBook) bool { b.hold(a, o, false); return true }, owner, true},
		{"claimed during a fence", none, func(b *claimBook) bool { b.hold(a, o, true); return true }, fenced, true},
		{"claimed again after a loss", lost, func(b *claimBook) bool { b.hold(a, o, false); return true }, owner, true},
		{"resumed", fenced, func(b *claimBook) bool { b.hold(a, o, false); return true }, owner, true},
		{"fenced", owner, func(b *claimBook) bool { return slices.Equal(b.fenceAll(), []netip.Addr{a}) }, fenced, true},
		{"a fence finds no owner", fenced, func(b *claimBook) bool { return len(b.fenceAll()) == 0 }, fenced, true},
		{"lost while fenced", fenced, func(b *claimBook) bool { return b.lose(a, "b", at, at) }, lost, true},
		{"an owner is not lost", owner, func(b *claimBook) bool { return b.lose(a, "b", at, at) }, owner, false},
		{"nothing is lost", none, func(b *claimBook) bool { return b.lose(a, "b", at, at) }, none, false},
		{"released by the engine", owner, func(b *claimBook) bool { return b.releaseOwner(a) }, none, true},
		{"the engine's release leaves a fenced claim", fenced, func(b *claimBook) bool { return b.releaseOwner(a) }, fenced, false},
		{"released while owner", owner, func(b *claimBook) bool { return b.release(a) == owner }, none, true},
		{"released while fenced", fenced, func(b *claimBook) bool { return b.release(a) == fenced }, none, true},
		{"released while lost", lost, func(b *claimBook) bool { return b.release(a) == lost }, none, true},
		{"nothing to release", none, func(b *claimBook) bool { return b.release(a) == none }, none, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := from(tc.from)
			if says := tc.do(b); says != tc.says {
				t.Errorf("the call says %v, want %v", says, tc.says)
			}
			if got := b.place(a); got != tc.want {
				t.Fatalf("from %s: %s, want %s", tc.from, got, tc.want)
			}
			for _, p := range []event.State{owner, fenced, lost} {
				want := 0
				if p == tc.want {
					want = 1
				}
				if got := b.count(p); got != want {
					t.Errorf("count(%s) = %d, want %d", p, got, want)
				}
				if got := len(b.addrs(p)); got != want {
					t.Errorf("addrs(%s) has %d, want %d", p, got, want)
				}
			}
			c, p := b.claim(a)
			switch tc.want {
			case owner, fenced:
				if p != tc.want || c != o {
					t.Errorf("claim: %+v in %s, want the claim in %s", c, p, tc.want)
				}
			default:
				if p != none {
					t.Errorf("claim of an address %s: in %s, want none", tc.want, p)
				}
			}
		})
	}
	// A claim lost keeps what the status and the notes say of it.
	b := from(lost)
	var l lostClaim
	b.in(func(_ netip.Addr, e *claimEntry) { l = e.lost }, lost)
	if l.claim.Interface != "eth0" || l.to != "b" || !l.at.Equal(at) || !l.taken.Equal(at.Add(-time.Second)) {
		t.Errorf("the lost claim kept %+v", l)
	}
}

// TestClaimBookStandby: a standby lasts through the node's turns as owner
// (standbyOnly says which it is now), a read older than its record's last
// write does not forget it, the takes put off are handed back once, and an
// address whose entry keeps nothing leaves the book.
func TestClaimBookStandby(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.10")
	c := netip.MustParseAddr("192.0.2.12")
	o := owned{claim: announce.Claim{Addr: a, Interface: "eth0"}}
	b := newClaimBook()
	b.standBy(store.Standby{Addr: a, Node: "n", Interface: "eth0", Group: "web"}, 10)
	if s, ok := b.standbyOf(a); !ok || s.Group != "web" || !b.standbyOnly(a) {
		t.Fatalf("standbyOf after standBy: %+v, %v, only %v", s, ok, b.standbyOnly(a))
	}
	b.hold(a, o, false)
	if b.standbyOnly(a) {
		t.Error("an owner that stands by for its address is standbyOnly")
	}
	if _, ok := b.standbyOf(a); !ok {
		t.Error("the standby went when the node became owner: the set lasts")
	}
	b.releaseOwner(a)
	if !b.standbyOnly(a) {
		t.Error("the owner let go and its standby is not back alone")
	}
	if _, had, kept := b.dropStandby(a, 9); !had || !kept {
		t.Errorf("a read at 9, older than the record's 10, forgot it: had %v kept %v", had, kept)
	}
	b.passOver(a, store.Claim{Addr: a, Node: "x"})
	b.passOver(c, store.Claim{Addr: c, Node: "x"}) // no standby for c
	b.missTake(a, nil)
	if got := b.takePassedOver(); len(got) != 1 || got[a].Node != "x" {
		t.Errorf("takePassedOver: %v, want a's owner x alone (c is stood by for no more)", got)
	}
	if got := b.takePassedOver(); len(got) != 0 {
		t.Errorf("takePassedOver again: %v, want none", got)
	}
	if got := b.takeMissed(); len(got) != 1 || got[a] != nil {
		t.Errorf("takeMissed: %v, want a with no owner's record", got)
	}
	if s, had, kept := b.dropStandby(a, -1); !had || kept || s.Addr != a {
		t.Errorf("dropStandby in any case: %+v had %v kept %v", s, had, kept)
	}
	if n := len(b.entries); n != 0 {
		t.Errorf("%d entries left in a book that keeps nothing: %v", n, b.entries)
	}
}

// TestClaimBookMovesAndWatches: a move awaited is read back and forgotten,
// one poll of it runs at a time, and the watch of the address's key ends
// only once nothing waits on it (no standby, no move awaited).
func TestClaimBookMovesAndWatches(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.10")
	b := newClaimBook()
	cancelled := 0
	if !b.watch(a, func() { cancelled++ }) || b.watch(a, func() { t.Error("a second watch's end was kept") }) {
		t.Fatal("watch: the first is kept, a second is not")
	}
	b.await(MoveRecord{Move: store.Move{Addr: a, To: "n"}, Rev: 7})
	b.standBy(store.Standby{Addr: a, Node: "n"}, 1)
	if r, ok := b.incomingOf(a); !ok || r.Rev != 7 {
		t.Fatalf("incomingOf: %+v, %v", r, ok)
	}
	if !b.poll(a) || b.poll(a) {
		t.Error("poll: one at a time")
	}
	b.polled(a)
	if !b.poll(a) {
		t.Error("poll after polled: refused")
	}
	b.polled(a)
	if b.unwatchIfIdle(a) {
		t.Error("the watch ended while a move was awaited and the node stood by")
	}
	b.forgetIncoming(a)
	if b.unwatchIfIdle(a) {
		t.Error("the watch ended while the node stood by")
	}
	b.dropStandby(a, -1)
	if !b.unwatchIfIdle(a) || cancelled != 1 || b.watched(a) {
		t.Errorf("the watch of an address nothing waits on: ended %d times, watched %v", cancelled, b.watched(a))
	}
	if n := len(b.entries); n != 0 {
		t.Errorf("%d entries left: %v", n, b.entries)
	}
}
