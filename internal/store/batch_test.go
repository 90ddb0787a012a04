package store

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/vipctl/vip/test/etcdembed"
)

// TestBatchesFit: the store's own batches, at their largest, fit etcd's
// limit on a transaction (MaxTxnOps): standby records written and deleted
// a batch at a time past one batch, and FleetOf's one transaction of reads
// for as many addresses as it reads that way.
func TestBatchesFit(t *testing.T) {
	c, ctx := embeddedClient(t)
	n := max(2*standbysPerTxn+1, maxTxnAddrs)
	recs := make([]Standby, n)
	addrs := make([]netip.Addr, n)
	for i := range recs {
		addrs[i] = netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})
		recs[i] = Standby{Addr: addrs[i], Node: "b", Interface: "eth0", Since: time.Now()}
	}
	if err := c.PutStandbys(ctx, recs, Actor{}); err != nil {
		t.Fatalf("put %d standby records, %d a transaction: %v", n, standbysPerTxn, err)
	}
	if _, err := c.MoveViewOf(ctx, addrs[:maxTxnAddrs], "b"); err != nil {
		t.Fatalf("MoveViewOf %d addresses in one transaction: %v", maxTxnAddrs, err)
	}
	v, err := c.FleetOf(ctx, addrs[:maxTxnAddrs])
	if err != nil {
		t.Fatalf("FleetOf %d addresses in one transaction: %v", maxTxnAddrs, err)
	}
	if v.Revision == 0 {
		t.Fatalf("FleetOf %d addresses: no revision read", maxTxnAddrs)
	}
	gone, err := c.DeleteStandbys(ctx, "b", addrs, Actor{})
	if err != nil || len(gone) != n {
		t.Fatalf("delete %d standby records: %d deleted, %v", n, len(gone), err)
	}
}

// TestGroupTakeFits: a group of MaxGroupAddrs addresses taken from another
// node, the largest take there is (its claims, and each history record
// with its copies for the two nodes' indexes), fits in one transaction.
func TestGroupTakeFits(t *testing.T) {
	c, ctx := embeddedClient(t)
	l := NewLedger(c, slog.New(slog.DiscardHandler))
	defer l.Close()
	lease, err := l.Grant(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]Claim, MaxGroupAddrs)
	revs := make([]int64, MaxGroupAddrs)
	for i := range recs {
		recs[i] = Claim{Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), Node: "b", Interface: "eth0", Group: "web", Since: time.Now()}
	}
	took, _, err := l.TakeGroup(ctx, lease, recs, revs, StandbyTake(0), Change{Kind: ChangeFailover, From: "a"})
	if err != nil || took {
		// No standby records: refused, but only after etcd took the
		// transaction's size.
		t.Fatalf("take a group of %d addresses without standby records: took %v, %v; want refused, no error", MaxGroupAddrs, took, err)
	}
	took, _, err = l.TakeGroup(ctx, lease, recs, revs, MoveArrival(0), Change{Kind: ChangeMove, From: "a"})
	if err != nil || !took {
		t.Fatalf("take a group of %d addresses moving from a: took %v, %v", MaxGroupAddrs, took, err)
	}
	for _, n := range []string{"a", "b"} {
		h, _, _, err := c.History(ctx, HistoryQuery{Node: n})
		if err != nil || len(h) != MaxGroupAddrs {
			t.Errorf("%s's history: %d records, %v; want the %d moves", n, len(h), err, MaxGroupAddrs)
		}
	}
}

// embeddedClient is a Client of a real etcd embedded in the test, and a
// context that ends with the test or after a minute.
func embeddedClient(t *testing.T) (*Client, context.Context) {
	t.Helper()
	url := etcdembed.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	c, err := Open(ctx, Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, ctx
}
