package fleet_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// groupAddrs are a dual-stack service's addresses.
var groupAddrs = []netip.Addr{netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("198.51.100.11"), netip.MustParseAddr("2001:db8::10")}

func groupReqs(addrs []netip.Addr) []announce.Request {
	reqs := make([]announce.Request, len(addrs))
	for i, a := range addrs {
		reqs[i] = announce.Request{Addr: a, Interface: "eth0"}
	}
	return reqs
}

// owners lists the store's owner of each of addrs.
func (f *fakeFleet) owners(addrs []netip.Addr) map[string]int {
	out := map[string]int{}
	for _, a := range addrs {
		out[f.owner(a)]++
	}
	return out
}

// TestFakeGroupStandbyTakesWhole: two standbys for a group of three; when
// its owner dies, one of them takes all three (never a split), and the
// other none, whichever wins each address's race.
func TestFakeGroupStandbyTakesWhole(t *testing.T) {
	for round := range 5 {
		f := newFakeFleet(t)
		a, aEng := f.join("a")
		b, bEng := f.join("b")
		c, cEng := f.join("c")
		web := announce.ClaimOptions{Group: "web"}
		if _, err := a.Claim(context.Background(), groupReqs(groupAddrs), web); err != nil {
			t.Fatal(err)
		}
		for _, m := range []*fleet.Member{b, c} {
			if _, err := m.Standby(context.Background(), groupReqs(groupAddrs), web); err != nil {
				t.Fatal(err)
			}
		}
		if got := f.owners(groupAddrs); got["a"] != 3 {
			t.Fatalf("round %d: owners %v, want all three on a", round, got)
		}
		f.crash("a")
		aEng.drop(groupAddrs)
		f.advanceTo(fakeTTL + 2*fakeTiming.Renew)
		eventually(t, func() bool {
			got := f.owners(groupAddrs)
			return got["b"] == 3 || got["c"] == 3
		}, "the group did not go whole to one standby")
		got := f.owners(groupAddrs)
		winner, loser := bEng, cEng
		if got["c"] == 3 {
			winner, loser = cEng, bEng
		}
		for _, g := range groupAddrs {
			if !winner.holds(g) {
				t.Errorf("round %d: the standby that took the group does not answer for %s", round, g)
			}
			if loser.holds(g) {
				t.Errorf("round %d: the other standby answers for %s too: the group is split", round, g)
			}
		}
		for _, ch := range f.s.History() {
			if ch.Kind == store.ChangeFailover && ch.Node != f.owner(ch.Addr) {
				t.Errorf("round %d: history records %s taken by %s, which does not hold it", round, ch.Addr, ch.Node)
			}
		}
	}
}

// TestFakeGroupClaimedWhole: a group is claimed whole or not at all; an
// address of one group is refused to another.
func TestFakeGroupClaimedWhole(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.join("a")
	b, bEng := f.join("b")
	f.claim(a, groupAddrs[2])
	_, err := b.Claim(context.Background(), groupReqs(groupAddrs), announce.ClaimOptions{Group: "web"})
	var rf *announce.RefusedError
	if !errors.As(err, &rf) || len(rf.Refused) != 3 {
		t.Fatalf("a group with one address held elsewhere: %v, want all three refused", err)
	}
	for _, g := range groupAddrs[:2] {
		if bEng.holds(g) || f.owner(g) != "" {
			t.Errorf("%s was claimed though its group was refused (owner %q)", g, f.owner(g))
		}
	}
	if _, err := a.Claim(context.Background(), groupReqs(groupAddrs[:2]), announce.ClaimOptions{Group: "web"}); err != nil {
		t.Fatal(err)
	}
	_, err = a.Claim(context.Background(), groupReqs(groupAddrs[:1]), announce.ClaimOptions{Group: "db"})
	var ge *fleet.GroupError
	if !errors.As(err, &ge) || ge.Group != "web" {
		t.Fatalf("claim of web's address into db: %v, want a *GroupError naming web", err)
	}
}

// TestFakeGroupStandbyWhole: a standby for part of a group is refused with
// the addresses it left out, and nothing is registered.
func TestFakeGroupStandbyWhole(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.join("a")
	b, _ := f.join("b")
	web := announce.ClaimOptions{Group: "web"}
	if _, err := a.Claim(context.Background(), groupReqs(groupAddrs), web); err != nil {
		t.Fatal(err)
	}
	_, err := b.Standby(context.Background(), groupReqs(groupAddrs[:2]), web)
	if !errors.Is(err, store.ErrRefused) || !strings.Contains(err.Error(), "group web has 2001:db8::10 too") {
		t.Fatalf("a standby for 2 of 3: %v, want refused naming 2001:db8::10", err)
	}
	if got := f.standbyNodes(groupAddrs[0]); len(got) != 0 {
		t.Errorf("standbys %v after the refusal, want none", got)
	}
}

// TestFakeGroupReleaseRecordsGroup: the history's record of each address of
// a group released names the group, as the claim's did.
func TestFakeGroupReleaseRecordsGroup(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.join("a")
	if _, err := a.Claim(context.Background(), groupReqs(groupAddrs), announce.ClaimOptions{Group: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Release(context.Background(), groupAddrs); err != nil {
		t.Fatal(err)
	}
	released := 0
	for _, ch := range f.s.History() {
		if ch.Kind != store.ChangeRelease {
			continue
		}
		released++
		if ch.Group != "web" {
			t.Errorf("the release of %s is recorded in group %q, want web", ch.Addr, ch.Group)
		}
	}
	if released != len(groupAddrs) {
		t.Errorf("%d releases recorded, want %d", released, len(groupAddrs))
	}
}
