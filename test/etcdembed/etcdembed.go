// Package etcdembed runs a real etcd server inside a test's own process
// (go.etcd.io/etcd/server/v3/embed), on the loopback interface, with its
// data in the test's temporary directory: no root, no lab, no outside
// program. The contract tests of the fleet's ledger run the same cases
// against it and against the fake store of memory, so that the fake cannot
// drift from what etcd does. The lab tests, which need etcd in a host of
// its own, use Debian's etcd through test/etcdlab instead.
package etcdembed

import (
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startTimeout bounds the wait for the server to be ready: a single member
// elects itself at once, but a loaded 2-core machine can take seconds.
const startTimeout = 60 * time.Second

// Start starts a one-member etcd for t and returns its client address
// as vip names a store (etcd://127.0.0.1:PORT). t's cleanup stops it.
func Start(t testing.TB) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "contract"
	cfg.Dir = t.TempDir()
	// Without fsync: the data lives as long as the test, and a test
	// machine's disk would otherwise set the pace of every write.
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	client, peer := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start an embedded etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("embedded etcd failed: %v", err)
	case <-time.After(startTimeout):
		t.Fatalf("embedded etcd not ready after %v", startTimeout)
	}
	return "etcd://" + client.Host
}

// freeURL is an http URL on a loopback port free when asked (etcd's
// embed wants its ports named, and checks the ones it advertises).
func freeURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free loopback port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return url.URL{Scheme: "http", Host: addr}
}
