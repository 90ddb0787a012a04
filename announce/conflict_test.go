package announce

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
)

var rival = net.HardwareAddr{2, 0, 0, 0, 0xee, 1}

func claimer(at time.Time, n uint64) Claimer {
	return Claimer{MAC: rival, Kind: "announcement", FirstSeen: at, LastSeen: at, Count: n}
}

func TestConflictDefendsOncePerInterval(t *testing.T) {
	h := newEngineHarness(t, nil)
	if _, err := h.claim(t, Request{a4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	k := Key{Ifindex: 2, Addr: a4}
	h.e.sched.Cancel(k) // the claim's own window is over
	h.e.Conflict(a4, claimer(h.fc.Now(), 1))
	if !h.e.sched.State(k).Active {
		t.Fatal("first conflict: want the window re-armed (defend)")
	}
	st := h.e.Status(a4)[0]
	if st.State != api.StateConflict || len(st.Claimers) != 1 || st.Claimers[0].MAC.String() != rival.String() {
		t.Errorf("got %+v, want state conflict naming the rival", st)
	}
	h.e.sched.Cancel(k)
	h.fc.Advance(DefendInterval / 2)
	h.e.Conflict(a4, claimer(h.fc.Now(), 2))
	if h.e.sched.State(k).Active {
		t.Error("second conflict within the defend interval: want no new defence (no storm)")
	}
	h.fc.Advance(DefendInterval / 2)
	h.e.Conflict(a4, claimer(h.fc.Now(), 3))
	if !h.e.sched.State(k).Active {
		t.Error("conflict a defend interval later: want a new defence")
	}
	// Our own MAC is never a competing claimer.
	h.e.Conflict(a4, Claimer{MAC: h.ports["eth0"].MAC(), LastSeen: h.fc.Now(), Count: 1})
	if n := len(h.e.Status(a4)[0].Claimers); n != 1 {
		t.Errorf("got %d claimers after a report of our own MAC, want 1", n)
	}
}

func TestConflictStateFades(t *testing.T) {
	h := newEngineHarness(t, nil)
	if _, err := h.claimWith(t, ClaimOptions{OnConflict: PolicyWarn}, Request{a4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	k := Key{Ifindex: 2, Addr: a4}
	h.e.sched.Cancel(k)
	h.e.Conflict(a4, claimer(h.fc.Now(), 1))
	if h.e.sched.State(k).Active {
		t.Error("warn: want no defence")
	}
	if s := stateOf(t, h.e, a4); s != api.StateConflict {
		t.Errorf("got state %s, want conflict", s)
	}
	h.fc.Advance(ConflictHold)
	if st := h.e.Status(a4)[0]; st.State == api.StateConflict || len(st.Claimers) != 1 {
		t.Errorf("after ConflictHold: got %+v, want the state back to normal and the claimer still listed", st)
	}
}

// TestConflictYieldReleases: a claim that yields is released, said so in
// events, and told to OnRelease (a guarded agent's member deletes its key)
// once it is no longer answered; a release asked for is not told.
func TestConflictYieldReleases(t *testing.T) {
	h := newEngineHarness(t, nil)
	events, cancel := h.e.Subscribe(100)
	defer cancel()
	var told []netip.Addr
	var why string
	var answeredWhenTold bool
	h.e.OnRelease(func(addrs []netip.Addr, w string) {
		told, why = append(told, addrs...), w
		answeredWhenTold = h.ports["eth0"].isHeld(a4)
	})
	if _, err := h.claimWith(t, ClaimOptions{OnConflict: PolicyYield}, Request{a4, "eth0"}, Request{b4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.e.Release(context.Background(), []netip.Addr{b4}); err != nil {
		t.Fatal(err)
	}
	h.e.Conflict(a4, claimer(h.fc.Now(), 1))
	if len(h.e.Status()) != 0 || h.ports["eth0"].isHeld(a4) {
		t.Fatal("yield: want the address released and no longer answered")
	}
	if len(told) != 1 || told[0] != a4 || !strings.Contains(why, rival.String()) {
		t.Errorf("OnRelease was told %v (%q), want only %v, yielded to %v", told, why, a4, rival)
	}
	if answeredWhenTold {
		t.Error("OnRelease was told while the address was still answered")
	}
	var sawConflict, sawYield bool
	for len(events) > 0 {
		ev := <-events
		sawConflict = sawConflict || ev.Kind == EventConflict
		sawYield = sawYield || (ev.Kind == EventConflict && ev.MAC == rival.String() && strings.Contains(ev.Message, "yielded"))
	}
	if !sawConflict || !sawYield {
		t.Errorf("events: conflict %v, yield %v; want both", sawConflict, sawYield)
	}
	h.e.Conflict(netip.MustParseAddr("192.0.2.99"), claimer(h.fc.Now(), 1)) // not held: ignored
}

func TestProbesAtClaimAndPeriodically(t *testing.T) {
	h := newEngineHarness(t, nil)
	if _, err := h.claim(t, Request{a4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	p := h.ports["eth0"]
	if p.probes() != 0 {
		t.Fatal("a probe went out before the capture could listen")
	}
	h.fc.Advance(FirstProbeDelay)
	waitFor(t, func() bool { return p.probes() == 1 }, "a probe shortly after the claim")
	for i := 2; i <= 3; i++ {
		h.fc.Advance(DefaultProbeEvery)
		waitFor(t, func() bool { return p.probes() == i }, "a periodic probe")
	}
	if _, err := h.claimWith(t, ClaimOptions{ProbesOff: true}, Request{b4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	h.fc.Advance(DefaultProbeEvery)
	waitFor(t, func() bool { return p.probes() == 4 }, "a4's next probe")
	h.fc.Advance(FirstProbeDelay)
	for _, a := range p.probed {
		if a == b4 {
			t.Fatal("a claim with probing off was probed")
		}
	}
}

func TestParseConflictPolicy(t *testing.T) {
	for in, want := range map[string]ConflictPolicy{"": PolicyDefend, "defend": PolicyDefend, "warn": PolicyWarn, "yield": PolicyYield} {
		if got, err := ParseConflictPolicy(in); err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseConflictPolicy("fight"); err == nil {
		t.Error("fight: want an error")
	}
}
