package fleet_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/test/etcdembed"
)

// embeddedStore starts an etcd embedded in the test and returns a client
// of it, closed at the test's end, and a context that ends a minute on.
func embeddedStore(t *testing.T) (context.Context, *store.Client) {
	t.Helper()
	url := etcdembed.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	c, err := store.Open(ctx, store.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c
}

// TestFleetViewOfALeaseGoneMeanwhile: vip fleet reads the nodes and claims,
// then each node's lease. An owner whose lease expired between the two
// reads was listed held (its lease unread, so its health unknown): a CI
// run of TestFleetShowsStoppedRenewals saw a frozen owner listed fenced,
// then held again, then its standby's. The lease found gone now says the
// node's last renewal is at least a TTL old: fenced, and so its address.
func TestFleetViewOfALeaseGoneMeanwhile(t *testing.T) {
	ctx, c := embeddedStore(t)
	l := fleet.NewEtcdLedger(c)
	defer l.Close()
	lease, _, _, err := l.Register(ctx, 3*time.Second, store.Node{Node: "a", LeaseTTL: store.Duration(3 * time.Second)}, nil, func(store.Node) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr("192.0.2.10")
	if _, err := l.Acquire(ctx, lease, store.Claim{Addr: addr, Node: "a", Interface: "eth0"}, store.Actor{}); err != nil {
		t.Fatal(err)
	}
	view := func() api.FleetResponse {
		v, err := c.Fleet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.ReadLeases(ctx, &v)
		f := v.API(time.Now())
		fleet.Annotate(&f)
		return f
	}
	if f := view(); len(f.Claims) != 1 || f.Claims[0].State != api.FleetHolding {
		t.Fatalf("with the lease live: %+v, want the address held", f.Claims)
	}
	// The nodes and claims read, then the lease gone, then the leases read.
	v, err := c.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	c.ReadLeases(ctx, &v)
	f := v.API(time.Now())
	fleet.Annotate(&f)
	if len(f.Nodes) != 1 || f.Nodes[0].Health != api.HealthFenced {
		t.Errorf("node a, its lease gone: %+v, want fenced", f.Nodes)
	}
	if len(f.Claims) != 1 || f.Claims[0].State != api.FleetFenced {
		t.Errorf("a's address, its lease gone: %+v, want fenced, not held", f.Claims)
	}
}
