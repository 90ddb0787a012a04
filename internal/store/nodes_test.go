package store

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLedgerNodesKeepsUnreadable: a node's record that does not decode
// (a newer vip's, or garbage) is kept by the ledger's read and watch of the
// nodes, Unreadable, with its name and revision: an owner's failsafe set
// names every record by revision, so the owner must count it as a node
// that cannot promise, not skip it (it would be named and never asked).
// The watch hands over the last change of each record of a response in
// order: a record written then deleted is gone.
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
	var put []Node
	var gone []string
	l.WatchNodes(wctx, rev, func(p []Node, g []string, _ int64) {
		put, gone = append(put, p...), append(gone, g...)
		if slices.Contains(gone, "z") {
			cancel()
		}
	})
	if len(put) != 1 || put[0].Node != "y" || !put[0].Unreadable || !slices.Equal(gone, []string{"z"}) {
		t.Fatalf("WatchNodes: put %+v, gone %v; want y put, unreadable, and z gone", put, gone)
	}
}
