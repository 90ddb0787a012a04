package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/test/etcdembed"
)

// The ledger's contract: the same cases run against the fake store of
// memory, which the fleet's unit tests use, and against a real etcd
// embedded in the test, so that the fake cannot drift from what etcd does
// (issue 33). Each case gets a store of its own (a fresh fake, or a fresh
// prefix of the one etcd), and reaches it as the nodes a, b and c.

// contractStore is one store as the cases see it: each node's Ledger, and
// the writes no Ledger makes (a cordon is written by `vip cordon`).
type contractStore interface {
	ledger(node string) fleet.Ledger
	// setCordon writes node's cordon, or lifts it (nil).
	setCordon(t *testing.T, node string, c *store.Cordon)
}

type fakeContract struct{ s *fakeStore }

func (f fakeContract) ledger(node string) fleet.Ledger { return f.s.ledger(node) }
func (f fakeContract) setCordon(_ *testing.T, node string, c *store.Cordon) {
	f.s.cordon(node, c)
}

type etcdContract struct {
	c *store.Client
	l fleet.Ledger
}

func (e etcdContract) ledger(string) fleet.Ledger { return e.l }
func (e etcdContract) setCordon(t *testing.T, node string, c *store.Cordon) {
	t.Helper()
	ctx := context.Background()
	if c == nil {
		if _, _, err := e.c.DeleteCordon(ctx, node, store.Actor{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	rec := *c
	rec.Node = node
	if _, _, err := e.c.PutCordon(ctx, rec, 0); err != nil {
		t.Fatal(err)
	}
}

func TestLedgerContractFake(t *testing.T) {
	runLedgerContract(t, func(t *testing.T) contractStore {
		return fakeContract{newFakeStore(clockwork.NewFakeClock())}
	})
}

func TestLedgerContractEtcd(t *testing.T) {
	url := etcdembed.Start(t)
	var n atomic.Int64
	runLedgerContract(t, func(t *testing.T) contractStore {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := store.Open(ctx, store.Config{URL: url, Prefix: fmt.Sprintf("/contract/%d/", n.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		l := fleet.NewEtcdLedger(c)
		t.Cleanup(func() { l.Close(); c.Close() })
		return etcdContract{c: c, l: l}
	})
}

// contractTTL is long enough that no lease expires during a case: expiry
// runs on the fake's clock in one store and on etcd's in the other, so the
// cases end leases by Revoke only.
const contractTTL = time.Minute

var (
	addrA = netip.MustParseAddr("192.0.2.10")
	addrB = netip.MustParseAddr("192.0.2.11")
	addrC = netip.MustParseAddr("2001:db8::10")
)

func register(t *testing.T, l fleet.Ledger, node string) fleet.LeaseID {
	t.Helper()
	lease, other, _, err := l.Register(context.Background(), contractTTL, store.Node{Node: node, Host: node, Started: time.Now()}, nil, func(store.Node) bool { return false })
	if err != nil || other != nil {
		t.Fatalf("register %s: %v (other %v)", node, err, other)
	}
	return lease
}

func claimOf(a netip.Addr, node, group string) store.Claim {
	return store.Claim{Addr: a, Node: node, Interface: "eth0", Since: time.Unix(1_700_000_000, 0).UTC(), Group: group}
}

func runLedgerContract(t *testing.T, open func(t *testing.T) contractStore) {
	ctx := context.Background()
	cases := []struct {
		name string
		run  func(t *testing.T, s contractStore)
	}{
		{"a node registers once while its lease lives", func(t *testing.T, s contractStore) {
			l := s.ledger("a")
			first := register(t, l, "a")
			if _, _, _, err := l.Register(ctx, contractTTL, store.Node{Node: "a"}, nil, func(store.Node) bool { return false }); err == nil {
				t.Fatal("a second agent of node a registered beside a live one")
			}
			lease, other, _, err := l.Register(ctx, contractTTL, store.Node{Node: "a"}, nil, func(store.Node) bool { return true })
			if err != nil || other == nil || fleet.LeaseID(other.Lease) != first || lease == first {
				t.Fatalf("a successor's registration: lease %v, predecessor %+v, %v; want the first's lease %v named", lease, other, err, first)
			}
			if ok, err := l.Reregister(ctx, first, store.Node{Node: "a"}); ok || err != nil {
				t.Fatalf("Reregister under the predecessor's lease: %v, %v; want false: the record is the successor's", ok, err)
			}
			if ok, err := l.Reregister(ctx, lease, store.Node{Node: "a", Version: "2"}); !ok || err != nil {
				t.Fatalf("Reregister under the record's lease: %v, %v", ok, err)
			}
		}},
		{"the nodes are counted as read", func(t *testing.T, s contractStore) {
			la, lb := s.ledger("a"), s.ledger("b")
			register(t, la, "a")
			leaseB := register(t, lb, "b")
			nodes, _, err := la.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := la.CountNodes(ctx); err != nil || n != len(nodes) || n != 2 {
				t.Fatalf("CountNodes: %d, %v; want 2, as Nodes read %d", n, err, len(nodes))
			}
			if err := lb.Revoke(ctx, leaseB); err != nil {
				t.Fatal(err)
			}
			if n, err := la.CountNodes(ctx); err != nil || n != 1 {
				t.Fatalf("CountNodes once b's lease went: %d, %v; want 1", n, err)
			}
		}},
		{"a node's record at a past revision", func(t *testing.T, s contractStore) {
			la, lb := s.ledger("a"), s.ledger("b")
			leaseA := register(t, la, "a")
			register(t, lb, "b")
			nodes, first, err := la.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			created := map[string]int64{}
			for _, n := range nodes {
				created[n.Node] = n.CreateRev
			}
			if err := la.Revoke(ctx, leaseA); err != nil {
				t.Fatal(err)
			}
			_, gone, err := la.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			register(t, la, "a")
			for _, c := range []struct {
				node string
				rev  int64
				want int64
			}{{"a", first, created["a"]}, {"a", gone, 0}, {"b", gone, created["b"]}, {"c", first, 0}} {
				if got, err := la.NodeAt(ctx, c.node, c.rev); err != nil || got != c.want || (c.want == 0) != (got == 0) {
					t.Errorf("NodeAt(%s, %d) = %d, %v; want %d (a registered at %d, revoked by %d, registered again)", c.node, c.rev, got, err, c.want, created["a"], gone)
				}
			}
			if created["a"] == 0 || created["b"] == 0 {
				t.Fatalf("the records' creation revisions were not read: %v", created)
			}
			if got, err := la.NodeAt(ctx, "a", gone+1000); err == nil {
				t.Errorf("NodeAt a revision the store has not reached: %d, no error", got)
			}
		}},
		{"acquire: free, own, another's, adopted", func(t *testing.T, s contractStore) {
			la, lb := s.ledger("a"), s.ledger("b")
			leaseA, leaseB := register(t, la, "a"), register(t, lb, "b")
			if fresh, err := la.Acquire(ctx, leaseA, claimOf(addrA, "a", ""), store.Actor{}); !fresh || err != nil {
				t.Fatalf("acquire a free address: fresh %v, %v", fresh, err)
			}
			if fresh, err := la.Acquire(ctx, leaseA, claimOf(addrA, "a", ""), store.Actor{}); fresh || err != nil {
				t.Fatalf("acquire it again: fresh %v, %v; want not fresh, no error", fresh, err)
			}
			var held *fleet.HeldError
			if _, err := lb.Acquire(ctx, leaseB, claimOf(addrA, "b", ""), store.Actor{}); !errors.As(err, &held) || held.Node != "a" {
				t.Fatalf("b acquires a's address: %v; want a HeldError naming a", err)
			}
			// A's agent restarted: a new lease of node a adopts the key.
			leaseA2, _, _, err := la.Register(ctx, contractTTL, store.Node{Node: "a"}, nil, func(store.Node) bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			if fresh, err := la.Acquire(ctx, leaseA2, claimOf(addrA, "a", ""), store.Actor{}); !fresh || err != nil {
				t.Fatalf("adopt under the new lease: fresh %v, %v", fresh, err)
			}
			if err := la.Revoke(ctx, leaseA); err != nil {
				t.Fatal(err)
			}
			if _, err := lb.Acquire(ctx, leaseB, claimOf(addrA, "b", ""), store.Actor{}); !errors.As(err, &held) {
				t.Fatalf("after the old lease's revocation b acquires: %v; want HeldError: the key went with the new lease", err)
			}
		}},
		{"acquire refuses an address of another group", func(t *testing.T, s contractStore) {
			la := s.ledger("a")
			lease := register(t, la, "a")
			if _, err := la.AcquireGroup(ctx, lease, []store.Claim{claimOf(addrA, "a", "web"), claimOf(addrB, "a", "web")}, store.Actor{}); err != nil {
				t.Fatal(err)
			}
			var ge *fleet.GroupError
			if _, err := la.Acquire(ctx, lease, claimOf(addrA, "a", "db"), store.Actor{}); !errors.As(err, &ge) || ge.Group != "web" {
				t.Fatalf("acquire group web's address for group db: %v; want a GroupError naming web", err)
			}
			if _, err := la.AcquireGroup(ctx, lease, []store.Claim{claimOf(addrB, "a", "db"), claimOf(addrC, "a", "db")}, store.Actor{}); !errors.As(err, &ge) {
				t.Fatalf("acquire a group with group web's address: %v; want a GroupError", err)
			}
			lb := s.ledger("b")
			leaseB := register(t, lb, "b")
			if fresh, err := lb.Acquire(ctx, leaseB, claimOf(addrC, "b", ""), store.Actor{}); !fresh || err != nil {
				t.Fatalf("the refused group took %s all the same: %v, %v", addrC, fresh, err)
			}
		}},
		{"a group is acquired whole or not at all", func(t *testing.T, s contractStore) {
			la, lb := s.ledger("a"), s.ledger("b")
			leaseA, leaseB := register(t, la, "a"), register(t, lb, "b")
			if _, err := lb.Acquire(ctx, leaseB, claimOf(addrB, "b", ""), store.Actor{}); err != nil {
				t.Fatal(err)
			}
			var held *fleet.HeldError
			if _, err := la.AcquireGroup(ctx, leaseA, []store.Claim{claimOf(addrA, "a", "web"), claimOf(addrB, "a", "web")}, store.Actor{}); !errors.As(err, &held) || held.Node != "b" {
				t.Fatalf("acquire a group with b's address: %v; want a HeldError naming b", err)
			}
			if fresh, err := lb.Acquire(ctx, leaseB, claimOf(addrA, "b", ""), store.Actor{}); !fresh || err != nil {
				t.Fatalf("the refused group kept %s: %v, %v", addrA, fresh, err)
			}
		}},
		{"drop deletes only under the owner's lease; revoke takes every key", func(t *testing.T, s contractStore) {
			la, lb := s.ledger("a"), s.ledger("b")
			leaseA, leaseB := register(t, la, "a"), register(t, lb, "b")
			for _, a := range []netip.Addr{addrA, addrB} {
				if _, err := la.Acquire(ctx, leaseA, claimOf(a, "a", ""), store.Actor{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := lb.Release(ctx, leaseB, addrA, store.Change{Kind: store.ChangeRelease, Node: "b"}); err != nil {
				t.Fatal(err)
			}
			var held *fleet.HeldError
			if _, err := lb.Acquire(ctx, leaseB, claimOf(addrA, "b", ""), store.Actor{}); !errors.As(err, &held) {
				t.Fatalf("a drop under another lease deleted the key: b acquires: %v", err)
			}
			if err := la.Release(ctx, leaseA, addrA, store.Change{Kind: store.ChangeRelease, Node: "a"}); err != nil {
				t.Fatal(err)
			}
			if fresh, err := lb.Acquire(ctx, leaseB, claimOf(addrA, "b", ""), store.Actor{}); !fresh || err != nil {
				t.Fatalf("after the owner's drop b acquires: %v, %v", fresh, err)
			}
			if alive, err := la.LeaseAlive(ctx, leaseA); !alive || err != nil {
				t.Fatalf("LeaseAlive of a live lease: %v, %v", alive, err)
			}
			if err := la.Revoke(ctx, leaseA); err != nil {
				t.Fatal(err)
			}
			if alive, err := la.LeaseAlive(ctx, leaseA); alive || err != nil {
				t.Fatalf("LeaseAlive of a revoked lease: %v, %v", alive, err)
			}
			if fresh, err := lb.Acquire(ctx, leaseB, claimOf(addrB, "b", ""), store.Actor{}); !fresh || err != nil {
				t.Fatalf("after a's lease was revoked b acquires its address: %v, %v", fresh, err)
			}
			if err := la.Renew(ctx, leaseA, 5*time.Second); !errors.Is(err, fleet.ErrLeaseGone) {
				t.Fatalf("renew a revoked lease: %v; want ErrLeaseGone", err)
			}
		}},
		{"standby records: written, read, dropped", func(t *testing.T, s contractStore) {
			lb := s.ledger("b")
			rev, err := lb.PutStandbys(ctx, []store.Standby{{Addr: addrA, Node: "b", Interface: "eth0"}, {Addr: addrC, Node: "b", Interface: "eth0"}})
			if err != nil || rev <= 0 {
				t.Fatalf("PutStandbys: rev %d, %v", rev, err)
			}
			got, _, err := lb.StandbyOf(ctx, addrA, "b")
			if err != nil || got == nil || got.Node != "b" || got.Addr != addrA {
				t.Fatalf("StandbyOf: %+v, %v", got, err)
			}
			if got, _, err := lb.StandbyOf(ctx, addrB, "b"); got != nil || err != nil {
				t.Fatalf("StandbyOf an address b does not stand by for: %+v, %v; want none", got, err)
			}
			all, _, err := lb.Standbys(ctx, "b")
			if err != nil || len(all) != 2 {
				t.Fatalf("Standbys: %+v, %v; want 2", all, err)
			}
			if err := lb.DeleteStandby(ctx, addrA, "b"); err != nil {
				t.Fatal(err)
			}
			if all, _, err := lb.Standbys(ctx, "b"); err != nil || len(all) != 1 || all[0].Addr != addrC {
				t.Fatalf("Standbys after a drop: %+v, %v; want %s alone", all, err, addrC)
			}
		}},
		{"a standby's take needs its record, a free key and the cordon it read", func(t *testing.T, s contractStore) {
			la, lb := s.ledger("a"), s.ledger("b")
			leaseA, leaseB := register(t, la, "a"), register(t, lb, "b")
			if _, err := la.Acquire(ctx, leaseA, claimOf(addrA, "a", ""), store.Actor{}); err != nil {
				t.Fatal(err)
			}
			ch := store.Change{Kind: store.ChangeFailover}
			if took, _, err := lb.Take(ctx, leaseB, claimOf(addrA, "b", ""), 0, fleet.StandbyTake(0), ch); took || err != nil {
				t.Fatalf("take a held address: %v, %v; want refused", took, err)
			}
			if err := la.Revoke(ctx, leaseA); err != nil {
				t.Fatal(err)
			}
			if took, _, err := lb.Take(ctx, leaseB, claimOf(addrA, "b", ""), 0, fleet.StandbyTake(0), ch); took || err != nil {
				t.Fatalf("a standby take without b's standby record: %v, %v; want refused", took, err)
			}
			if _, err := lb.PutStandbys(ctx, []store.Standby{{Addr: addrA, Node: "b", Interface: "eth0"}}); err != nil {
				t.Fatal(err)
			}
			_, cordonRev, err := lb.Cordon(ctx, "b")
			if err != nil {
				t.Fatal(err)
			}
			s.setCordon(t, "b", &store.Cordon{Reason: "kernel upgrade", Since: time.Now()})
			if took, _, err := lb.Take(ctx, leaseB, claimOf(addrA, "b", ""), 0, fleet.StandbyTake(0), ch); took || err != nil {
				t.Fatalf("take with a cordon written since the taker read none: %v, %v; want refused", took, err)
			}
			c, rev, err := lb.Cordon(ctx, "b")
			if err != nil || c == nil || c.Reason != "kernel upgrade" {
				t.Fatalf("Cordon: %+v, %v", c, err)
			}
			if rev <= cordonRev {
				t.Fatalf("Cordon's revision %d is not past the one read before it was written (%d)", rev, cordonRev)
			}
			if took, _, err := lb.Take(ctx, leaseB, claimOf(addrA, "b", ""), 0, fleet.StandbyTake(c.Rev), ch); !took || err != nil {
				t.Fatalf("take with the cordon read (rev %d): %v, %v; want taken", c.Rev, took, err)
			}
			if took, _, err := lb.Take(ctx, leaseB, claimOf(addrA, "b", ""), 0, fleet.StandbyTake(c.Rev), ch); took || err != nil {
				t.Fatalf("take again: %v, %v; want refused: the key is b's", took, err)
			}
			s.setCordon(t, "b", nil)
			if c, _, err := lb.Cordon(ctx, "b"); c != nil || err != nil {
				t.Fatalf("Cordon after the lift: %+v, %v; want none", c, err)
			}
		}},
		{"a group's take is all or none", func(t *testing.T, s contractStore) {
			la, lb := s.ledger("a"), s.ledger("b")
			leaseA, leaseB := register(t, la, "a"), register(t, lb, "b")
			if _, err := la.Acquire(ctx, leaseA, claimOf(addrB, "a", ""), store.Actor{}); err != nil {
				t.Fatal(err)
			}
			recs := []store.Claim{claimOf(addrA, "b", "web"), claimOf(addrB, "b", "web")}
			if took, _, err := lb.TakeGroup(ctx, leaseB, recs, []int64{0, 0}, fleet.MoveArrival(0), store.Change{Kind: store.ChangeFailover}); took || err != nil {
				t.Fatalf("take a group with a's address: %v, %v; want refused", took, err)
			}
			if fresh, err := la.Acquire(ctx, leaseA, claimOf(addrA, "a", ""), store.Actor{}); !fresh || err != nil {
				t.Fatalf("the refused take kept %s: %v, %v", addrA, fresh, err)
			}
		}},
		{"a take under a revoked lease takes nothing", func(t *testing.T, s contractStore) {
			lb := s.ledger("b")
			lease := register(t, lb, "b")
			if err := lb.Revoke(ctx, lease); err != nil {
				t.Fatal(err)
			}
			if took, _, err := lb.Take(ctx, lease, claimOf(addrA, "b", ""), 0, fleet.MoveArrival(0), store.Change{Kind: store.ChangeFailover}); took || err == nil {
				t.Fatalf("take under a revoked lease: %v, %v; want an error", took, err)
			}
			lc := s.ledger("c")
			leaseC := register(t, lc, "c")
			if fresh, err := lc.Acquire(ctx, leaseC, claimOf(addrA, "c", ""), store.Actor{}); !fresh || err != nil {
				t.Fatalf("after a take under a revoked lease c acquires: %v, %v", fresh, err)
			}
		}},
		{"a move is asked once, read, handed over and marked", func(t *testing.T, s contractStore) {
			la, lb, lm := s.ledger("a"), s.ledger("b"), s.ledger("mover")
			leaseA, leaseB := register(t, la, "a"), register(t, lb, "b")
			mover, err := lm.Grant(ctx, contractTTL)
			if err != nil {
				t.Fatal(err)
			}
			mv := store.Move{Addr: addrC, From: "a", To: "b", Asked: time.Now()}
			// Free and planned as free: asked.
			if ok, err := lm.Ask(ctx, mover, []fleet.Asking{{Move: mv}}); !ok || err != nil {
				t.Fatalf("ask a move of a free address: %v, %v", ok, err)
			}
			if ok, err := lm.Ask(ctx, mover, []fleet.Asking{{Move: mv}}); ok || err != nil {
				t.Fatalf("ask it again while it is under way: %v, %v; want refused", ok, err)
			}
			got, err := lb.Moves(ctx, []netip.Addr{addrA, addrC})
			if err != nil || len(got) != 1 || got[0].Move.To != "b" || got[0].Rev <= 0 {
				t.Fatalf("Moves: %+v, %v; want the one of %s", got, err, addrC)
			}
			in, err := lb.Inbox(ctx, "b")
			if err != nil || len(in) != 1 || in[0] != addrC {
				t.Fatalf("b's inbox: %v, %v; want %s", in, err, addrC)
			}
			// The target takes it as the move's arrival: the move it read.
			if took, _, err := lb.Take(ctx, leaseB, claimOf(addrC, "b", ""), got[0].Rev+1000, fleet.MoveArrival(0), store.Change{Kind: store.ChangeMove}); took || err != nil {
				t.Fatalf("take for another move: %v, %v; want refused", took, err)
			}
			if took, _, err := lb.Take(ctx, leaseB, claimOf(addrC, "b", ""), got[0].Rev, fleet.MoveArrival(0), store.Change{Kind: store.ChangeMove}); !took || err != nil {
				t.Fatalf("take for the move read: %v, %v", took, err)
			}
			done := got[0].Move
			done.Live = time.Now()
			if err := lb.MarkMove(ctx, done, got[0].Rev, true); err != nil {
				t.Fatal(err)
			}
			if got, err := lb.Moves(ctx, []netip.Addr{addrC}); err != nil || len(got) != 0 {
				t.Fatalf("Moves after the move was marked done: %+v, %v; want none", got, err)
			}
			// A hand-over: a holds addrA, a move to b is asked on its claim.
			if _, err := la.Acquire(ctx, leaseA, claimOf(addrA, "a", ""), store.Actor{}); err != nil {
				t.Fatal(err)
			}
			if ok, err := lm.Ask(ctx, mover, []fleet.Asking{{Move: store.Move{Addr: addrA, From: "a", To: "b", Asked: time.Now()}}}); ok || err != nil {
				t.Fatalf("ask a move of a held address planned as free: %v, %v; want refused", ok, err)
			}
			view, err := lm.MoveView(ctx, []netip.Addr{addrA}, "b")
			if err != nil {
				t.Fatal(err)
			}
			// The plan's view has the target and the owner (planMoves
			// checks both).
			for _, n := range []string{"a", "b"} {
				if _, ok := view.NodeByName(n); !ok {
					t.Fatalf("MoveView of %s to b has no node %s: %+v", addrA, n, view.Nodes)
				}
			}
			claimRev := int64(-1)
			for _, c := range view.Claims {
				if c.Claim.Addr == addrA {
					claimRev = c.CreateRev
				}
			}
			if claimRev <= 0 {
				t.Fatalf("MoveView has no claim of %s with its revision: %+v", addrA, view.Claims)
			}
			if ok, err := lm.Ask(ctx, mover, []fleet.Asking{{Move: store.Move{Addr: addrA, From: "a", To: "b", Asked: time.Now()}, ClaimRev: claimRev}}); !ok || err != nil {
				t.Fatalf("ask a move of a's address as read: %v, %v", ok, err)
			}
			recs, err := la.Moves(ctx, []netip.Addr{addrA})
			if err != nil || len(recs) != 1 {
				t.Fatalf("Moves: %+v, %v", recs, err)
			}
			r := recs[0]
			r.Move.Released = time.Now()
			if ok, _, err := lb.HandOver(ctx, leaseB, []fleet.MoveRecord{r}); ok || err != nil {
				t.Fatalf("a hand-over under a lease that does not hold the key: %v, %v; want refused", ok, err)
			}
			if ok, _, err := la.HandOver(ctx, leaseA, []fleet.MoveRecord{r}); !ok || err != nil {
				t.Fatalf("the owner's hand-over: %v, %v", ok, err)
			}
			after, err := lb.Moves(ctx, []netip.Addr{addrA})
			if err != nil || len(after) != 1 || after[0].Move.Released.IsZero() || after[0].Rev != r.Rev || after[0].ModRev <= r.ModRev {
				t.Fatalf("the move after the hand-over: %+v, %v; want it released, the same move, written since %d", after, err, r.ModRev)
			}
			// A take on the record as read before the hand-over would
			// record a move with no release: refused.
			if took, _, err := lb.Take(ctx, leaseB, claimOf(addrA, "b", ""), r.Rev, fleet.MoveArrival(r.ModRev), store.Change{Kind: store.ChangeMove}); took || err != nil {
				t.Fatalf("the target's take on the record read before the hand-over: %v, %v; want refused", took, err)
			}
			if took, _, err := lb.Take(ctx, leaseB, claimOf(addrA, "b", ""), r.Rev, fleet.MoveArrival(after[0].ModRev), store.Change{Kind: store.ChangeMove}); !took || err != nil {
				t.Fatalf("the target's take after the hand-over: %v, %v", took, err)
			}
		}},
		{"failsafe sets: written under a live lease, read, cleared as read", func(t *testing.T, s contractStore) {
			la := s.ledger("a")
			lease := register(t, la, "a")
			rev, err := la.PutFailsafeSet(ctx, store.FailsafeSet{Node: "a", Lease: int64(lease), Rev: 7})
			if err != nil || rev <= 0 {
				t.Fatalf("PutFailsafeSet: %d, %v", rev, err)
			}
			if _, err := la.PutFailsafeSet(ctx, store.FailsafeSet{Node: "a", Lease: int64(lease), Rev: 9}); err != nil {
				t.Fatalf("PutFailsafeSet again: %v", err)
			}
			sets, nodes, _, err := la.FailsafeSets(ctx, "a")
			if err != nil || len(sets) != 1 || sets[0].Node != "a" || sets[0].Rev != 9 || sets[0].Format != store.FailsafeFormat ||
				sets[0].ModRev <= rev || sets[0].CreateRev != rev {
				t.Fatalf("FailsafeSets: %+v, %v; want a's set at revision 9, format %d, created at %d and written since", sets, err, store.FailsafeFormat, rev)
			}
			if len(nodes) != 1 || nodes[0].Node != "a" || fleet.LeaseID(nodes[0].Lease) != lease {
				t.Fatalf("FailsafeSets' nodes: %+v; want a's record under its lease", nodes)
			}
			if ok, err := la.ClearFailsafeSet(ctx, "a", sets[0].ModRev+1000); ok || err != nil {
				t.Fatalf("clear a set modified since: %v, %v; want refused", ok, err)
			}
			if ok, err := la.ClearFailsafeSet(ctx, "a", sets[0].ModRev); !ok || err != nil {
				t.Fatalf("clear the set read: %v, %v", ok, err)
			}
			if sets, _, _, err := la.FailsafeSets(ctx, "a"); err != nil || len(sets) != 0 {
				t.Fatalf("FailsafeSets after the clear: %+v, %v; want none", sets, err)
			}
			if err := la.Revoke(ctx, lease); err != nil {
				t.Fatal(err)
			}
			if _, err := la.PutFailsafeSet(ctx, store.FailsafeSet{Node: "a", Lease: int64(lease), Rev: 10}); !errors.Is(err, fleet.ErrLeaseGone) {
				t.Fatalf("PutFailsafeSet after the lease went: %v; want ErrLeaseGone", err)
			}
		}},
		{"a take's guard: a set rewritten since passes, one created since fails, any write fails a strict one", func(t *testing.T, s contractStore) {
			la, lb := s.ledger("a"), s.ledger("b")
			leaseA, leaseB := register(t, la, "a"), register(t, lb, "b")
			if _, err := la.PutFailsafeSet(ctx, store.FailsafeSet{Node: "a", Lease: int64(leaseA), Rev: 1}); err != nil {
				t.Fatal(err)
			}
			_, _, rev, err := lb.FailsafeSets(ctx, "b")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := la.PutFailsafeSet(ctx, store.FailsafeSet{Node: "a", Lease: int64(leaseA), Rev: rev}); err != nil {
				t.Fatal(err)
			}
			g := fleet.Guard{Rev: rev}
			strict := g
			strict.Strict = true
			if _, err := lb.Acquire(fleet.WithGuard(ctx, strict), leaseB, claimOf(addrA, "b", ""), store.Actor{}); !errors.Is(err, fleet.ErrFailsafeChanged) {
				t.Fatalf("a strict guard's take after a's set was rewritten: %v; want ErrFailsafeChanged", err)
			}
			if _, err := lb.Acquire(fleet.WithGuard(ctx, g), leaseB, claimOf(addrA, "b", ""), store.Actor{}); err != nil {
				t.Fatalf("a take after a's set was rewritten: %v; want taken", err)
			}
			if _, err := lb.PutFailsafeSet(ctx, store.FailsafeSet{Node: "b", Lease: int64(leaseB), Rev: rev}); err != nil {
				t.Fatal(err)
			}
			if _, err := lb.Acquire(fleet.WithGuard(ctx, g), leaseB, claimOf(addrB, "b", ""), store.Actor{}); !errors.Is(err, fleet.ErrFailsafeChanged) {
				t.Fatalf("a take after b's set was created: %v; want ErrFailsafeChanged", err)
			}
		}},
		{"watches: a claim's deletion, an inbox's puts, a cordon's writes", func(t *testing.T, s contractStore) {
			la, lb, lm := s.ledger("a"), s.ledger("b"), s.ledger("mover")
			leaseA := register(t, la, "a")
			if _, err := la.Acquire(ctx, leaseA, claimOf(addrA, "a", ""), store.Actor{}); err != nil {
				t.Fatal(err)
			}
			_, rev, err := lb.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			gone, inbox, cordons := make(chan *store.Claim, 8), make(chan []netip.Addr, 8), make(chan *store.Cordon, 8)
			wg.Add(3)
			go func() { defer wg.Done(); lb.WatchGone(wctx, addrA, rev, func(p *store.Claim) { gone <- p }) }()
			go func() { defer wg.Done(); lb.WatchInbox(wctx, "b", rev, func(a []netip.Addr) { inbox <- a }) }()
			go func() { defer wg.Done(); lb.WatchCordon(wctx, "b", rev, func(c *store.Cordon) { cordons <- c }) }()
			if err := la.Revoke(ctx, leaseA); err != nil {
				t.Fatal(err)
			}
			if p := receive(t, gone, "the claim's deletion"); p == nil || p.Node != "a" {
				t.Fatalf("WatchGone's owner record: %+v; want a's", p)
			}
			mover, err := lm.Grant(ctx, contractTTL)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := lm.Ask(ctx, mover, []fleet.Asking{{Move: store.Move{Addr: addrB, To: "b", Asked: time.Now()}}}); !ok || err != nil {
				t.Fatalf("Ask: %v, %v", ok, err)
			}
			if got := receive(t, inbox, "b's inbox"); len(got) != 1 || got[0] != addrB {
				t.Fatalf("WatchInbox: %v; want %s", got, addrB)
			}
			s.setCordon(t, "b", &store.Cordon{Reason: "kernel upgrade", Since: time.Now()})
			if c := receive(t, cordons, "the cordon"); c == nil || c.Reason != "kernel upgrade" || c.Rev <= 0 {
				t.Fatalf("WatchCordon: %+v; want the cordon with its revision", c)
			}
			s.setCordon(t, "b", nil)
			if c := receive(t, cordons, "the cordon's lift"); c != nil {
				t.Fatalf("WatchCordon after the lift: %+v; want nil", c)
			}
		}},
		{"a whole group fits one transaction at each step, a full guard beside it", func(t *testing.T, s contractStore) {
			// etcd refuses a transaction of over store.MaxTxnOps compares,
			// or operations in a branch: the largest group, with the most
			// owners a take's guard compares, at each step that writes it
			// in one transaction.
			la, lb, lm := s.ledger("a"), s.ledger("b"), s.ledger("mover")
			leaseA, leaseB := register(t, la, "a"), register(t, lb, "b")
			guard := fleet.Guard{Live: map[string]int64{}}
			for i := range fleet.MaxGuardOwners {
				node := fmt.Sprintf("owner%d", i)
				_, _, rev, err := s.ledger(node).Register(ctx, contractTTL, store.Node{Node: node}, nil, func(store.Node) bool { return false })
				if err != nil {
					t.Fatal(err)
				}
				guard.Live[node], guard.Rev = rev, rev
			}
			gctx := fleet.WithGuard(ctx, guard)
			addrs := make([]netip.Addr, fleet.MaxGroupAddrs)
			recsA, recsB := make([]store.Claim, len(addrs)), make([]store.Claim, len(addrs))
			for i := range addrs {
				addrs[i] = netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + i)})
				recsA[i], recsB[i] = claimOf(addrs[i], "a", "big"), claimOf(addrs[i], "b", "big")
			}
			if _, err := la.AcquireGroup(gctx, leaseA, recsA, store.Actor{}); err != nil {
				t.Fatalf("acquire %d addresses under a guard of %d owners: %v", len(addrs), len(guard.Live), err)
			}
			view, err := lm.MoveView(ctx, addrs, "b")
			if err != nil {
				t.Fatal(err)
			}
			mover, err := lm.Grant(ctx, contractTTL)
			if err != nil {
				t.Fatal(err)
			}
			asks := make([]fleet.Asking, 0, len(addrs))
			for _, c := range view.Claims {
				asks = append(asks, fleet.Asking{Move: store.Move{Addr: c.Claim.Addr, From: "a", To: "b", Asked: time.Now()}, ClaimRev: c.CreateRev})
			}
			if ok, err := lm.Ask(ctx, mover, asks); !ok || err != nil {
				t.Fatalf("ask %d moves (of %d claims read): %v, %v", len(asks), len(view.Claims), ok, err)
			}
			recs, err := la.Moves(ctx, addrs)
			if err != nil || len(recs) != len(addrs) {
				t.Fatalf("Moves: %d, %v", len(recs), err)
			}
			revs := make([]int64, len(recs))
			byAddr := map[netip.Addr]int64{}
			for i := range recs {
				recs[i].Move.Released = time.Now()
				recs[i].Standby = &store.Standby{Addr: recs[i].Move.Addr, Node: "a", Interface: "eth0", Group: "big"}
				byAddr[recs[i].Move.Addr] = recs[i].Rev
			}
			for i, a := range addrs {
				revs[i] = byAddr[a]
			}
			if ok, _, err := la.HandOver(ctx, leaseA, recs); !ok || err != nil {
				t.Fatalf("hand over %d addresses with a standby record each: %v, %v", len(recs), ok, err)
			}
			if took, _, err := lb.TakeGroup(gctx, leaseB, recsB, revs, fleet.MoveArrival(0), store.Change{Kind: store.ChangeMove}); !took || err != nil {
				t.Fatalf("the target takes %d addresses under the guard: %v, %v", len(recsB), took, err)
			}
			if err := lb.Revoke(ctx, leaseB); err != nil {
				t.Fatal(err)
			}
			if took, _, err := la.TakeGroup(gctx, leaseA, recsA, revs, fleet.StandbyTake(0), store.Change{Kind: store.ChangeFailover}); !took || err != nil {
				t.Fatalf("the standby takes %d addresses back under the guard: %v, %v", len(recsA), took, err)
			}
		}},
		{"free keys are acquired in one transaction, or none is", func(t *testing.T, s contractStore) {
			la, lb := s.ledger("a"), s.ledger("b")
			leaseA, leaseB := register(t, la, "a"), register(t, lb, "b")
			if _, err := lb.Acquire(ctx, leaseB, claimOf(addrC, "b", ""), store.Actor{}); err != nil {
				t.Fatal(err)
			}
			if ok, err := la.AcquireFree(ctx, leaseA, []store.Claim{claimOf(addrA, "a", ""), claimOf(addrC, "a", "")}, store.Actor{}); ok || err != nil {
				t.Fatalf("AcquireFree with b's %s among them: %v, %v; want false, nothing changed", addrC, ok, err)
			}
			if fresh, err := lb.Acquire(ctx, leaseB, claimOf(addrA, "b", ""), store.Actor{}); !fresh || err != nil {
				t.Fatalf("the refused batch left %s taken: b's acquire %v, %v", addrA, fresh, err)
			}
			if ok, err := la.AcquireFree(ctx, leaseA, []store.Claim{claimOf(addrB, "a", "")}, store.Actor{By: "alice@ops"}); !ok || err != nil {
				t.Fatalf("AcquireFree of free %s: %v, %v", addrB, ok, err)
			}
			if fresh, err := la.Acquire(ctx, leaseA, claimOf(addrB, "a", ""), store.Actor{}); fresh || err != nil {
				t.Fatalf("%s after AcquireFree: acquired again %v, %v; want a's already, under its lease", addrB, fresh, err)
			}
			hist, _, err := la.History(ctx, store.HistoryQuery{Addr: addrB})
			if err != nil || len(hist) != 1 || hist[0].Kind != store.ChangeClaim || hist[0].Node != "a" || hist[0].By != "alice@ops" {
				t.Fatalf("History of %s: %+v, %v; want a's claim, by alice@ops", addrB, hist, err)
			}
			if err := la.Revoke(ctx, leaseA); err != nil {
				t.Fatal(err)
			}
			if ok, err := la.AcquireFree(ctx, leaseA, []store.Claim{claimOf(netip.MustParseAddr("192.0.2.12"), "a", "")}, store.Actor{}); ok || err == nil {
				t.Fatalf("AcquireFree under a revoked lease: %v, %v; want an error", ok, err)
			}
		}},
		{"the history: recorded, read by address and by node", func(t *testing.T, s contractStore) {
			la := s.ledger("a")
			lease := register(t, la, "a")
			if _, err := la.Acquire(ctx, lease, claimOf(addrA, "a", ""), store.Actor{}); err != nil {
				t.Fatal(err)
			}
			if err := la.Record(ctx, []store.Change{{Kind: store.ChangeFence, Node: "a", Time: time.Now(), Addrs: []netip.Addr{addrA}}}); err != nil {
				t.Fatal(err)
			}
			byAddr, rev, err := la.History(ctx, store.HistoryQuery{Addr: addrA})
			if err != nil || rev <= 0 {
				t.Fatalf("History of %s: rev %d, %v", addrA, rev, err)
			}
			var kinds []store.ChangeKind
			for _, c := range byAddr {
				kinds = append(kinds, c.Kind)
			}
			if !slices.Equal(kinds, []store.ChangeKind{store.ChangeClaim, store.ChangeFence}) {
				t.Errorf("History of %s: %v, want its claim and the fence that lists it", addrA, kinds)
			}
			if other, _, err := la.History(ctx, store.HistoryQuery{Node: "b"}); err != nil || len(other) != 0 {
				t.Errorf("History of node b: %v, %v; want none", other, err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

// receive waits for the next value on ch, long enough for a loaded 2-core
// machine.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s seen in 20 s", what)
	}
	var zero T
	return zero
}
