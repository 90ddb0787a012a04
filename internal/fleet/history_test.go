package fleet_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/store"
)

// kindsOf lists the kinds of changes, and the node of each.
func kindsOf(changes []store.Change) []string {
	var out []string
	for _, ch := range changes {
		out = append(out, string(ch.Kind)+" "+ch.Node)
	}
	return out
}

// TestFakeHistory: each change of ownership is recorded with the change,
// at its revision, with who asked and why as the request's context says:
// a claim, a take-over (a move here, from the owner), a standby's takeover
// of an address whose owner's lease expired (from that owner, by nobody),
// and a release. A standby's registration records a standby-add, as vip
// standby's does, and an operator's refresh a refresh.
func TestFakeHistory(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.join("a")
	b, bEng := f.join("b")
	alice := store.Actor{By: "alice@ops", Reason: "service up"}
	if _, err := a.Claim(store.WithActor(context.Background(), alice), []announce.Request{{Addr: vip, Interface: "eth0"}}, announce.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	f.standby(b, vip)
	if _, _, err := a.Refresh(context.Background(), []netip.Addr{vip}); err != nil {
		t.Fatal(err)
	}
	bob := store.Actor{By: "bob@ops", Reason: "a is slow"}
	if _, err := b.TakeOver(store.WithActor(context.Background(), bob), []announce.Request{{Addr: vip, Interface: "eth0"}}, announce.ClaimOptions{}, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return f.owner(vip) == "b" }, "the take-over did not reach b")
	f.crash("b")
	bEng.drop([]netip.Addr{vip})
	f.advanceTo(fakeTTL + fakeTiming.Renew)
	eventually(t, func() bool { return f.owner(vip) == "a" }, "a, standing by since the take-over, did not take the address back")
	carol := store.Actor{By: "carol@ops", Reason: "done"}
	if _, _, err := a.Release(store.WithActor(context.Background(), carol), []netip.Addr{vip}); err != nil {
		t.Fatal(err)
	}
	h := f.s.History()
	want := []string{"claim a", "standby-add b", "refresh a", "take-over b", "standby-takeover a", "release a"}
	if got := kindsOf(h); !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	// The changes of ownership, checked below one by one.
	h = slices.DeleteFunc(h, func(c store.Change) bool { return c.Kind == store.ChangeStandbyAdd || c.Kind == store.ChangeRefresh })
	for i, ch := range h {
		if ch.Addr != vip || ch.Kind != store.ChangeRelease && ch.Interface != "eth0" {
			t.Errorf("change %d (%s) is of %s on %q, want %s on eth0", i, ch.Kind, ch.Addr, ch.Interface, vip)
		}
		if i > 0 && ch.Rev <= h[i-1].Rev {
			t.Errorf("change %d (%s) at revision %d, not after %d", i, ch.Kind, ch.Rev, h[i-1].Rev)
		}
	}
	if h[0].Actor != alice || h[1].Actor.By != bob.By || h[1].Reason != bob.Reason || h[3].Actor != carol {
		t.Errorf("who asked: %+v, %+v, %+v; want alice, bob, carol", h[0].Actor, h[1].Actor, h[3].Actor)
	}
	// The target knows when the owner let go if it read the move record
	// since; the take itself is the change's time.
	if h[1].From != "a" || h[1].Asked.IsZero() || !h[1].Released.IsZero() && h[1].Released.Before(h[1].Asked) {
		t.Errorf("the take-over: from %q, asked %v, released %v; want from a, with its timeline", h[1].From, h[1].Asked, h[1].Released)
	}
	if h[2].From != "b" || h[2].By != "" {
		t.Errorf("the standby's takeover: from %q by %q; want from b (whose lease expired), by nobody", h[2].From, h[2].By)
	}
}
