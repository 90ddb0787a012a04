package store

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// View is everything the store holds under the prefix, at one revision.
type View struct {
	Revision int64
	Nodes    []Node
	Claims   []ClaimView
	// Free are addresses with standbys or a move but no owner.
	Free []ClaimView
	// Cordons are the nodes' cordons, live nodes or not, by node; one
	// whose Until has passed may linger until its lease ends (Active).
	Cordons []Cordon
	// Skipped are keys under the prefix that could not be read.
	Skipped []Skipped
	// Leases, when read (ReadLeases), are the live nodes' leases as etcd
	// says them, by node.
	Leases map[string]LeaseAge

	k Keys
}

// ClaimView is an address's owner with its standbys and any move of it.
type ClaimView struct {
	Claim    Claim     `json:"claim"`
	Standbys []Standby `json:"standbys,omitempty"`
	Move     *Move     `json:"move,omitempty"`
	// CreateRev is the claim key's creation revision, which a move
	// compares so that it never acts on a claim made since it looked.
	CreateRev int64 `json:"-"`
}

// Skipped is a key under the prefix that is not a vip record.
type Skipped struct {
	Key   string `json:"key"`
	Error string `json:"error"`
}

// pageSize bounds one range read, so that a fleet of 100,000 claims is read
// in pages rather than in one response of tens of megabytes.
const pageSize = 5000

// Range reads every key under prefix at one revision, page by page, and
// calls fn with each.
func (c *Client) Range(ctx context.Context, prefix string, fn func(kv *mvccpb.KeyValue)) (rev int64, err error) {
	return c.rangeAt(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), 0, fn)
}

