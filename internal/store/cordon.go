package store

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MaxCordonFor bounds how long a cordon may last by itself (a year); one
// meant to last longer is given without --for, until uncordoned.
const MaxCordonFor = 366 * 24 * time.Hour

// PutCordon writes rec as its node's cordon, over any cordon there. With
// lasts, the record lives under a lease of its own that ends then (Until
// says so in the record too), so that the cordon lifts itself with nobody
// connected; without, it stays until DeleteCordon. It returns the record
// as written, and the one it replaced, if any. The history records it in
// the same transaction, with rec's By and Reason.
func (c *Client) PutCordon(ctx context.Context, rec Cordon, lasts time.Duration) (written Cordon, replaced *Cordon, err error) {
	if err := CheckNode(rec.Node); err != nil {
		return Cordon{}, nil, err
	}
	if lasts < 0 || lasts > MaxCordonFor {
		return Cordon{}, nil, fmt.Errorf("a cordon lasts from 1s to %v, or until uncordoned", MaxCordonFor)
	}
	var opts []clientv3.OpOption
	if lasts > 0 {
		rec.Until = rec.Since.Add(lasts)
		// The lease ends on the second at or after Until.
		secs := int64((lasts + time.Second - 1) / time.Second)
		rctx, cancel := c.ctx(ctx)
		g, err := c.Grant(rctx, secs)
		cancel()
		if err != nil {
			return Cordon{}, nil, c.Explain(err)
		}
		opts = append(opts, clientv3.WithLease(g.ID))
	}
	val, err := Encode(rec)
	if err != nil {
		return Cordon{}, nil, err
	}
	change := Change{Kind: ChangeCordon, Node: rec.Node, Time: rec.Since, Actor: Actor{By: rec.By, Identity: c.Identity(), Reason: rec.Reason}}
	if !rec.Until.IsZero() {
		change.Message = "until " + rec.Until.Local().Format("2006-01-02 15:04:05")
	}
	hist, err := c.Keys.HistoryPut(change)
	if err != nil {
		return Cordon{}, nil, err
	}
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	key := c.Keys.Cordon(rec.Node)
	resp, err := c.Txn(rctx).Then(hist.After(clientv3.OpPut(key, string(val), append(opts, clientv3.WithPrevKV())...))...).Commit()
	if err != nil {
		return Cordon{}, nil, c.Explain(err)
	}
	rec.Rev = resp.Header.Revision
	if kv := resp.Responses[0].GetResponsePut().GetPrevKv(); kv != nil {
		old, _ := ReadCordon(rec.Node, kv)
		replaced = &old
	}
	c.trimQuietly(ctx, hist.Subjects)
	return rec, replaced, nil
}

// trimQuietly trims subject's history after a write: a trim that fails is
// done by the next write.
func (c *Client) trimQuietly(ctx context.Context, subjects []string) {
	for _, s := range subjects {
		_ = c.TrimHistory(ctx, s)
	}
}

// ReadCordon reads node's cordon from its key, with its modification
// revision. One that does not decode is a cordon all the same, its reason
// saying so (a node is kept out when in doubt, and a move compares its
// revision); the error says why, for a reader that reports it.
func ReadCordon(node string, kv *mvccpb.KeyValue) (Cordon, error) {
	c, err := Decode[Cordon](string(kv.Key), kv.Value)
	if err != nil {
		c = Cordon{Reason: "a cordon record vip cannot read (" + err.Error() + ")"}
	}
	c.Node, c.Rev = node, kv.ModRevision
	return c, err
}

// DeleteCordon lifts node's cordon and returns it; ok is false when there
// was none (or it had lifted itself). The history records the lifting, as
// asked by who, in the same transaction.
func (c *Client) DeleteCordon(ctx context.Context, node string, who Actor) (rec Cordon, ok bool, err error) {
	key := c.Keys.Cordon(node)
	hist, err := c.Keys.HistoryPut(Change{Kind: ChangeUncordon, Node: node, Actor: who})
	if err != nil {
		return Cordon{}, false, err
	}
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(hist.After(clientv3.OpDelete(key, clientv3.WithPrevKV()))...).Commit()
	if err != nil {
		return Cordon{}, false, c.Explain(err)
	}
	if !resp.Succeeded {
		return Cordon{}, false, nil
	}
	c.trimQuietly(ctx, hist.Subjects)
	prev := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs()
	if len(prev) == 0 {
		return Cordon{}, false, nil
	}
	// One vip cannot read is gone now all the same.
	rec, _ = ReadCordon(node, prev[0])
	return rec, true, nil
}

// Live says whether node is alive in the store: its registration is there.
func (c *Client) Live(ctx context.Context, node string) (bool, error) {
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.Get(rctx, c.Keys.Node(node), clientv3.WithCountOnly())
	if err != nil {
		return false, c.Explain(err)
	}
	return resp.Count > 0, nil
}

// Nodes names the live nodes, in order.
func (c *Client) Nodes(ctx context.Context) ([]string, error) {
	var names []string
	_, err := c.Range(ctx, c.Keys.Nodes(), func(kv *mvccpb.KeyValue) {
		if p, err := c.Keys.Parse(string(kv.Key)); err == nil && p.Kind == KindNode {
			names = append(names, p.Node)
		}
	})
	return names, err
}
