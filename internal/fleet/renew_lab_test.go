package fleet

import (
	"context"
	"errors"
	"net/netip"
	"sort"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/internal/etcdlab"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/internal/labtest"
)

// renewLab is a real etcd in a lab host and a client of it from another.
func renewLab(t testing.TB) *clientv3.Client {
	t.Helper()
	labtest.RequireTool(t, "etcd")
	l := labtest.New(t,
		lab.HostConfig{Name: "store", IPv4: netip.MustParsePrefix("192.0.2.1/24")},
		lab.HostConfig{Name: "a", IPv4: netip.MustParsePrefix("192.0.2.11/24")},
	)
	e := etcdlab.StartEtcd(t, l.Hosts[0])
	return etcdlab.Client(t, l.Hosts[1], e.Endpoint())
}

// TestRenewerOneStream: renewals go on one stream; the store's word that the
// lease is gone is ErrLeaseNotFound; a renewal not answered in time closes
// the stream, so that its late answer is never taken for the next one's,
// and the next renewal opens another and succeeds.
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
	if r.streams != 1 {
		t.Errorf("5 renewals opened %d streams, want 1", r.streams)
	}
	// An answer cannot come within a nanosecond.
	if err := r.renew(ctx, g.ID, time.Nanosecond); err == nil {
		t.Fatal("a renewal answered within 1 ns: the timeout is not checked")
	}
	if err := r.renew(ctx, g.ID, 2*time.Second); err != nil {
		t.Fatalf("the renewal after a timeout: %v", err)
	}
	if r.streams != 2 {
		t.Errorf("after a timeout: %d streams opened, want 2 (the late one closed)", r.streams)
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
