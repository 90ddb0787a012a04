package e2e_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

// TestFleetSlowStore slows every round trip to the store (a relay in its
// host delays each chunk of bytes, both ways) for 20 s while the client
// probes the owner's addresses: the renewals reach etcd late, but they reach
// it, and the owner counts each acknowledgement from its own send, so it
// never fences, the addresses stay answered, and the standby never
// answers. Renewals that gave up after one renewal period fenced every
// owner in this case, for 16.6 s. The longest round trip a TTL survives is
// the fence's delay less a renewal period: 3.5 s at the default 6 s, 1.5 s
// at 3 s.
func TestFleetSlowStore(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	for _, tc := range []struct {
		name string
		ttl  string
		rtt  time.Duration
		// claim is added to the claims: --assign has the kernel answer,
		// for as long as the addresses' lifetimes last.
		claim []string
	}{
		{"default-ttl-2s-round-trips", "6s", 2 * time.Second, nil},
		{"ttl-3s-1.2s-round-trips", "3s", 1200 * time.Millisecond, nil},
		// The lifetimes keep up too: each acknowledgement leaves 2.5 s
		// to the deadline, a lifetime of 2 s.
		{"default-ttl-2s-round-trips-assign", "6s", 2 * time.Second, []string{"--assign"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFleetLabThrough(t, func(h *lab.Host) *etcdlab.Etcd { return etcdlab.StartEtcd(t, h) }, true, "--lease-ttl", tc.ttl)
			v4, v6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
			capture, macA, macB := probeOwned(t, f, v4, v6, "the store slows", tc.claim...)

			slowed := time.Now()
			f.relay.SetDelay(tc.rtt / 2)
			// 20 s of a slow store, watching a's status meanwhile.
			labtest.Eventually(t, 40*time.Second, func() (bool, string) {
				if st := status(t, f.a, f.sa).Agent.Store; st == nil || !st.Fenced.IsZero() {
					t.Fatalf("a fenced while the store was slow (round trips %v): %+v\n%s", tc.rtt, st, f.agentA.Output())
				}
				return time.Since(slowed) > 20*time.Second, "20 s of a slow store"
			})
			f.relay.SetDelay(0)
			pkts := probedPast(t, capture, v4, time.Now(), 100, "the store is fast again")
			for _, vip := range []netip.Addr{v4, v6} {
				var longest time.Duration
				var from time.Time
				prev := slowed
				for _, an := range answersFor(pkts, vip) {
					switch an.mac {
					case macB:
						t.Errorf("%s answered by the standby b at %s while a held it", vip, an.at.Format("15:04:05.000"))
					case macA:
						if an.at.After(slowed) {
							if gap := an.at.Sub(prev); gap > longest {
								longest, from = gap, prev
							}
							prev = an.at
						}
					}
				}
				t.Logf("%s: longest stretch unanswered while the store was slow: %v, from %s", vip, longest.Round(time.Millisecond), from.Format("15:04:05.000"))
				if longest > time.Second {
					t.Errorf("%s went unanswered for %v from %s while the store was slow, want at most 1 s", vip, longest, from.Format("15:04:05.000"))
				}
			}
			for _, out := range []string{f.agentA.Output(), f.agentB.Output()} {
				if strings.Contains(out, `"msg":"fenced`) {
					t.Errorf("an agent fenced while the store was slow:\n%s", out)
				}
			}
		})
	}
}
