package fleet_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/vipctl/vip/internal/store"
)

// TestFakeRefreshIsRecorded: an operator's refresh of an address this node
// holds is in the history, with who asked and why (issue 35: vip refresh
// took no --reason, and no record said it was done); one of an address it
// does not hold is not.
func TestFakeRefreshIsRecorded(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.join("a")
	f.claim(a, vip)
	other := netip.MustParseAddr("198.51.100.99")
	ctx := store.WithActor(context.Background(), store.Actor{By: "ops@host", Reason: "switch replaced"})
	refreshed, notHeld, err := a.Refresh(ctx, []netip.Addr{vip, other})
	if err != nil || !slices.Equal(refreshed, []netip.Addr{vip}) || !slices.Equal(notHeld, []netip.Addr{other}) {
		t.Fatalf("refresh: %v, %v, %v", refreshed, notHeld, err)
	}
	var got []store.Change
	for _, c := range f.s.History() {
		if c.Kind == store.ChangeRefresh {
			got = append(got, c)
		}
	}
	if len(got) != 1 || got[0].Addr != vip || got[0].Node != "a" || got[0].By != "ops@host" || got[0].Reason != "switch replaced" {
		t.Errorf("the history's refreshes: %+v, want one of %s by a, asked by ops@host because the switch was replaced", got, vip)
	}
}
