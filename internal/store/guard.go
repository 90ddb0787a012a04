package store

import (
	"context"
	"errors"
	"maps"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A take through the store (a claim, a standby's take-over, a move's
// arrival, a re-adoption, a resumption) first reads the failsafe sets
// (mayTake): a lapsed owner's set that does not name this node holds it.
// The read and the take's transaction are two round trips: an owner whose
// set leaves this node out, live at the read, may lose its lease before
// the transaction, and answer on failsafe for the address taken. So the
// take's transaction carries what the read found, as compares: no set
// created since, and the record of each such owner still the one read (a
// lease that expired deleted it). If either changed, the take fails with
// ErrFailsafeChanged, and is tried again on a fresh read.
//
// A set rewritten since the read does not fail the take: an owner writes
// a revision no lower than its set's last (FailsafeSet), so a set that
// named this node still does, and one that did not is its owner's, whose
// record the take compares. A set of format 1 (names, written by an older
// vip) may drop a name when rewritten: while one is read, the take
// compares that no set was written since (Strict).

// Guard is what a take's transaction compares: the revision the failsafe
// sets were read at, and by owner the creation revision of the record of
// each live owner whose set does not name this node.
type Guard struct {
	Rev  int64
	Live map[string]int64
	// Wait is whether the take waits for a set that holds it, when the
	// member reads them again.
	Wait bool
	// Strict compares that no set was written since Rev, not only that
	// none was created: a set of format 1 was read.
	Strict bool
}

// MaxGuardOwners bounds the owners a take's transaction compares, beside
// a whole group's three compares an address and its cordon's one
// (the ledger's contract runs it). More live owners whose sets leave this node out
// is a node just joined a large fleet, whose owners name it within a read
// of their peers: it waits for that.
const MaxGuardOwners = 16

// ErrFailsafeChanged says a take's transaction found a failsafe set, or
// the record of an owner it guarded against, changed since it was read.
var ErrFailsafeChanged = errors.New("a failsafe set was written, or an owner's lease ended, while this node took the address")

type guardKey struct{}

// WithGuard returns ctx carrying g, for the ledger's take transactions.
func WithGuard(ctx context.Context, g Guard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// GuardOf returns the guard ctx carries, if any.
func GuardOf(ctx context.Context) (Guard, bool) {
	g, ok := ctx.Value(guardKey{}).(Guard)
	return g, ok
}

// guardCmps are the compares of the guard ctx carries (none without one).
func (l *Ledger) guardCmps(ctx context.Context) []clientv3.Cmp {
	g, ok := GuardOf(ctx)
	if !ok {
		return nil
	}
	since := clientv3.CreateRevision(l.k.Failsafes())
	if g.Strict {
		since = clientv3.ModRevision(l.k.Failsafes())
	}
	cmps := []clientv3.Cmp{clientv3.Compare(since, "<", g.Rev+1).WithPrefix()}
	for _, n := range slices.Sorted(maps.Keys(g.Live)) {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(l.k.Node(n)), "=", g.Live[n]))
	}
	return cmps
}

// guardReads are the reads of a take's transaction when its compares
// fail (its Else), after any of its own: the failsafe sets' keys and the
// guarded owners' records, which guardFailedIn judges. One transaction,
// so that what it judges is what the compares saw.
func (l *Ledger) guardReads(ctx context.Context) []clientv3.Op {
	g, ok := GuardOf(ctx)
	if !ok {
		return nil
	}
	ops := []clientv3.Op{clientv3.OpGet(l.k.Failsafes(), clientv3.WithPrefix(), clientv3.WithKeysOnly())}
	for _, n := range slices.Sorted(maps.Keys(g.Live)) {
		ops = append(ops, clientv3.OpGet(l.k.Node(n), clientv3.WithKeysOnly()))
	}
	return ops
}

// guardFailedIn says whether the guard ctx carries failed, from the
// responses of guardReads.
func guardFailedIn(ctx context.Context, resps []*pb.ResponseOp) bool {
	g, ok := GuardOf(ctx)
	if !ok || len(resps) == 0 {
		return false
	}
	for _, kv := range resps[0].GetResponseRange().Kvs {
		if kv.CreateRevision > g.Rev || (g.Strict && kv.ModRevision > g.Rev) {
			return true
		}
	}
	for i, n := range slices.Sorted(maps.Keys(g.Live)) {
		if 1+i >= len(resps) {
			return true
		}
		kvs := resps[1+i].GetResponseRange().Kvs
		if len(kvs) == 0 || kvs[0].CreateRevision != g.Live[n] {
			return true
		}
	}
	return false
}
