package fleet_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// TestFakeCordon: a cordoned node takes nothing by take-over or as a
// standby, keeps what it holds, and once the cordon lifts (by uncordon, or
// at its end with nobody there to lift it) takes as a standby what nobody
// took meanwhile.
func TestFakeCordon(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lasts is the cordon's --for (0: until uncordoned); lift, when
		// set, lifts it by hand at that time.
		lasts time.Duration
		lift  time.Duration
	}{
		{name: "until uncordoned", lift: 2 * fakeTTL},
		{name: "for a while: it ends by itself", lasts: 2 * fakeTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet(t)
			a, aEng := f.join("a")
			b, bEng := f.join("b")
			f.claim(a, vip)
			f.standby(b, vip)
			other := vip.Next()
			f.claim(b, other)
			// released is an address a lets go of on purpose while b,
			// its standby, is cordoned: it stays free after, too.
			released := other.Next()
			f.claim(a, released)
			f.standby(b, released)
			c := &store.Cordon{Reason: "kernel upgrade", By: "ops@c", Since: f.clock.Now()}
			if tc.lasts > 0 {
				c.Until = f.clock.Now().Add(tc.lasts)
			}
			f.s.cordon("b", c)
			eventually(t, func() bool { _, ok := b.Cordon(); return ok }, "b did not see its cordon")
			if got := b.Info().Cordon; got == nil || got.Reason != "kernel upgrade" || (tc.lasts > 0) != (got.Left != nil) {
				t.Errorf("b's status cordon: %+v, want the reason, and the time left when it has an end", got)
			}
			eventually(t, func() bool { return bEng.sawEvent(event.Cordon, "node b is cordoned") }, "no event says b is cordoned")

			// A take-over to the cordoned node is refused, naming the
			// cordon; nothing changes.
			_, err := b.TakeOver(context.Background(), []announce.Request{{Addr: vip, Interface: "eth0"}}, announce.ClaimOptions{}, false)
			if !errors.Is(err, store.ErrRefused) || !strings.Contains(err.Error(), "node b is cordoned") || !strings.Contains(err.Error(), `"kernel upgrade"`) {
				t.Fatalf("take-over on a cordoned node: %v, want a refusal naming the cordon", err)
			}
			if f.owner(vip) != "a" || !aEng.holds(vip) {
				t.Fatal("a refused take-over changed the owner")
			}

			if _, _, err := a.Release(context.Background(), []netip.Addr{released}); err != nil {
				t.Fatal(err)
			}
			// The owner dies: the cordoned standby does not take over.
			f.crash("a")
			aEng.drop([]netip.Addr{vip})
			f.advanceTo(fakeTTL + fakeTiming.Renew)
			eventually(t, func() bool { return bEng.sawEvent(event.Standby, "not taken") }, "no event says the cordoned standby did not take the address")
			never(t, func() bool { return bEng.holds(vip) }, "a cordoned standby took the address")
			if got := f.owner(vip); got != "" {
				t.Fatalf("the store's owner of %s: %q, want none while b is cordoned", vip, got)
			}
			if !bEng.holds(other) || f.owner(other) != "b" {
				t.Error("the cordoned node let go of what it held")
			}

			// The cordon lifts: b takes what it stood by for.
			if tc.lift > 0 {
				f.advanceTo(tc.lift)
				f.s.cordon("b", nil)
			} else {
				f.advanceTo(tc.lasts + fakeTiming.Renew)
			}
			eventually(t, func() bool { return bEng.holds(vip) && f.owner(vip) == "b" }, "b did not take the address once its cordon lifted")
			if c, _, _ := f.s.claim(vip); c.Home != "a" {
				t.Errorf("taken from the dead a, the address's home is %q, want a", c.Home)
			}
			never(t, func() bool { return bEng.holds(released) }, "after the uncordon b took an address its owner had released on purpose")
			if _, ok := b.Cordon(); ok {
				t.Error("b still reports its cordon after it lifted")
			}
			eventually(t, func() bool { return bEng.sawEvent(event.Cordon, "cordon lifted") }, "no event says the cordon lifted")
		})
	}
}
