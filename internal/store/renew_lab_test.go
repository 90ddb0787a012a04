package store

import (
	"context"
	"errors"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

// renewLab is a real etcd in a lab host and a client of it from another.
func renewLab(t testing.TB) *clientv3.Client {
	t.Helper()
	c, _ := slowRenewLab(t)
	return c
}

// slowRenewLab is renewLab with the client reaching etcd through a relay
// whose delay the test sets (no delay at first).
func slowRenewLab(t testing.TB) (*clientv3.Client, *labtest.Relay) {
	t.Helper()
	labtest.RequireTool(t, "etcd")
	l := labtest.New(t,
		lab.HostConfig{Name: "store", IPv4: netip.MustParsePrefix("192.0.2.1/24")},
		lab.HostConfig{Name: "a", IPv4: netip.MustParsePrefix("192.0.2.11/24")},
	)
	e := etcdlab.StartEtcd(t, l.Hosts[0])
	relay := labtest.StartRelay(t, l.Hosts[0], "192.0.2.1:2479", strings.TrimPrefix(e.Endpoint(), "http://"))
	return etcdlab.Client(t, l.Hosts[1], "http://"+relay.Addr()), relay
}

// TestRenewerOneStream: renewals go on one stream, overlapping ones too;
// the store's word that the lease is gone is ErrLeaseNotFound; a renewal
// not answered in time gives up alone, and the stream serves the next.
func TestRenewerOneStream(t *testing.T) {
	c := renewLab(t)
	ctx := context.Background()
	g, err := c.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	r := newRenewer(c)
	defer r.close()
	for i := range 5 {
		if err := r.renew(ctx, g.ID, 2*time.Second); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
	}
	// Twenty at once, each answered.
	errs := make(chan error, 20)
	for range 20 {
		go func() { errs <- r.renew(ctx, g.ID, 5*time.Second) }()
	}
	for i := range 20 {
		if err := <-errs; err != nil {
			t.Fatalf("overlapping renewal %d: %v", i, err)
		}
	}
	if r.streams != 1 {
		t.Errorf("25 renewals opened %d streams, want 1", r.streams)
	}
	// An answer cannot come within a nanosecond.
	if err := r.renew(ctx, g.ID, time.Nanosecond); err == nil {
		t.Fatal("a renewal answered within 1 ns: the timeout is not checked")
	}
	if err := r.renew(ctx, g.ID, 2*time.Second); err != nil {
		t.Fatalf("the renewal after a timeout: %v", err)
	}
	if r.streams != 1 {
		t.Errorf("after a timeout: %d streams opened, want 1 (the late answer goes to its own request)", r.streams)
	}
	ttl, err := c.TimeToLive(ctx, g.ID)
	if err != nil || ttl.TTL < 4 {
		t.Errorf("the lease's TTL after the renewals: %+v, %v; want it renewed (≥ 4 s of 5)", ttl, err)
	}
	if _, err := c.Revoke(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.renew(ctx, g.ID, 2*time.Second); !errors.Is(err, rpctypes.ErrLeaseNotFound) || !isLeaseGone(err) {
		t.Errorf("a renewal of a revoked lease: %v, want ErrLeaseNotFound", err)
	}
}

// TestRenewerLateAnswers: with every round trip to the store 2 s long,
// renewals sent every 250 ms, each waiting up to 4 s, are each answered
// about one round trip after their own send, not one after another, and a
// renewal that gives up before its answer leaves the others theirs.
func TestRenewerLateAnswers(t *testing.T) {
	c, relay := slowRenewLab(t)
	ctx := context.Background()
	g, err := c.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	r := newRenewer(c)
	defer r.close()
	if err := r.renew(ctx, g.ID, 2*time.Second); err != nil {
		t.Fatalf("a renewal before the store is slowed: %v", err)
	}
	relay.SetDelay(time.Second) // each way
	type result struct {
		i   int
		err error
		rtt time.Duration
	}
	results := make(chan result, 8)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for i := range 8 {
		timeout := 4 * time.Second
		if i == 3 {
			timeout = 500 * time.Millisecond // gives up before its answer
		}
		go func() {
			sent := time.Now()
			err := r.renew(ctx, g.ID, timeout)
			results <- result{i, err, time.Since(sent)}
		}()
		<-tick.C
	}
	for range 8 {
		res := <-results
		switch {
		case res.i == 3 && res.err == nil:
			t.Errorf("renewal 3 with a 500 ms timeout was answered in %v, over a 2 s round trip", res.rtt)
		case res.i == 3:
		case res.err != nil:
			t.Errorf("renewal %d: %v after %v", res.i, res.err, res.rtt)
		case res.rtt < 1900*time.Millisecond || res.rtt > 3500*time.Millisecond:
			t.Errorf("renewal %d answered after %v, want about one 2 s round trip", res.i, res.rtt)
		default:
			t.Logf("renewal %d answered after %v", res.i, res.rtt.Round(time.Millisecond))
		}
	}
	if r.streams != 1 {
		t.Errorf("the renewals opened %d streams, want 1", r.streams)
	}
}

// BenchmarkRenew measures a renewal's round trip to a real etcd in the lab:
// on one long-lived stream (what the member does) and with KeepAliveOnce,
// a stream opened for each renewal (what it did). It reports the p50 and
// p99 round trip.
func BenchmarkRenew(b *testing.B) {
	c := renewLab(b)
	ctx := context.Background()
	g, err := c.Grant(ctx, 60)
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, renew func() error) {
		rtts := make([]time.Duration, 0, b.N)
		for b.Loop() {
			sent := time.Now()
			if err := renew(); err != nil {
				b.Fatal(err)
			}
			rtts = append(rtts, time.Since(sent))
		}
		sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
		b.ReportMetric(float64(rtts[len(rtts)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(rtts[len(rtts)*99/100].Microseconds()), "p99-µs")
	}
	b.Run("stream", func(b *testing.B) {
		r := newRenewer(c)
		defer r.close()
		run(b, func() error { return r.renew(ctx, g.ID, 2*time.Second) })
	})
	b.Run("once", func(b *testing.B) {
		run(b, func() error { _, err := c.KeepAliveOnce(ctx, g.ID); return err })
	})
}
