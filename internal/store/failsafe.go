package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lapsed says whether the owner of s no longer renews the lease s was
// written under: among nodes (the live nodes' records), it has none, or
// one under another lease. A lapsed owner may still answer on failsafe,
// on the promises of s's nodes.
func (s FailsafeSet) Lapsed(nodes []Node) bool {
	i := slices.IndexFunc(nodes, func(n Node) bool { return n.Node == s.Node })
	return i < 0 || nodes[i].Lease != s.Lease
}

// Outside names the live nodes, of nodes, that s leaves out, its owner
// aside: while s's owner is lapsed, they take nothing (a node of s clears
// it once it reaches the store and its promises to the owner ended).
func (s FailsafeSet) Outside(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		if n.Node != s.Node && !slices.Contains(s.Nodes, n.Node) {
			out = append(out, n.Node)
		}
	}
	slices.Sort(out)
	return out
}

// FailsafeSets reads every owner's failsafe set and the live nodes'
// records, at one revision, which it returns. A set that does not decode
// is Unreadable, as the agents read it.
func (c *Client) FailsafeSets(ctx context.Context) ([]FailsafeSet, []Node, int64, error) {
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.Txn(rctx).Then(
		clientv3.OpGet(c.Keys.Failsafes(), clientv3.WithPrefix()),
		clientv3.OpGet(c.Keys.Nodes(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, nil, 0, c.Explain(err)
	}
	var sets []FailsafeSet
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		p, err := c.Keys.Parse(string(kv.Key))
		if err != nil || p.Kind != KindFailsafe {
			continue
		}
		s, err := Decode[FailsafeSet](string(kv.Key), kv.Value)
		if err != nil {
			s = FailsafeSet{Unreadable: true}
		}
		s.Node, s.ModRev = p.Node, kv.ModRevision
		sets = append(sets, s)
	}
	b := newViewBuilder(c.Keys)
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		b.add(kv)
	}
	return sets, b.v.Nodes, resp.Header.Revision, nil
}

// ClearFailsafeSet deletes the failsafe set s of a lapsed owner, as an
// operator asks (vip failsafe clear) when the owner and every node of its
// set are gone for good, and records it in the history as who's. It
// deletes nothing, and says false, when the set changed since it was read
// (s.ModRev), or its owner renews s's lease again: an owner whose record is
// under the set's lease answers on it, failsafe or not.
func (c *Client) ClearFailsafeSet(ctx context.Context, s FailsafeSet, who Actor) (bool, error) {
	key, nodeKey := c.Keys.Failsafe(s.Node), c.Keys.Node(s.Node)
	ch := Change{Kind: ChangeFailsafeClear, Node: s.Node, Actor: who,
		Message: fmt.Sprintf("its failsafe set (%s) cleared: the nodes it left out take addresses again", orNone(s.Nodes))}
	hist, err := c.Keys.HistoryPut(ch)
	if err != nil {
		return false, err
	}
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", s.ModRev)}
	if s.Lease != 0 {
		// A key that is absent has lease 0: a lapsed owner.
		cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(nodeKey), "!=", s.Lease))
	}
	resp, err := c.Txn(rctx).If(cmps...).Then(hist.After(clientv3.OpDelete(key))...).Commit()
	if err != nil {
		return false, c.Explain(err)
	}
	if resp.Succeeded {
		c.trimQuietly(ctx, hist.Subjects)
	}
	return resp.Succeeded, nil
}

func orNone(nodes []string) string {
	if len(nodes) == 0 {
		return "no node"
	}
	return strings.Join(nodes, ", ")
}
