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

// Names says whether s names n, one of the live nodes' records (its
// CreateRev read with it): n's record was created at s.Rev or before, so
// the owner read it and asks it. A set of format 1 names its nodes by
// name.
func (s FailsafeSet) Names(n Node) bool {
	if s.Unreadable {
		return false
	}
	if s.Format < FailsafeFormat {
		return slices.Contains(s.Nodes, n.Node)
	}
	return n.CreateRev > 0 && n.CreateRev <= s.Rev
}

// Alone says whether s names no other node than its owner's: the owner
// answers alone through an outage, for AloneMS past its lease.
func (s FailsafeSet) Alone() bool {
	if s.Unreadable {
		return false
	}
	if s.Format < FailsafeFormat {
		return len(s.Nodes) == 0
	}
	return s.AloneMS > 0
}

// Named names the live nodes, of nodes, that s names, its owner aside.
func (s FailsafeSet) Named(nodes []Node) []string {
	out := []string{}
	for _, n := range nodes {
		if n.Node != s.Node && s.Names(n) {
			out = append(out, n.Node)
		}
	}
	slices.Sort(out)
	return out
}

// Outside names the live nodes, of nodes, that s leaves out, its owner
// aside: while s's owner is lapsed, they take nothing (a node of s clears
// it once it reaches the store and its promises to the owner ended).
func (s FailsafeSet) Outside(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		if n.Node != s.Node && !s.Names(n) {
			out = append(out, n.Node)
		}
	}
	slices.Sort(out)
	return out
}

// NodeAt returns the revision that node's record standing at revision rev
// was created at, whichever of its agents wrote it (0: none stood then): a
// node that joined again since a lapsed owner's set was written was named
// by it if one did. An error when etcd compacted rev away.
func (c *Client) NodeAt(ctx context.Context, node string, rev int64) (int64, error) {
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.Get(rctx, c.Keys.Node(node), clientv3.WithRev(rev), clientv3.WithKeysOnly())
	if err != nil {
		return 0, c.Explain(err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return resp.Kvs[0].CreateRevision, nil
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
		s.Node, s.ModRev, s.CreateRev = p.Node, kv.ModRevision, kv.CreateRevision
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
		Message: fmt.Sprintf("its failsafe set (%s) cleared: the nodes it left out take addresses again", s.describe())}
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

// describe says whom s names, for the history.
func (s FailsafeSet) describe() string {
	switch {
	case s.Unreadable:
		return "unreadable"
	case s.Format >= FailsafeFormat && s.Alone():
		return "no node"
	case s.Format >= FailsafeFormat:
		return fmt.Sprintf("the nodes read at revision %d", s.Rev)
	case len(s.Nodes) == 0:
		return "no node"
	}
	return strings.Join(s.Nodes, ", ")
}
