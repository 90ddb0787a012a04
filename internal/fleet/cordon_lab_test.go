package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// TestCordonComparedWhereTaken, against a real etcd: a standby's take and
// a move's request compare the target's cordon in their transaction, so
// that a cordon written after the taker looked refuses it; a move's
// arrival (-1) does not look.
func TestCordonComparedWhereTaken(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	c := w.client(t, "a")
	l := fleet.NewEtcdLedger(c)
	t.Cleanup(l.Close)
	ctx := context.Background()
	lease, err := l.Grant(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cord, _, err := c.PutCordon(ctx, store.Cordon{Node: "b", Since: time.Now()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	taken := vip.Next()
	rec := store.Claim{Addr: taken, Node: "b", Interface: "eth0", Since: time.Now()}
	if took, _, err := l.Take(ctx, lease, rec, 0, fleet.StandbyTake(0), store.Change{Kind: store.ChangeFailover}); err != nil || took {
		t.Fatalf("take looking at no cordon while one is there: took %v, %v; want refused", took, err)
	}
	if took, _, err := l.Take(ctx, lease, rec, 0, fleet.StandbyTake(cord.Rev), store.Change{Kind: store.ChangeFailover}); err != nil || took {
		t.Fatalf("a standby's take with no standby record of b: took %v, %v; want refused", took, err)
	}
	// b stands by for the addresses taken as a standby below.
	later := taken.Next().Next().Next()
	if _, err := l.PutStandbys(ctx, []store.Standby{{Addr: taken, Node: "b", Interface: "eth0"}, {Addr: later, Node: "b", Interface: "eth0"}}); err != nil {
		t.Fatal(err)
	}
	if took, _, err := l.Take(ctx, lease, rec, 0, fleet.StandbyTake(cord.Rev), store.Change{Kind: store.ChangeFailover}); err != nil || !took {
		t.Fatalf("take looking at the cordon as it is: took %v, %v; want taken", took, err)
	}
	arrived := rec
	arrived.Addr = taken.Next()
	if took, _, err := l.Take(ctx, lease, arrived, 0, fleet.MoveArrival(0), store.Change{Kind: store.ChangeFailover}); err != nil || !took {
		t.Fatalf("take not looking at the cordon: took %v, %v; want taken", took, err)
	}
	mv := store.Move{Addr: arrived.Addr.Next(), To: "b", ID: "test", Asked: time.Now()}
	if asked, err := l.Ask(ctx, lease, []fleet.Asking{{Move: mv}}); err != nil || asked {
		t.Fatalf("a move planned on no cordon while one is there: asked %v, %v; want refused", asked, err)
	}
	if asked, err := l.Ask(ctx, lease, []fleet.Asking{{Move: mv, CordonRev: cord.Rev}}); err != nil || !asked {
		t.Fatalf("a move planned on the cordon as it is: asked %v, %v; want asked", asked, err)
	}
	// Lifted: a take that saw it is refused, one that sees none goes.
	if _, _, err := c.DeleteCordon(ctx, "b", store.Actor{}); err != nil {
		t.Fatal(err)
	}
	late := rec
	late.Addr = mv.Addr.Next()
	if took, _, err := l.Take(ctx, lease, late, 0, fleet.StandbyTake(cord.Rev), store.Change{Kind: store.ChangeFailover}); err != nil || took {
		t.Fatalf("take looking at a cordon since lifted: took %v, %v; want refused", took, err)
	}
	if took, _, err := l.Take(ctx, lease, late, 0, fleet.StandbyTake(0), store.Change{Kind: store.ChangeFailover}); err != nil || !took {
		t.Fatalf("take looking at no cordon, none there: took %v, %v; want taken", took, err)
	}
}
