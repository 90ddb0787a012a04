package store

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd ledger's reads of the nodes' records, for the failsafe's view of
// its peers (their watch is in ledger_watch.go).

func (l *Ledger) Nodes(ctx context.Context) ([]Node, int64, error) {
	rctx, cancel := l.c.ctx(ctx)
	defer cancel()
	resp, err := l.c.Get(rctx, l.k.Nodes(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, l.c.Explain(err)
	}
	var nodes []Node
	for _, kv := range resp.Kvs {
		if n, ok := l.nodeOf(kv); ok {
			nodes = append(nodes, n)
		}
	}
	return nodes, resp.Header.Revision, nil
}

// nodeOf is the node's record kv holds, if kv is one; one that does not
// decode is Unreadable, with its name, lease and revision: an owner's
// failsafe set names it all the same, by its revision, so the owner counts
// it as a node that cannot promise.
func (l *Ledger) nodeOf(kv *mvccpb.KeyValue) (Node, bool) {
	key := string(kv.Key)
	p, err := l.k.Parse(key)
	if err != nil || p.Kind != KindNode {
		return Node{}, false
	}
	n, err := Decode[Node](key, kv.Value)
	if err != nil {
		l.log.Debug("a node's record does not decode: a node that cannot promise, to the failsafe", "key", key, "err", err)
		n = Node{Unreadable: true}
	}
	n.Node, n.Lease, n.CreateRev = p.Node, kv.Lease, kv.CreateRevision
	return n, true
}

func (l *Ledger) CountNodes(ctx context.Context) (int, error) {
	return l.c.NodeCount(ctx)
}
