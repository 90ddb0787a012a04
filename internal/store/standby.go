package store

import (
	"context"
	"net/netip"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// standbyNoticeTTL is how long a notice of a standby change waits in a
// node's inbox: its agent reads it at once, or reads all its standbys when
// it starts.
const standbyNoticeTTL = 60 * time.Second

// standbysPerTxn bounds the addresses of one transaction: two operations
// each, under etcd's 128.
const standbysPerTxn = 60

// PutStandbys writes recs, which no lease binds (an address's standbys are
// a set that lasts until removed), and tells each record's node in its
// inbox, so that its agent stands by at once.
func (c *Client) PutStandbys(ctx context.Context, recs []Standby) error {
	return c.changeStandbys(ctx, len(recs), func(i int) (netip.Addr, string, clientv3.Op, error) {
		s := recs[i]
		s.Lease = 0
		val, err := Encode(s)
		return s.Addr, s.Node, clientv3.OpPut(c.Keys.Standby(s.Addr, s.Node), string(val)), err
	}, nil)
}

// DeleteStandbys takes node out of the standbys of addrs, tells it in its
// inbox, and returns the addresses it stood by for.
func (c *Client) DeleteStandbys(ctx context.Context, node string, addrs []netip.Addr) ([]netip.Addr, error) {
	var deleted []netip.Addr
	err := c.changeStandbys(ctx, len(addrs), func(i int) (netip.Addr, string, clientv3.Op, error) {
		return addrs[i], node, clientv3.OpDelete(c.Keys.Standby(addrs[i], node)), nil
	}, func(a netip.Addr, r *etcdserverpb.ResponseOp) {
		if d := r.GetResponseDeleteRange(); d != nil && d.Deleted > 0 {
			deleted = append(deleted, a)
		}
	})
	return deleted, err
}

// changeStandbys runs n changes (op returns each, with its address and
// node) with a notice to the node's inbox for each, standbysPerTxn to a
// transaction; seen, when set, gets each change's response.
func (c *Client) changeStandbys(ctx context.Context, n int, op func(i int) (netip.Addr, string, clientv3.Op, error), seen func(netip.Addr, *etcdserverpb.ResponseOp)) error {
	if n == 0 {
		return nil
	}
	rctx, cancel := c.ctx(ctx)
	g, err := c.Grant(rctx, int64(standbyNoticeTTL/time.Second))
	cancel()
	if err != nil {
		return c.Explain(err)
	}
	for start := 0; start < n; start += standbysPerTxn {
		end := min(start+standbysPerTxn, n)
		var ops []clientv3.Op
		var addrs []netip.Addr
		for i := start; i < end; i++ {
			a, node, o, err := op(i)
			if err != nil {
				return err
			}
			ops = append(ops, o, clientv3.OpPut(c.Keys.Inbox(node, a), "", clientv3.WithLease(g.ID)))
			addrs = append(addrs, a)
		}
		rctx, cancel := c.ctx(ctx)
		resp, err := c.Txn(rctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return c.Explain(err)
		}
		if seen != nil {
			for i, a := range addrs {
				seen(a, resp.Responses[2*i])
			}
		}
	}
	return nil
}
