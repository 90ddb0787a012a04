package store

import (
	"context"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLedgerNodesKeepsUnreadable: a node's record that does not decode
// (a newer vip's, or garbage) is kept by the ledger's read and watch of the
// nodes, Unreadable, with its name and revision: an owner's failsafe set
// names every record by revision, so the owner must count it as a node
// that cannot promise, not skip it (it would be named and never asked).
// The watch hands over the changes of each revision in order, one call
// each, even where one response holds several.
func TestLedgerNodesKeepsUnreadable(t *testing.T) {
	c, ctx := embeddedClient(t)
	l := NewLedger(c, slog.New(slog.DiscardHandler))
	defer l.Close()
	if _, err := c.Put(ctx, c.Keys.Node("x"), `{"format":99,"node":"x"}`); err != nil {
		t.Fatal(err)
	}
	nodes, rev, err := l.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].Node != "x" || !nodes[0].Unreadable || nodes[0].CreateRev == 0 {
		t.Fatalf("Nodes: %+v; want x, unreadable, with its revision", nodes)
	}
	// A response with several revisions: a watch that starts behind.
	if _, err := c.Txn(ctx).Then(clientv3.OpPut(c.Keys.Node("y"), `not json`), clientv3.OpPut(c.Keys.Node("z"), `{"node":"z"}`)).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, c.Keys.Node("z")); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	type change struct {
		put, gone []Node
		rev       int64
	}
	var got []change
	l.WatchNodes(wctx, rev, func(p, g []Node, at int64) {
		got = append(got, change{p, g, at})
		if len(g) > 0 {
			cancel()
		}
	})
	// One call a revision: y and z written together, then z deleted.
	if len(got) != 2 || len(got[0].put) != 2 || got[0].put[0].Node != "y" || !got[0].put[0].Unreadable ||
		got[0].put[1].Node != "z" || len(got[0].gone) != 0 ||
		len(got[1].put) != 0 || len(got[1].gone) != 1 || got[1].gone[0].Node != "z" ||
		got[1].rev != got[0].rev+1 {
		t.Fatalf("WatchNodes: %+v; want y (unreadable) and z written at one revision, z gone at the next", got)
	}
}
