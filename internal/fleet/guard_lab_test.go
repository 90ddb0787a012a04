package fleet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// TestGuardComparedWhereTaken, against a real etcd: a take whose context
// carries a guard (the failsafe sets' revision as read, and the record of
// a live owner whose set leaves the taker out) fails with
// ErrFailsafeChanged once that owner's lease is gone, or once a set was
// written since the read, in each of the ledger's take transactions
// (Acquire, AcquireGroup, Take); a guard read afresh lets it through. The
// fake ledger does the same (TestFakeTakeGuardedAgainstALapsingOwner).
func TestGuardComparedWhereTaken(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	l := fleet.NewEtcdLedger(w.client(t, "a"))
	t.Cleanup(l.Close)
	ctx := context.Background()
	lease, err := l.Grant(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// o, an owner whose set names only x: the taker, b, is left out.
	oLease, _, _, err := l.Register(ctx, 30*time.Second, store.Node{Node: "o"}, &store.FailsafeSet{Node: "o", Nodes: []string{"x"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	guard := func() fleet.Guard {
		t.Helper()
		sets, nodes, rev, err := l.FailsafeSets(ctx, "b")
		if err != nil || len(sets) == 0 {
			t.Fatalf("read the failsafe sets: %v, %d sets", err, len(sets))
		}
		g := fleet.Guard{Rev: rev, Live: map[string]int64{}}
		for _, n := range nodes {
			if n.Node == "o" {
				g.Live["o"] = n.CreateRev
			}
		}
		return g
	}
	addr := vip.Next().Next().Next().Next().Next().Next().Next().Next()
	rec := func() store.Claim {
		addr = addr.Next()
		return store.Claim{Addr: addr, Node: "b", Interface: "eth0", Since: time.Now()}
	}
	gctx := fleet.WithGuard(ctx, guard())
	if fresh, err := l.Acquire(gctx, lease, rec(), store.Actor{}); err != nil || !fresh {
		t.Fatalf("a claim under a guard that holds: %v, %v; want claimed", fresh, err)
	}
	takes := func(gctx context.Context) map[string]error {
		_, e1 := l.Acquire(gctx, lease, rec(), store.Actor{})
		_, e2 := l.AcquireGroup(gctx, lease, []store.Claim{rec(), rec()}, store.Actor{})
		_, _, e3 := l.Take(gctx, lease, rec(), 0, fleet.MoveArrival(0), store.Change{Kind: store.ChangeFailover})
		return map[string]error{"Acquire": e1, "AcquireGroup": e2, "Take": e3}
	}
	// A set written since the read.
	if _, _, _, err := l.Register(ctx, 30*time.Second, store.Node{Node: "p"}, &store.FailsafeSet{Node: "p", Nodes: []string{"o"}}, nil); err != nil {
		t.Fatal(err)
	}
	for op, err := range takes(gctx) {
		if !errors.Is(err, fleet.ErrFailsafeChanged) {
			t.Errorf("%s with a set written since the guard's read: %v, want ErrFailsafeChanged", op, err)
		}
	}
	// o's lease gone since the read.
	gctx = fleet.WithGuard(ctx, guard())
	if err := l.Revoke(ctx, oLease); err != nil {
		t.Fatal(err)
	}
	for op, err := range takes(gctx) {
		if !errors.Is(err, fleet.ErrFailsafeChanged) {
			t.Errorf("%s with the guarded owner's lease gone since the read: %v, want ErrFailsafeChanged", op, err)
		}
	}
	// Read again: nothing changed since.
	fresh := fleet.Guard{}
	_, _, fresh.Rev, err = l.FailsafeSets(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	for op, err := range takes(fleet.WithGuard(ctx, fresh)) {
		if err != nil {
			t.Errorf("%s under a guard read afresh: %v, want taken", op, err)
		}
	}
}
