package etcdlab_test

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

// requestTimeout bounds one request a test makes of the store.
const requestTimeout = 2 * time.Second

// recoverTimeout bounds the wait for the store to serve again after a
// restart or a new election.
const recoverTimeout = 20 * time.Second

// newLab builds a lab of the named hosts, numbered 192.0.2.1, .2, … in order.
func newLab(t *testing.T, names ...string) *lab.Lab {
	t.Helper()
	var hosts []lab.HostConfig
	for i, name := range names {
		hosts = append(hosts, lab.HostConfig{Name: name, IPv4: netip.MustParsePrefix(fmt.Sprintf("192.0.2.%d/24", i+1))})
	}
	return labtest.New(t, hosts...)
}

func put(cli *clientv3.Client, key, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	_, err := cli.Put(ctx, key, value)
	return err
}

// get returns the key's value, or "" when it is absent.
func get(cli *clientv3.Client, key string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// eventuallyGet waits until the key reads as want.
func eventuallyGet(t *testing.T, cli *clientv3.Client, key, want string) {
	t.Helper()
	labtest.Eventually(t, recoverTimeout, func() (bool, string) {
		got, err := get(cli, key)
		return err == nil && got == want, fmt.Sprintf("get %s: got %q (%v), want %q", key, got, err, want)
	})
}

// sockets lists the TCP sockets to or from addr in the network namespace
// netns ("" for the test's own), one peer address a line. ss reads the
// namespace it runs in.
func sockets(t *testing.T, netns, filter string, addr netip.AddrPort) []string {
	t.Helper()
	args := []string{"-H", "-t", "-n", "-a", filter, addr.String()}
	cmd := exec.Command("ss", args...)
	if netns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", netns, "ss"}, args...)...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ss %s in %q: %v: %s", strings.Join(args, " "), netns, err, out)
	}
	var peers []string
	for line := range strings.Lines(string(out)) {
		// State, Recv-Q, Send-Q, local address, peer address.
		if f := strings.Fields(line); len(f) >= 5 {
			peers = append(peers, f[0]+" "+f[3]+" "+f[4])
		}
	}
	return peers
}

// TestClientDialsFromInsideTheLab checks that the test process's client
// reaches etcd in a lab host through a connection made in the client host:
// the root namespace (where 192.0.2.0/24 may be the host's real network)
// holds no socket to the store, the client host does, and the store sees
// the client host's address.
func TestClientDialsFromInsideTheLab(t *testing.T) {
	labtest.RequireTool(t, "ss")
	l := newLab(t, "client", "store")
	client, store := l.Host("client"), l.Host("store")
	e := etcdlab.StartEtcd(t, store)
	if got, want := e.Endpoint(), "http://192.0.2.2:2379"; got != want {
		t.Errorf("endpoint: got %s, want %s", got, want)
	}
	cli := etcdlab.Client(t, client, e.Endpoint())
	if err := put(cli, "/vip/test", "a"); err != nil {
		t.Fatalf("put through the client: %v", err)
	}
	if got, err := get(cli, "/vip/test"); err != nil || got != "a" {
		t.Fatalf("get through the client: got %q (%v), want %q", got, err, "a")
	}

	storeAddr := netip.AddrPortFrom(store.IPv4.Addr(), etcdlab.ClientPort)
	if got := sockets(t, "", "dst", storeAddr); len(got) != 0 {
		t.Errorf("the root network namespace has sockets to %s: %q, want none", storeAddr, got)
	}
	if got := sockets(t, client.Netns, "dst", storeAddr); len(got) == 0 {
		t.Errorf("the client host has no socket to %s, want the client's connection", storeAddr)
	}
	peers := sockets(t, store.Netns, "src", storeAddr)
	fromClient := false
	for _, p := range peers {
		fromClient = fromClient || strings.Contains(p, " "+client.IPv4.Addr().String()+":")
	}
	if !fromClient {
		t.Errorf("etcd's connections: got %q, want one from the client host %s", peers, client.IPv4.Addr())
	}
}

