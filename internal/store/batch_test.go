package store

import (
	"context"
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
	url := etcdembed.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Open(ctx, Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 2*standbysPerTxn + 1
	recs := make([]Standby, n)
	addrs := make([]netip.Addr, n)
	for i := range recs {
		addrs[i] = netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})
		recs[i] = Standby{Addr: addrs[i], Node: "b", Interface: "eth0", Since: time.Now()}
	}
	if err := c.PutStandbys(ctx, recs, Actor{}); err != nil {
		t.Fatalf("put %d standby records, %d a transaction: %v", n, standbysPerTxn, err)
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
