package fleet_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// standbyNodes lists the nodes of the store's standby records for a.
func (f *fakeFleet) standbyNodes(a netip.Addr) []string {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	var out []string
	for _, kv := range f.s.standbys {
		if kv.v.Addr == a {
			out = append(out, kv.v.Node)
		}
	}
	slices.Sort(out)
	return out
}

// stateOf is m's state of a in its status ("" when it has none).
func stateOf(m *fleet.Member, a netip.Addr) []string {
	var out []string
	for _, s := range m.Status(a) {
		out = append(out, s.State)
	}
	return out
}

// TestFakeStandbySetLasts: an address's standbys are a set that lasts. A
// move makes the old owner a standby in the target's place, the standby
// that became the owner stays in the set (its status says held, not
// standby), a takeover consumes nothing, and a standby's record outlives
// its agent's lease; a release takes the node out.
func TestFakeStandbySetLasts(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	b, bEng := f.join("b")
	f.claim(a, vip)
	f.standby(b, vip)
	if got := f.standbyNodes(vip); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("standbys before the move: %v, want b", got)
	}
	if _, err := b.TakeOver(context.Background(), []announce.Request{{Addr: vip, Interface: "eth0"}}, announce.ClaimOptions{}, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return slices.Equal(f.standbyNodes(vip), []string{"a", "b"}) }, "after the move the old owner a is not a standby beside b")
	eventually(t, func() bool { return slices.Equal(stateOf(a, vip), []string{api.StateStandby}) }, "a's status does not say it stands by")
	if got := stateOf(b, vip); slices.Contains(got, api.StateStandby) {
		t.Errorf("b holds the address and its status says %v: want held alone", got)
	}
	if n := b.Kept()[api.StateStandby]; n != 0 {
		t.Errorf("b counts %d standbys while it holds the address, want 0", n)
	}

	// b dies: a, the old owner, takes the address back at its lease's
	// expiry; b's standby record stays, for when it returns.
	f.crash("b")
	bEng.drop([]netip.Addr{vip})
	f.advanceTo(fakeTTL + fakeTiming.Renew)
	eventually(t, func() bool { return aEng.holds(vip) }, "a, standing by since the move, did not take the address back")
	if got := f.owner(vip); got != "a" {
		t.Errorf("the store's owner: %q, want a", got)
	}
	if got := f.standbyNodes(vip); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("standbys after the takeover and b's lease expired: %v, want a and b (the set lasts)", got)
	}

	// A release on a takes a out of the set as well.
	if _, _, err := a.Release(context.Background(), []netip.Addr{vip}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return slices.Equal(f.standbyNodes(vip), []string{"b"}) }, "a released the address and stays a standby")
	if got := stateOf(a, vip); len(got) != 0 {
		t.Errorf("after its release a's status says %v, want nothing", got)
	}
}

// TestFakeRemovedStandbyTakesNothing: a standby whose record was removed
// from the store (by vip standby --remove, its notice not yet read) does
// not take the address when the owner dies: the take compares the record.
func TestFakeRemovedStandbyTakesNothing(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	_, bEng := f.join("b")
	f.claim(a, vip)
	f.standby(f.running["b"], vip)
	f.s.mu.Lock()
	delete(f.s.standbys, vip.String()+"/b")
	f.s.mu.Unlock()
	f.crash("a")
	aEng.drop([]netip.Addr{vip})
	f.advanceTo(fakeTTL + 2*fakeTiming.Renew)
	never(t, func() bool { return bEng.holds(vip) }, "a standby whose record was removed took the address")
	if got := f.owner(vip); got != "" {
		t.Errorf("the store's owner: %q, want none", got)
	}
}

// TestFakeResyncKeepsANewStandby: a resync whose read of the standby
// records raced a registration (the record written just after the read)
// does not forget the new standby, which takes the address when its owner
// dies (a CI failure: "standby" then "no longer a standby" at once, and no
// takeover).
func TestFakeResyncKeepsANewStandby(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	b, bEng := f.join("b")
	f.claim(a, vip)
	f.s.mu.Lock()
	f.s.afterStandbysRead = func() { f.standby(b, vip) }
	f.s.mu.Unlock()
	if err := b.ReconcileStandbys(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(b, vip); !slices.Equal(got, []string{api.StateStandby}) {
		t.Fatalf("after the racing resync b's state of %s is %v, want standby", vip, got)
	}
	f.crash("a")
	aEng.drop([]netip.Addr{vip})
	f.advanceTo(fakeTTL + 2*fakeTiming.Renew)
	eventually(t, func() bool { return bEng.holds(vip) }, "the standby registered during a resync did not take over")
}

// TestFakeEventsSayTheirTransition: the events that change a node's place
// for an address say where from, where to, who is on the other side, and
// why as a code, so that the kinds that carry several transitions (a
// standby added or taking over; a move away or here) are told apart
// without reading their words (issue 33).
func TestFakeEventsSayTheirTransition(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	b, bEng := f.join("b")
	f.claim(a, vip)
	f.standby(b, vip)
	if _, err := b.TakeOver(context.Background(), []announce.Request{{Addr: vip, Interface: "eth0"}}, announce.ClaimOptions{}, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return slices.Contains(aEng.transitions(), "move owner>standby peer=b moved-away") }, "a's release for the move is not told as one")
	f.crash("b")
	bEng.drop([]netip.Addr{vip})
	f.advanceTo(fakeTTL + fakeTiming.Renew)
	eventually(t, func() bool { return aEng.holds(vip) }, "a, standing by since the move, did not take the address back")
	wantA := []string{"move owner>standby peer=b moved-away", "standby standby>owner peer=b owner-expired"}
	eventually(t, func() bool { return slices.Equal(aEng.transitions(), wantA) }, fmt.Sprintf("a's transitions %q, want %q", aEng.transitions(), wantA))
	wantB := []string{"standby none>standby peer= standby-added", "move standby>owner peer=a moved-here"}
	if got := bEng.transitions(); !slices.Equal(got, wantB) {
		t.Errorf("b's transitions %q, want %q", got, wantB)
	}
}

// transitions are the events that say a change of this node's place, as
// "kind from>to peer=P reason".
func (f *fakeEngine) transitions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ev := range f.events {
		if ev.Reason != "" {
			out = append(out, fmt.Sprintf("%s %s>%s peer=%s %s", ev.Kind, ev.From, ev.To, ev.Peer, ev.Reason))
		}
	}
	return out
}

// TestFakeClaimStandbyIsRecorded: a standby added with vip claim --standby
// is in the history, as one added with vip standby is (issue 35: it was
// not), with who asked.
func TestFakeClaimStandbyIsRecorded(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.join("a")
	b, _ := f.join("b")
	f.claim(a, vip)
	ctx := store.WithActor(context.Background(), store.Actor{By: "ops@host", Reason: "spare for the upgrade"})
	if _, err := b.Standby(ctx, []announce.Request{{Addr: vip, Interface: "eth0"}}, announce.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	found := slices.ContainsFunc(f.s.History(), func(c store.Change) bool {
		return c.Kind == store.ChangeStandbyAdd && c.Addr == vip && c.Node == "b" && c.By == "ops@host" && c.Reason == "spare for the upgrade"
	})
	if !found {
		t.Errorf("no standby-add of %s by b, asked by ops@host, in the history: %+v", vip, f.s.History())
	}
}
