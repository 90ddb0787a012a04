package fleet_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

func TestSecondAgentWithALiveNodeNameIsRefused(t *testing.T) {
	w := newWorld(t, "a")
	w.join(t, "a")
	_, err := fleet.Join(context.Background(), fleet.Config{Store: w.client(t, "a"), Node: "a", TTL: ttl}, newFakeEngine())
	if err == nil || !strings.Contains(err.Error(), "node a is already alive") || !strings.Contains(err.Error(), "--node") {
		t.Fatalf("a second agent named a: got %v, want a refusal naming --node", err)
	}
}

func TestClaimWhileTheStoreIsUnreachable(t *testing.T) {
	w := newWorld(t, "a")
	a, aEng := w.join(t, "a")
	w.etcd.Stop(t)
	err := claim(t, a, vip)
	if err == nil || !(strings.Contains(err.Error(), "unreachable") || strings.Contains(err.Error(), "fenced")) || !strings.Contains(err.Error(), "store") {
		t.Fatalf("a claim with the store down: got %v, want one sentence saying the store is unreachable", err)
	}
	if aEng.holds(vip) {
		t.Fatal("the claim went live without its key")
	}
}

func TestRecordsThatDoNotParseAreSkipped(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, _ := w.join(t, "a")
	if err := claim(t, a, vip); err != nil {
		t.Fatal(err)
	}
	c := w.client(t, "store")
	junk := map[string]string{
		"/vip/claims/198.51.100.99":  "not json",
		"/vip/claims/not-an-address": "{}",
		"/vip/nodes/bad name":        "{}",
		"/vip/moves/198.51.100.98":   `{"to": 5}`,
		"/vip/unknown":               "x",
	}
	for k, v := range junk {
		if _, err := c.Put(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	v, err := c.Fleet(context.Background())
	if err != nil {
		t.Fatalf("read a fleet with junk in it: %v", err)
	}
	if len(v.Skipped) != len(junk) {
		t.Errorf("skipped %d keys, want %d: %+v", len(v.Skipped), len(junk), v.Skipped)
	}
	if cv, ok := v.ClaimOf(vip); !ok || cv.Claim.Node != "a" {
		t.Errorf("the good claim is lost among the junk: %+v", v.Claims)
	}
	// The member's watch saw the junk too and goes on: a move still works.
	_, bEng := w.join(t, "b")
	res, err := fleet.NewMover(c).Move(context.Background(), store.MoveRequest{Addrs: []netip.Addr{vip}, To: "b"})
	if err != nil || len(res) != 1 || !res[0].Done() || !bEng.holds(vip) {
		t.Fatalf("a move after junk was written: %+v, %v", res, err)
	}
}

func TestStoreOverTLS(t *testing.T) {
	labtest.RequireTool(t, "etcd")
	l := labtest.New(t,
		lab.HostConfig{Name: "store", IPv4: netip.MustParsePrefix("192.0.2.1/24")},
		lab.HostConfig{Name: "a", IPv4: netip.MustParsePrefix("192.0.2.11/24")},
	)
	dir := t.TempDir()
	good := etcdlab.NewPKI(t, dir, "good", netip.MustParseAddr("192.0.2.1"))
	other := etcdlab.NewPKI(t, dir, "other", netip.MustParseAddr("192.0.2.1"))
	goodCert, goodKey := good.Client(t, "good")
	otherCert, otherKey := other.Client(t, "other")
	e := etcdlab.StartEtcdTLS(t, l.Hosts[0], good.Files)
	url := "etcds://" + strings.TrimPrefix(e.TLSEndpoint(), "https://")
	open := func(cfg store.Config) error {
		cfg.URL, cfg.Dial, cfg.Timeout = url, labtest.DialIn(l.Hosts[1]), 2*time.Second
		c, err := store.Open(context.Background(), cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := open(store.Config{CA: good.CA, Cert: goodCert, Key: goodKey}); err != nil {
		t.Fatalf("the right CA and client certificate: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  store.Config
		want string
	}{
		{"another CA", store.Config{CA: other.CA, Cert: goodCert, Key: goodKey}, "--store-ca"},
		{"a client certificate the store does not trust", store.Config{CA: good.CA, Cert: otherCert, Key: otherKey}, "--store-cert"},
		{"no client certificate", store.Config{CA: good.CA}, "--store-cert"},
		{"a certificate without its key", store.Config{CA: good.CA, Cert: goodCert}, "go together"},
		{"a CA file that is not PEM", store.Config{CA: good.ServerKey + ".missing"}, "--store-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := open(tc.cfg)
			t.Logf("%v", err)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("got %v, want one sentence naming %s", err, tc.want)
			}
		})
	}
	// A guarded claim works over TLS.
	c, err := store.Open(context.Background(), store.Config{URL: url, CA: good.CA, Cert: goodCert, Key: goodKey, Dial: labtest.DialIn(l.Hosts[1])})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := fleet.Join(context.Background(), fleet.Config{Store: c, Node: "a", TTL: ttl}, newFakeEngine())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Claim(context.Background(), []announce.Request{{Addr: vip, Interface: "eth0"}}, announce.ClaimOptions{}); err != nil {
		t.Fatalf("claim over TLS: %v", err)
	}
}