// TestRestartKeepsData ends a single member in each way and starts it again
// on its data directory: what was written before is still there.
func TestRestartKeepsData(t *testing.T) {
	tests := []struct {
		name string
		end  func(*etcdlab.Etcd, labtest.TB)
	}{
		{name: "stop", end: (*etcdlab.Etcd).Stop},
		{name: "kill", end: (*etcdlab.Etcd).Kill},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLab(t, "client", "store")
			e := etcdlab.StartEtcd(t, l.Host("store"))
			cli := etcdlab.Client(t, l.Host("client"), e.Endpoint())
			if err := put(cli, "/vip/kept", tt.name); err != nil {
				t.Fatalf("put: %v", err)
			}
			tt.end(e, t)
			if e.Running() {
				t.Errorf("after %s: etcd is running, want it ended", tt.name)
			}
			if got, err := get(cli, "/vip/kept"); err == nil {
				t.Errorf("get from a store that was ended: got %q, want an error", got)
			}
			e.Restart(t)
			eventuallyGet(t, cli, "/vip/kept", tt.name)
		})
	}
}

// TestClusterElectsNewLeader kills the leader of a three-member cluster: a
// new leader is elected and the key stays readable and writable; the old
// leader, restarted on its data directory, rejoins and serves what was
// written while it was down.
func TestClusterElectsNewLeader(t *testing.T) {
	l := newLab(t, "client", "s1", "s2", "s3")
	c := etcdlab.StartEtcdCluster(t, l.Host("s1"), l.Host("s2"), l.Host("s3"))
	if got := len(c.Endpoints()); got != 3 {
		t.Fatalf("endpoints: got %d, want 3", got)
	}
	cli := etcdlab.Client(t, l.Host("client"), c.Endpoints()...)
	if err := put(cli, "/vip/k", "before"); err != nil {
		t.Fatalf("put: %v", err)
	}

	old := c.KillLeader(t)
	if old.Running() {
		t.Fatalf("leader %s is running after KillLeader", old.Name)
	}
	next := c.Leader(t)
	if next == old {
		t.Fatalf("leader after the kill: got %s, the killed one, want another", next.Name)
	}
	eventuallyGet(t, cli, "/vip/k", "before")
	labtest.Eventually(t, recoverTimeout, func() (bool, string) {
		err := put(cli, "/vip/k", "after")
		return err == nil, fmt.Sprintf("put with %s killed: %v", old.Name, err)
	})
	eventuallyGet(t, cli, "/vip/k", "after")

	old.Restart(t)
	// Leader waits for every running member, the restarted one included, to
	// follow one leader.
	c.Leader(t)
	eventuallyGet(t, etcdlab.Client(t, old.Host, old.Endpoint()), "/vip/k", "after")
}

// TestIsolatedHostLosesOnlyTheStore cuts host a off from the store: a's
// client fails while b's still works, and a's is back after the heal.
func TestIsolatedHostLosesOnlyTheStore(t *testing.T) {
	l := newLab(t, "a", "b", "store")
	a, b, store := l.Host("a"), l.Host("b"), l.Host("store")
	e := etcdlab.StartEtcd(t, store)
	fromA, fromB := etcdlab.Client(t, a, e.Endpoint()), etcdlab.Client(t, b, e.Endpoint())
	if err := put(fromA, "/vip/p", "before"); err != nil {
		t.Fatalf("put from a: %v", err)
	}

	p := labtest.Isolate(t, l, a, store)
	if got, err := get(fromA, "/vip/p"); err == nil {
		t.Errorf("get from a while cut off from the store: got %q, want an error", got)
	}
	if err := put(fromB, "/vip/p", "during"); err != nil {
		t.Errorf("put from b while a is cut off: %v", err)
	}

	p.Heal(t)
	eventuallyGet(t, fromA, "/vip/p", "during")
}
