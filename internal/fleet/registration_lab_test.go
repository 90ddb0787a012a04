package fleet_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/test/labtest"
)

// TestInterfacesChangedReachesEtcd: against a real etcd, an address added
// to a member's host after it joined is written to its registration, under
// its lease; a record another agent wrote under the node's name, under a
// lease of its own, is left as it is.
func TestInterfacesChangedReachesEtcd(t *testing.T) {
	w := newWorld(t, "a")
	c := w.client(t, "a")
	ifs := &hostInterfaces{}
	ifs.set("198.51.100.1/24")
	eng := newFakeEngine()
	eng.deadline = announce.NewDeadline(nil)
	a, err := fleet.Join(context.Background(), fleet.Config{
		Store: c, Node: "a", TTL: ttl, Log: testLog(t), Deadline: eng.deadline, Interfaces: ifs.read,
	}, eng)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	reader := w.client(t, "store")
	registered := func() (store.Node, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		v, err := reader.Fleet(ctx)
		if err != nil {
			t.Fatalf("read the fleet: %v", err)
		}
		return v.NodeByName("a")
	}
	added := netip.MustParsePrefix("198.51.100.7/24")
	ifs.set("198.51.100.1/24", added.String())
	a.InterfacesChanged()
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		n, ok := registered()
		lease, _, _ := a.Lease()
		return ok && n.Lease == lease && len(n.Interfaces) == 1 && slices.Contains(n.Interfaces[0].Prefixes, added),
			"a's registration does not list the address added under its lease"
	})
	if ifc, own := mustNode(t, registered).OwnAddress(added.Addr()); !own || ifc != "eth0" {
		t.Errorf("OwnAddress(%s) of a's registration: %q, %v; want eth0", added.Addr(), ifc, own)
	}

	// Another agent's record of the name, under its own lease.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := reader.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := json.Marshal(store.Node{Node: "a", Host: "elsewhere", PID: 4242})
	if _, err := reader.Put(ctx, reader.Keys.Node("a"), string(other), clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	ifs.set("198.51.100.1/24")
	a.InterfacesChanged()
	// No event says the write was not made: watch the record for a while.
	for range 10 {
		if n := mustNode(t, registered); n.Host != "elsewhere" || n.Lease != int64(g.ID) {
			t.Fatalf("a wrote over another agent's record of its name: %+v", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustNode(t *testing.T, read func() (store.Node, bool)) store.Node {
	t.Helper()
	n, ok := read()
	if !ok {
		t.Fatal("no registration of a in the store")
	}
	return n
}