// rangeAt reads the keys from key to end at revision rev (0: the latest),
// page by page, calls fn with each, and returns the revision read.
func (c *Client) rangeAt(ctx context.Context, key, end string, rev int64, fn func(kv *mvccpb.KeyValue)) (int64, error) {
	for {
		rctx, cancel := c.ctx(ctx)
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.Get(rctx, key, opts...)
		cancel()
		if err != nil {
			return 0, c.Explain(err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			fn(kv)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Fleet reads the whole fleet: nodes, claims, standbys and moves, at one
// revision; the history, which can be large, is left out. A value that is
// not a vip record is skipped and reported, never fatal.
func (c *Client) Fleet(ctx context.Context) (View, error) {
	b := newViewBuilder(c.Keys)
	hist := c.Keys.History()
	rev, err := c.rangeAt(ctx, c.Keys.Prefix, hist, 0, b.add)
	if err != nil {
		return View{}, err
	}
	if _, err := c.rangeAt(ctx, clientv3.GetPrefixRangeEnd(hist), clientv3.GetPrefixRangeEnd(c.Keys.Prefix), rev, b.add); err != nil {
		return View{}, err
	}
	return b.view(rev), nil
}

// NodeRecords reads the live nodes' records, one range of nodes/, and the
// revision read.
func (c *Client) NodeRecords(ctx context.Context) ([]Node, int64, error) {
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.Get(rctx, c.Keys.Nodes(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, c.Explain(err)
	}
	b := newViewBuilder(c.Keys)
	for _, kv := range resp.Kvs {
		b.add(kv)
	}
	return b.v.Nodes, resp.Header.Revision, nil
}

// NodeCount counts the nodes' records (WithCountOnly: etcd counts them in
// its index, and sends none).
func (c *Client) NodeCount(ctx context.Context) (int, error) {
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.Get(rctx, c.Keys.Nodes(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, c.Explain(err)
	}
	return int(resp.Count), nil
}

// maxTxnAddrs bounds the addresses whose records one transaction reads:
// two reads each, beside the ranges of the nodes and of the cordons.
const maxTxnAddrs = (MaxTxnOps - 2) / 2

// FleetOf reads what a move of addrs needs to plan, at one revision: the
// nodes and their cordons, and each address's claim and move. A few addresses are read in
// one transaction rather than the whole fleet, which at 100,000 claims is
// twenty pages.
func (c *Client) FleetOf(ctx context.Context, addrs []netip.Addr) (View, error) {
	if len(addrs) == 0 || len(addrs) > maxTxnAddrs {
		return c.Fleet(ctx)
	}
	ops := c.addrGets([]clientv3.Op{clientv3.OpGet(c.Keys.Nodes(), clientv3.WithPrefix()), clientv3.OpGet(c.Keys.Cordons(), clientv3.WithPrefix())}, addrs)
	b := newViewBuilder(c.Keys)
	rev, err := c.readInto(ctx, ops, b)
	if err != nil {
		return View{}, err
	}
	return b.view(rev), nil
}

// addrGets appends to ops the reads of each address's claim and move.
func (c *Client) addrGets(ops []clientv3.Op, addrs []netip.Addr) []clientv3.Op {
	for _, a := range addrs {
		ops = append(ops, clientv3.OpGet(c.Keys.Claim(a)), clientv3.OpGet(c.Keys.Move(a)))
	}
	return ops
}

// readInto reads ops, gets, in one transaction into b, and returns the
// revision read.
func (c *Client) readInto(ctx context.Context, ops []clientv3.Op, b *viewBuilder) (int64, error) {
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		return 0, c.Explain(err)
	}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			b.add(kv)
		}
	}
	return resp.Header.Revision, nil
}

// MoveViewOf reads what a move of addrs to the node called to needs to
// plan: that node's record and its cordon, each address's claim and move,
// and the records of the nodes holding them, all at one revision (to
// empty: no target). The other nodes are left out: at a thousand agents
// their records are nearly all of a read of the fleet's nodes, and a move
// needs none of them. More addresses than one transaction reads take the
// whole fleet (Fleet).
func (c *Client) MoveViewOf(ctx context.Context, addrs []netip.Addr, to string) (View, error) {
	if len(addrs) == 0 || len(addrs) > maxTxnAddrs {
		return c.Fleet(ctx)
	}
	var ops []clientv3.Op
	if to != "" {
		ops = append(ops, clientv3.OpGet(c.Keys.Node(to)), clientv3.OpGet(c.Keys.Cordon(to)))
	}
	b := newViewBuilder(c.Keys)
	rev, err := c.readInto(ctx, c.addrGets(ops, addrs), b)
	if err != nil {
		return View{}, err
	}
	// The owners' records, at the same revision: one per owner, which
	// the addresses bound.
	seen := map[string]bool{to: true}
	ops = ops[:0]
	for _, cv := range b.claims {
		if n := cv.Claim.Node; n != "" && !seen[n] {
			seen[n] = true
			ops = append(ops, clientv3.OpGet(c.Keys.Node(n), clientv3.WithRev(rev)))
		}
	}
	if len(ops) > 0 {
		if _, err := c.readInto(ctx, ops, b); err != nil {
			return View{}, err
		}
	}
	return b.view(rev), nil
}

// viewBuilder gathers records into a View, skipping what does not parse.
type viewBuilder struct {
	v      View
	claims map[netip.Addr]*ClaimView
}

func newViewBuilder(k Keys) *viewBuilder {
	return &viewBuilder{v: View{k: k}, claims: map[netip.Addr]*ClaimView{}}
}

func (b *viewBuilder) get(a netip.Addr) *ClaimView {
	cv := b.claims[a]
	if cv == nil {
		cv = &ClaimView{Claim: Claim{Addr: a}}
		b.claims[a] = cv
	}
	return cv
}

func (b *viewBuilder) skip(key string, err error) {
	b.v.Skipped = append(b.v.Skipped, Skipped{Key: key, Error: err.Error()})
}

// add reads one key under the prefix.
func (b *viewBuilder) add(kv *mvccpb.KeyValue) {
	key, value, lease := string(kv.Key), kv.Value, kv.Lease
	p, err := b.v.k.Parse(key)
	if err != nil {
		b.skip(key, err)
		return
	}
	switch p.Kind {
	case KindNode:
		n, err := Decode[Node](key, value)
		if err != nil {
			b.skip(key, err)
			return
		}
		n.Node, n.Lease, n.CreateRev = p.Node, lease, kv.CreateRevision
		b.v.Nodes = append(b.v.Nodes, n)
	case KindClaim:
		cl, err := Decode[Claim](key, value)
		if err != nil {
			b.skip(key, err)
			return
		}
		cl.Addr, cl.Lease = p.Addr, lease
		cv := b.get(p.Addr)
		cv.Claim, cv.CreateRev = cl, kv.CreateRevision
	case KindStandby:
		s, err := Decode[Standby](key, value)
		if err != nil {
			b.skip(key, err)
			return
		}
		s.Addr, s.Node, s.Lease = p.Addr, p.Node, lease
		cv := b.get(p.Addr)
		cv.Standbys = append(cv.Standbys, s)
	case KindCordon:
		// Listed even when it does not decode, as its agent takes it.
		c, err := ReadCordon(p.Node, kv)
		if err != nil {
			b.skip(key, err)
		}
		b.v.Cordons = append(b.v.Cordons, c)
	case KindInbox, KindLingering, KindFailsafe:
		// A move's notice to an agent: the move record says it all. A
		// node's counts after its releases: vip drain reads them.
	case KindMove:
		m, err := Decode[Move](key, value)
		if err != nil {
			b.skip(key, err)
			return
		}
		m.Addr = p.Addr
		b.get(p.Addr).Move = &m
	}
}

// view returns what was gathered, at revision rev, sorted.
func (b *viewBuilder) view(rev int64) View {
	v := b.v
	v.Revision = rev
	for _, cv := range b.claims {
		if cv.Claim.Node == "" {
			v.Free = append(v.Free, *cv)
		} else {
			v.Claims = append(v.Claims, *cv)
		}
	}
	byAddr := func(x, y ClaimView) int { return x.Claim.Addr.Compare(y.Claim.Addr) }
	slices.SortFunc(v.Claims, byAddr)
	slices.SortFunc(v.Free, byAddr)
	slices.SortFunc(v.Nodes, func(x, y Node) int { return strings.Compare(x.Node, y.Node) })
	slices.SortFunc(v.Cordons, func(x, y Cordon) int { return strings.Compare(x.Node, y.Node) })
	return v
}

// CordonOf returns node's cordon record, whether or not it still holds
// (Cordon.Active).
func (v View) CordonOf(node string) (Cordon, bool) {
	i := slices.IndexFunc(v.Cordons, func(c Cordon) bool { return c.Node == node })
	if i < 0 {
		return Cordon{}, false
	}
	return v.Cordons[i], true
}

// NodeByName returns the live node called name.
func (v View) NodeByName(name string) (Node, bool) {
	i := slices.IndexFunc(v.Nodes, func(n Node) bool { return n.Node == name })
	if i < 0 {
		return Node{}, false
	}
	return v.Nodes[i], true
}

// ClaimOf returns addr's owner.
func (v View) ClaimOf(a netip.Addr) (ClaimView, bool) {
	i, ok := slices.BinarySearchFunc(v.Claims, a, func(cv ClaimView, a netip.Addr) int { return cv.Claim.Addr.Compare(a) })
	if !ok {
		return ClaimView{}, false
	}
	return v.Claims[i], true
}
