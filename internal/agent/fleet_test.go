package agent

import (
	"context"
	"errors"

	"maps"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
)

// spyAssigner is an Assigner that reads, while it adds or removes an
// address, which addresses vipAddrs counts as vip's.
type spyAssigner struct {
	v        *vipAddrs
	has      map[netip.Addr]bool // on the interface
	fail     bool
	duringOp []bool // whether the address was vip's while it was added or removed

	mu       sync.Mutex
	lives    []time.Duration                // AddFor's lifetimes
	extended map[netip.Addr][]time.Duration // Extend's, by address
}

// extensions returns Extend's lifetimes for a.
func (s *spyAssigner) extensions(a netip.Addr) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.extended[a])
}

func (s *spyAssigner) Add(_ string, a netip.Addr) (bool, error) {
	s.duringOp = append(s.duringOp, s.v.of(nil)[a])
	return s.add(a)
}

func (s *spyAssigner) AddFor(_ string, a netip.Addr, life time.Duration) (bool, error) {
	s.mu.Lock()
	s.duringOp = append(s.duringOp, s.v.of(nil)[a])
	s.lives = append(s.lives, life)
	s.mu.Unlock()
	return s.add(a)
}

func (s *spyAssigner) Extend(_ string, a netip.Addr, life time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.has[a] = true
	s.extended[a] = append(s.extended[a], life)
	return nil
}

func (s *spyAssigner) add(a netip.Addr) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return false, errors.New("no such interface")
	}
	if s.has[a] {
		return false, nil
	}
	s.has[a] = true
	return true, nil
}

func (s *spyAssigner) Remove(_ string, a netip.Addr) error {
	s.duringOp = append(s.duringOp, s.v.of(nil)[a])
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.has, a)
	return nil
}

// TestVIPAddrs: an address vip adds is vip's from before it is on the
// interface until it is removed, and not if it was there already (the
// host's own) or could not be added; a claim held with Assign makes its
// address vip's; an earlier agent's recorded with Assign are vip's until
// the engine holds them, after which the engine's status says.
func TestVIPAddrs(t *testing.T) {
	vip1, vip2, own := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("192.0.2.2")
	recorded := netip.MustParseAddr("192.0.2.30")
	clock := &fakeBootClock{now: time.Hour}
	dl := announce.NewDeadline(clock.read)
	_ = dl.Set(clock.read() + 5*time.Second)
	v := newVIPAddrs([]announce.Claim{
		{Addr: recorded, Options: announce.ClaimOptions{Assign: true}},
		{Addr: netip.MustParseAddr("192.0.2.40")}, // not assigned: the host's
	}, dl, nil)
	spy := &spyAssigner{v: v, has: map[netip.Addr]bool{own: true}, extended: map[netip.Addr][]time.Duration{}}
	as := v.assigner(spy)
	got := func(st ...announce.Status) []netip.Addr {
		return slices.SortedFunc(maps.Keys(v.of(st)), netip.Addr.Compare)
	}
	if g, want := got(), []netip.Addr{recorded}; !slices.Equal(g, want) {
		t.Fatalf("vip's at start: got %v, want %v (the recorded --assign claim alone)", g, want)
	}

	if added, err := as.Add("eth0", vip1); !added || err != nil {
		t.Fatalf("add %s: %v, %v", vip1, added, err)
	}
	if added, _ := as.Add("eth0", own); added {
		t.Fatalf("add %s, there already: added", own)
	}
	spy.fail = true
	if _, err := as.Add("eth0", vip2); err == nil {
		t.Fatalf("add %s: no error from a failing assigner", vip2)
	}
	spy.fail = false
	if g, want := got(), []netip.Addr{vip1, recorded}; !slices.Equal(g, want) {
		t.Errorf("after adding %s, finding %s there and failing to add %s: got %v, want %v", vip1, own, vip2, g, want)
	}
	if err := as.Remove("eth0", vip1); err != nil {
		t.Fatal(err)
	}
	if g, want := got(), []netip.Addr{recorded}; !slices.Equal(g, want) {
		t.Errorf("after removing %s: got %v, want %v", vip1, g, want)
	}
	// Each address was vip's while it was added and while it was removed:
	// a registration read then, with the address on the interface and
	// its claim not yet held (or no longer), leaves it out.
	if want := []bool{true, true, true, true}; !slices.Equal(spy.duringOp, want) {
		t.Errorf("vip's while being added or removed: got %v, want %v", spy.duringOp, want)
	}

	held := announce.Status{Claim: announce.Claim{Addr: vip2, Options: announce.ClaimOptions{Assign: true}}}
	plain := announce.Status{Claim: announce.Claim{Addr: netip.MustParseAddr("192.0.2.50")}}
	if g, want := got(held, plain), []netip.Addr{vip2, recorded}; !slices.Equal(g, want) {
		t.Errorf("with %s held with --assign and %s without: got %v, want %v", vip2, plain.Claim.Addr, g, want)
	}
	v.adopted([]netip.Addr{recorded})
	if g := got(); len(g) != 0 {
		t.Errorf("once the recorded claim is adopted, with no claim held: got %v, want none", g)
	}
}

