package store

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// standbyNoticeTTL is how long a notice of a standby change waits in a
// node's inbox: its agent reads it at once, or reads all its standbys when
// it starts.
const standbyNoticeTTL = 60 * time.Second

// standbysPerTxn bounds the addresses of one transaction: the record, the
// notice, and the history's puts of each.
const standbysPerTxn = MaxTxnOps / (2 + MaxHistoryOps)

// PutStandbys writes recs, which no lease binds (an address's standbys are
// a set that lasts until removed), and tells each record's node in its
// inbox, so that its agent stands by at once. Each is kept in the history
// (a standby added, by who), in the same transaction.
func (c *Client) PutStandbys(ctx context.Context, recs []Standby, who Actor) error {
	return c.changeStandbys(ctx, len(recs), func(i int) (standbyOp, error) {
		s := recs[i]
		s.Lease = 0
		val, err := Encode(s)
		if err != nil {
			return standbyOp{}, err
		}
		ch := Change{Kind: ChangeStandbyAdd, Addr: s.Addr, Node: s.Node, Interface: s.Interface, Group: s.Group, Actor: who}
		return c.standbyOp(s.Addr, s.Node, clientv3.OpPut(c.Keys.Standby(s.Addr, s.Node), string(val)), ch)
	}, nil)
}

// DeleteStandbys takes node out of the standbys of addrs, tells it in its
// inbox, keeps each removal in the history, and returns the addresses it
// stood by for (the others change nothing).
func (c *Client) DeleteStandbys(ctx context.Context, node string, addrs []netip.Addr, who Actor) ([]netip.Addr, error) {
	var had []netip.Addr
	for start := 0; start < len(addrs); start += maxStandbyReads {
		batch := addrs[start:min(start+maxStandbyReads, len(addrs))]
		gets := make([]clientv3.Op, len(batch))
		for i, a := range batch {
			gets[i] = clientv3.OpGet(c.Keys.Standby(a, node), clientv3.WithCountOnly())
		}
		rctx, cancel := c.ctx(ctx)
		resp, err := c.Txn(rctx).Then(gets...).Commit()
		cancel()
		if err != nil {
			return nil, c.Explain(err)
		}
		for i, r := range resp.Responses {
			if r.GetResponseRange().Count > 0 {
				had = append(had, batch[i])
			}
		}
	}
	var deleted []netip.Addr
	err := c.changeStandbys(ctx, len(had), func(i int) (standbyOp, error) {
		ch := Change{Kind: ChangeStandbyRemove, Addr: had[i], Node: node, Actor: who}
		return c.standbyOp(had[i], node, clientv3.OpDelete(c.Keys.Standby(had[i], node)), ch)
	}, func(a netip.Addr, r *etcdserverpb.ResponseOp) {
		if d := r.GetResponseDeleteRange(); d != nil && d.Deleted > 0 {
			deleted = append(deleted, a)
		}
	})
	return deleted, err
}

// maxStandbyReads bounds the reads of one transaction.
const maxStandbyReads = 100

// standbyOp is one standby's change: its address and node, the change of
// its record, and the history's record of it.
type standbyOp struct {
	addr    netip.Addr
	node    string
	op      clientv3.Op
	history HistoryWrite
}

func (c *Client) standbyOp(a netip.Addr, node string, op clientv3.Op, ch Change) (standbyOp, error) {
	hist, err := c.Keys.HistoryPut(c.identified(ch))
	return standbyOp{addr: a, node: node, op: op, history: hist}, err
}

// identified is ch with the identity the store knows this client by,
// unless it names one already.
func (c *Client) identified(ch Change) Change {
	if ch.Identity == "" {
		ch.Identity = c.Identity()
	}
	return ch
}

// changeStandbys runs n changes (op returns each) with a notice to the
// node's inbox and the history's record for each, standbysPerTxn to a
// transaction, and trims the subjects written; seen, when set, gets each
// change's response.
func (c *Client) changeStandbys(ctx context.Context, n int, op func(i int) (standbyOp, error), seen func(netip.Addr, *etcdserverpb.ResponseOp)) error {
	if n == 0 {
		return nil
	}
	rctx, cancel := c.ctx(ctx)
	g, err := c.Grant(rctx, int64(standbyNoticeTTL/time.Second))
	cancel()
	if err != nil {
		return c.Explain(err)
	}
	var subjects []string
	for start := 0; start < n; start += standbysPerTxn {
		end := min(start+standbysPerTxn, n)
		var ops []clientv3.Op
		var addrs []netip.Addr
		var at []int // where each change's own operation is in ops
		for i := start; i < end; i++ {
			so, err := op(i)
			if err != nil {
				return err
			}
			at = append(at, len(ops))
			ops = append(ops, so.history.After(so.op, clientv3.OpPut(c.Keys.Inbox(so.node, so.addr), "", clientv3.WithLease(g.ID)))...)
			addrs = append(addrs, so.addr)
			subjects = append(subjects, so.history.Subjects...)
		}
		rctx, cancel := c.ctx(ctx)
		resp, err := c.Txn(rctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return c.Explain(err)
		}
		if seen != nil {
			for i, a := range addrs {
				seen(a, resp.Responses[at[i]])
			}
		}
	}
	for _, s := range slices.Compact(slices.Sorted(slices.Values(subjects))) {
		// A trim that fails is done by the next write of the subject.
		_ = c.TrimHistory(ctx, s)
	}
	return nil
}
