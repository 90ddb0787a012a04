package fleet_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/test/labtest"
)

// historyKinds reads q's history: each change's kind and node.
func historyKinds(t *testing.T, c *store.Client, q store.HistoryQuery) ([]store.Change, []string) {
	t.Helper()
	h, _, skipped, err := c.History(context.Background(), q)
	if err != nil {
		t.Fatalf("read the history: %v", err)
	}
	if skipped > 0 {
		t.Errorf("%d history records could not be read", skipped)
	}
	return h, kindsOf(h)
}

// historyCount counts the records of subject in the store.
func historyCount(t *testing.T, c *store.Client, subject string) int64 {
	t.Helper()
	resp, err := c.Get(context.Background(), c.Keys.HistoryOf(subject), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// TestFencedHistory: against a real etcd, an owner cut off from the store
// fences, its standby takes the address, and once healed the owner finds
// it lost. The history holds, in the store's order, the claim, the
// standby's takeover (from the owner whose lease expired), then the fence
// (with the time it began, written once it lifted), the loss and the
// resumption; the address's own history lists the fence, which names it,
// and not the resumption, which it was not part of.
func TestFencedHistory(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, _, _, bEng := ownerAndStandby(t, w)
	cut := labtest.Isolate(t, w.l, w.hosts["a"], w.hosts["store"])
	labtest.Eventually(t, ttl+5*time.Second, func() (bool, string) {
		return bEng.holds(vip), "the standby did not take over from the cut-off owner"
	})
	_, _, fencedAt := a.Lease()
	cut.Heal(t)
	bc := w.client(t, "b")
	want := []string{"claim a", "standby-add b", "standby-takeover b", "fence a", "lost a", "resume a"}
	var h []store.Change
	labtest.Eventually(t, 15*time.Second, func() (bool, string) {
		var got []string
		h, got = historyKinds(t, bc, store.HistoryQuery{})
		return slices.Equal(got, want), fmt.Sprintf("history %v, want %v", got, want)
	})
	if h[2].From != "a" || h[4].From != "b" || h[4].Addr != vip {
		t.Errorf("the takeover is from %q, the loss of %s to %q; want from a, %s lost to b", h[2].From, h[4].Addr, h[4].From, vip)
	}
	if f := h[3]; f.Count != 1 || !slices.Equal(f.Addrs, []netip.Addr{vip}) || f.Since.IsZero() || !fencedAt.IsZero() && !f.Since.Equal(fencedAt.UTC()) {
		t.Errorf("the fence: %+v, want %s silenced since %v", f, vip, fencedAt)
	}
	for i := 1; i < len(h); i++ {
		if h[i].Rev < h[i-1].Rev || h[i].Rev == h[i-1].Rev && h[i].Seq <= h[i-1].Seq {
			t.Errorf("history out of the store's order: %v at %d after %v at %d", h[i].Kind, h[i].Rev, h[i-1].Kind, h[i-1].Rev)
		}
	}
	if _, got := historyKinds(t, bc, store.HistoryQuery{Addr: vip}); !slices.Equal(got, want[:5]) {
		t.Errorf("history of %s: %v, want %v (the fence lists it, the resumption does not: it was lost)", vip, got, want[:5])
	}
	if _, got := historyKinds(t, bc, store.HistoryQuery{Node: "b"}); !slices.Equal(got, []string{"standby-add b", "standby-takeover b", "lost a"}) {
		t.Errorf("history of node b: %v, want its standby, its takeover and a's loss to it", got)
	}
	// The fleet's view reads no history.
	v, err := bc.Fleet(context.Background())
	if err != nil || len(v.Skipped) != 0 {
		t.Errorf("the fleet with a history: %v, skipped %v", err, v.Skipped)
	}
}

// TestHistoryBound: each subject keeps its last store.HistoryKeep records.
// A member that claims and releases one address again and again leaves no
// more than that once it wrote a multiple of store.HistoryTrimEvery (its
// ledger trims behind every HistoryTrimEvery writes), the newest kept;
// 10,000 changes of one address appended in batches leave exactly the
// last HistoryKeep after every batch.
func TestHistoryBound(t *testing.T) {
	w := newWorld(t, "a")
	a, _ := w.join(t, "a")
	c := w.client(t, "a")
	addr := netip.MustParseAddr("198.51.100.40")
	for range store.HistoryKeep {
		if err := claim(t, a, addr); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.Release(context.Background(), []netip.Addr{addr}); err != nil {
			t.Fatal(err)
		}
	}
	// 2*HistoryKeep records, a whole number of HistoryTrimEvery: the
	// last write trims the subject to HistoryKeep.
	subject := store.AddrSubject(addr)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		n := historyCount(t, c, subject)
		return n == store.HistoryKeep, fmt.Sprintf("%d records of %s after %d claims and releases, want %d", n, addr, store.HistoryKeep, store.HistoryKeep)
	})
	h, _ := historyKinds(t, c, store.HistoryQuery{Addr: addr})
	if len(h) != store.HistoryKeep || h[len(h)-1].Kind != store.ChangeRelease || h[0].Kind != store.ChangeClaim {
		t.Errorf("kept %d records from %v to %v, want the last %d, claim to release", len(h), h[0].Kind, h[len(h)-1].Kind, store.HistoryKeep)
	}
	// Between two trims the subject grows by up to HistoryTrimEvery
	// records, and the write that makes them HistoryTrimEvery trims it.
	for n := 1; n <= store.HistoryTrimEvery; n++ {
		var err error
		if n%2 == 1 {
			err = claim(t, a, addr)
		} else {
			_, _, err = a.Release(context.Background(), []netip.Addr{addr})
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == store.HistoryTrimEvery {
			break
		}
		// A trim after this write would not be waited for: it would
		// show in a later count.
		if got := historyCount(t, c, subject); got != int64(store.HistoryKeep+n) {
			t.Fatalf("%d records of %s %d writes after a trim, want %d: trimmed before %d writes", got, addr, n, store.HistoryKeep+n, store.HistoryTrimEvery)
		}
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		n := historyCount(t, c, subject)
		return n == store.HistoryKeep, fmt.Sprintf("%d records of %s after %d more writes, want %d: not trimmed", n, addr, store.HistoryTrimEvery, store.HistoryKeep)
	})

	other := netip.MustParseAddr("198.51.100.41")
	start := time.Now().Add(-time.Hour)
	const total, batch = 10000, 100
	for i := 0; i < total; i += batch {
		changes := make([]store.Change, batch)
		for j := range changes {
			changes[j] = store.Change{Kind: store.ChangeClaim, Addr: other, Node: "a", Time: start.Add(time.Duration(i+j) * time.Millisecond), Count: i + j}
		}
		if err := c.AppendHistory(context.Background(), changes); err != nil {
			t.Fatal(err)
		}
		if n := historyCount(t, c, store.AddrSubject(other)); n != store.HistoryKeep {
			t.Fatalf("after %d changes %d records are kept, want %d", i+batch, n, store.HistoryKeep)
		}
	}
	h, _ = historyKinds(t, c, store.HistoryQuery{Addr: other})
	for i, ch := range h {
		if want := total - store.HistoryKeep + i; ch.Count != want {
			t.Fatalf("record %d kept is change %d, want %d: the newest are kept", i, ch.Count, want)
		}
	}
}