// fakeBootClock is a boot clock that moves only when told.
type fakeBootClock struct {
	mu  sync.Mutex
	now time.Duration
}

func (c *fakeBootClock) read() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeBootClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now += d
}

// TestLifetimeFor: whole seconds that end a quarter of a second before
// the deadline (the kernel's lateness), a second when only that fits, and
// none with less than a second left.
func TestLifetimeFor(t *testing.T) {
	for _, tc := range []struct {
		left time.Duration
		want time.Duration // 0: none
	}{
		{4500 * time.Millisecond, 4 * time.Second},
		{4200 * time.Millisecond, 3 * time.Second},
		{2 * time.Second, time.Second},
		{1100 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{999 * time.Millisecond, 0},
		{0, 0},
		{-time.Hour, 0},
		{time.Hour, 59*time.Minute + 59*time.Second},
	} {
		got, ok := lifetimeFor(tc.left)
		if ok != (tc.want > 0) || got != tc.want {
			t.Errorf("lifetimeFor(%s): got %s, %v; want %s", tc.left, got, ok, tc.want)
		}
		if ok && got > tc.left {
			t.Errorf("lifetimeFor(%s) = %s: ends after the deadline", tc.left, got)
		}
	}
}

// TestVIPAddrsAddWaitsForARenewal: an address added while the deadline is
// less than a second away, between two renewals (at the default TTL it is
// 0.83-1.17 s away), waits for the next renewal and gets its lifetime then,
// instead of being refused: a claim with --assign right after vip lab up
// --fleet was refused half the time. With no renewal within lifetimeWait it
// is refused.
func TestVIPAddrsAddWaitsForARenewal(t *testing.T) {
	clock := &fakeBootClock{now: time.Hour}
	dl := announce.NewDeadline(clock.read)
	v := newVIPAddrs(nil, dl, nil)
	spy := &spyAssigner{v: v, has: map[netip.Addr]bool{}, extended: map[netip.Addr][]time.Duration{}}
	as := v.assigner(spy)
	_ = dl.Set(clock.read() + 900*time.Millisecond)
	a := netip.MustParseAddr("192.0.2.10")
	type result struct {
		added bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		added, err := as.Add("eth0", a)
		done <- result{added, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("add with 0.9 s left returned before a renewal: %v, %v", r.added, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	_ = dl.Set(clock.read() + 1167*time.Millisecond) // the next acknowledged renewal
	select {
	case r := <-done:
		if !r.added || r.err != nil {
			t.Fatalf("add after the renewal: %v, %v; want added", r.added, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("add did not return after the renewal")
	}
	if want := []time.Duration{time.Second}; !slices.Equal(spy.lives, want) {
		t.Errorf("AddFor's lifetimes: %v, want %v", spy.lives, want)
	}
	// No renewal comes: refused once lifetimeWait has passed.
	_ = dl.Set(clock.read() + 900*time.Millisecond)
	start := time.Now()
	if added, err := as.Add("eth0", netip.MustParseAddr("192.0.2.11")); added || !errors.Is(err, errDeadlineNear) {
		t.Errorf("add with no renewal: %v, %v; want errDeadlineNear", added, err)
	}
	if waited := time.Since(start); waited < lifetimeWait {
		t.Errorf("refused after %v, before lifetimeWait (%v)", waited, lifetimeWait)
	}
}

// TestVIPAddrsLifetimes: the addresses vip adds get lifetimes that end by
// the answer deadline, lengthened each time it moves; none once it is
// closed or near, nor for an address removed meanwhile; an earlier agent's
// address found there is taken over; with less than a second left nothing
// is added. The passes over the addresses are called here one by one;
// keepLifetimes runs one each time the deadline moves.
func TestVIPAddrsLifetimes(t *testing.T) {
	clock := &fakeBootClock{now: time.Hour}
	dl := announce.NewDeadline(clock.read)
	a1, a2, old := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10"), netip.MustParseAddr("192.0.2.30")
	v := newVIPAddrs([]announce.Claim{{Addr: old, Interface: "eth0", AddedAddress: true, Options: announce.ClaimOptions{Assign: true}}}, dl, nil)
	spy := &spyAssigner{v: v, has: map[netip.Addr]bool{old: true}, extended: map[netip.Addr][]time.Duration{}}
	as := v.assigner(spy)

	// Closed (no lease yet): nothing is added.
	if added, err := as.Add("eth0", a1); added || !errors.Is(err, errDeadlineNear) {
		t.Fatalf("add with the deadline closed: added %v, %v; want errDeadlineNear", added, err)
	}
	_ = dl.Set(clock.read() + 4500*time.Millisecond)
	for _, a := range []netip.Addr{a1, a2} {
		if added, err := as.Add("eth0", a); !added || err != nil {
			t.Fatalf("add %s: %v, %v", a, added, err)
		}
	}
	if want := []time.Duration{4 * time.Second, 4 * time.Second}; !slices.Equal(spy.lives, want) {
		t.Fatalf("AddFor's lifetimes: got %v, want %v", spy.lives, want)
	}
	// The earlier agent's address is there: taken over, its lifetime
	// now this agent's.
	if added, err := as.Add("eth0", old); !added || err != nil {
		t.Fatalf("add the earlier agent's %s, there already: added %v, %v; want added (taken over)", old, added, err)
	}
	want := map[netip.Addr][]time.Duration{old: {4 * time.Second}}
	check := func(when string) {
		t.Helper()
		for _, a := range []netip.Addr{a1, a2, old} {
			if got := spy.extensions(a); !slices.Equal(got, want[a]) {
				t.Errorf("%s: %s extended %v, want %v", when, a, got, want[a])
			}
		}
	}
	check("after the adds")

	// A renewal moves the deadline: every address is lengthened, to
	// whole seconds a quarter of a second short of it.
	clock.advance(time.Second)
	_ = dl.Set(clock.read() + 3200*time.Millisecond)
	v.extendAll(spy)
	for _, a := range []netip.Addr{a1, a2, old} {
		want[a] = append(want[a], 2*time.Second)
	}
	check("after a renewal")

	// Removed: not put back by the next pass.
	if err := as.Remove("eth0", a2); err != nil {
		t.Fatal(err)
	}
	v.extendAll(spy)
	want[a1] = append(want[a1], 2*time.Second)
	want[old] = append(want[old], 2*time.Second)
	check("after a2's removal")

	// Less than a second before the deadline, or closed: nothing is
	// lengthened, and the lifetimes set before (2 s, 1.5 s ago) end
	// first.
	clock.advance(1500 * time.Millisecond)
	_ = dl.Set(clock.read() + 900*time.Millisecond)
	v.extendAll(spy)
	_ = dl.Close()
	v.extendAll(spy)
	check("with the deadline near, then closed")
	if !spy.has[a1] || !spy.has[old] {
		t.Fatalf("an address was taken off with its lifetime ending by the deadline: %v", spy.has)
	}

	// The deadline moved earlier than the lifetimes given last end (the
	// store back after the failsafe lengthened them, and slow), less
	// than a second ahead: no lifetime ends by it, so the addresses come
	// off now, and go back on with the next lifetime the deadline allows.
	_ = dl.Set(clock.read() + 10*time.Second)
	v.extendAll(spy)
	_ = dl.Set(clock.read() + 500*time.Millisecond)
	v.extendAll(spy)
	if spy.has[a1] || spy.has[old] {
		t.Fatalf("the addresses stayed on with 9 s lifetimes and the deadline 0.5 s away: %v", spy.has)
	}
	_ = dl.Set(clock.read() + 3*time.Second)
	v.extendAll(spy)
	if !spy.has[a1] || !spy.has[old] {
		t.Fatalf("the addresses were not put back once the deadline allowed a lifetime: %v", spy.has)
	}
	for _, a := range []netip.Addr{a1, old} {
		want[a] = append(want[a], 9*time.Second, 2*time.Second)
	}
	check("after the deadline moved earlier, then later")
	_ = dl.Close()
	if added, err := as.Add("eth0", netip.MustParseAddr("192.0.2.40")); added || !errors.Is(err, errDeadlineNear) {
		t.Errorf("add with the deadline closed: added %v, %v; want errDeadlineNear", added, err)
	}

	// keepLifetimes runs a pass each time the deadline moves.
	stop, err := v.keepLifetimes(context.Background(), spy)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_ = dl.Set(clock.read() + 10*time.Second)
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(spy.extensions(a1), 9*time.Second); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the deadline moved 10 s ahead and %s was not extended by 9 s: %v", a1, spy.extensions(a1))
		}
	}
}
