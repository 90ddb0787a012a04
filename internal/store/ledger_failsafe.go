package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd ledger's failsafe reads and writes: whether the store answers
// now, and the owners' failsafe sets.

func (l *Ledger) Reach(ctx context.Context, node string) error {
	// A linearizable read: the leader confirms it leads a quorum, which
	// a frozen or quorumless cluster cannot.
	if _, err := l.c.Get(ctx, l.k.Node(node), clientv3.WithCountOnly()); err != nil {
		return l.c.Explain(err)
	}
	return nil
}

func (l *Ledger) PutFailsafeSet(ctx context.Context, rec FailsafeSet) (int64, error) {
	val, err := Encode(rec)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	// Only while the node's record is under the set's lease: one written
	// under a lease the store already expired (read as the store woke,
	// before the renewal said it was gone) would name the peers whose
	// records went with theirs, few or none, and hold every other node's
	// takes until the node wrote it again under its new lease.
	resp, err := l.c.Txn(rctx).If(clientv3.Compare(clientv3.LeaseValue(l.k.Node(rec.Node)), "=", rec.Lease)).
		Then(clientv3.OpPut(l.k.Failsafe(rec.Node), string(val))).Commit()
	if err != nil {
		return 0, l.c.Explain(err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: the failsafe set of lease %x not written", ErrLeaseGone, rec.Lease)
	}
	return resp.Header.Revision, nil
}

func (l *Ledger) FailsafeSets(ctx context.Context, self string) ([]FailsafeSet, []Node, int64, error) {
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	// The sets first, one small range, empty in a fleet without the
	// failsafe; then, at that revision, only the records of their nodes
	// and of this one.
	resp, err := l.c.Get(rctx, l.k.Failsafes(), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, 0, l.c.Explain(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil, resp.Header.Revision, nil
	}
	var sets []FailsafeSet
	// Every record at the sets' revision: one owner's set and record are
	// judged as they stood together (a set rewritten under a new lease
	// between two reads would look lapsed for a moment).
	at := clientv3.WithRev(resp.Header.Revision)
	gets := []clientv3.Op{clientv3.OpGet(l.k.Node(self), at)}
	for _, kv := range resp.Kvs {
		p, err := l.k.Parse(string(kv.Key))
		if err != nil || p.Kind != KindFailsafe {
			continue
		}
		fs, err := Decode[FailsafeSet](string(kv.Key), kv.Value)
		if err != nil {
			// A set that does not decode is kept, unreadable: every
			// take waits for it to be cleared.
			fs = FailsafeSet{Unreadable: true}
		}
		fs.Node, fs.ModRev, fs.CreateRev = p.Node, kv.ModRevision, kv.CreateRevision
		sets = append(sets, fs)
		if p.Node != self { // self's record is read once, above
			gets = append(gets, clientv3.OpGet(l.k.Node(p.Node), at))
		}
	}
	var nodes []Node
	for start := 0; start < len(gets); start += MaxReadsPerTxn {
		txn, err := l.c.Txn(rctx).Then(gets[start:min(start+MaxReadsPerTxn, len(gets))]...).Commit()
		if err != nil {
			return nil, nil, 0, l.c.Explain(err)
		}
		for _, r := range txn.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				p, err := l.k.Parse(string(kv.Key))
				if err != nil || p.Kind != KindNode {
					continue
				}
				n, _ := Decode[Node](string(kv.Key), kv.Value)
				n.Node, n.Lease, n.CreateRev = p.Node, kv.Lease, kv.CreateRevision
				nodes = append(nodes, n)
			}
		}
	}
	return sets, nodes, resp.Header.Revision, nil
}

func (l *Ledger) ClearFailsafeSet(ctx context.Context, node string, modRev int64) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	key := l.k.Failsafe(node)
	resp, err := l.c.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, l.c.Explain(err)
	}
	return resp.Succeeded, nil
}

func (l *Ledger) NodeAt(ctx context.Context, node string, rev int64) (int64, error) {
	return l.c.NodeAt(ctx, node, rev)
}
