package agent

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/vipctl/vip/announce"
)

// spyAssigner is an Assigner that reads, while it adds or removes an
// address, which addresses vipAddrs counts as vip's.
type spyAssigner struct {
	v        *vipAddrs
	has      map[netip.Addr]bool // on the interface
	fail     bool
	duringOp []bool // whether the address was vip's while it was added or removed
}

func (s *spyAssigner) Add(_ string, a netip.Addr) (bool, error) {
	s.duringOp = append(s.duringOp, s.v.of(nil)[a])
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
	v := newVIPAddrs([]announce.Claim{
		{Addr: recorded, Options: announce.ClaimOptions{Assign: true}},
		{Addr: netip.MustParseAddr("192.0.2.40")}, // not assigned: the host's
	})
	spy := &spyAssigner{v: v, has: map[netip.Addr]bool{own: true}}
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
