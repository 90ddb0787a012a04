package main_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/labtest"
)

// TestFleetFailsafeStoreFrozen freezes the store (SIGSTOP of etcd) for 20 s
// under two agents with --failsafe, a owning both addresses and b standing
// by: a's renewals go unanswered, but b, asked over the signed channel,
// does not reach the store either and promises to take none of a's
// addresses, so a answers through the outage: no address goes unanswered
// for over a second, and b never answers. Without the failsafe a fenced
// 2 s after its last renewal and every address went dark until the store
// was back (16.6 s of 20 at the default TTL).
func TestFleetFailsafeStoreFrozen(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	f := newFleetLabWith(t, "--failsafe")
	v4, v6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	capture, macA, macB := probeOwned(t, f, v4, v6, "the store freezes")

	frozen := time.Now()
	thaw := f.etcd.Freeze(t)
	labtest.Eventually(t, 40*time.Second, func() (bool, string) {
		if st := status(t, f.a, f.sa).Agent.Store; st == nil || !st.Fenced.IsZero() {
			t.Fatalf("a fenced while the store was frozen: %+v\n%s", st, f.agentA.Output())
		}
		return time.Since(frozen) > 20*time.Second, "20 s of a frozen store"
	})
	thaw()
	thawed := time.Now()
	pkts := probedPast(t, capture, v4, thawed.Add(2*time.Second), 100, "the store is back")
	for _, vip := range []netip.Addr{v4, v6} {
		var longest time.Duration
		var from time.Time
		prev := frozen
		for _, an := range answersFor(pkts, vip) {
			switch an.mac {
			case macB:
				t.Errorf("%s answered by the standby b at %s while a held it", vip, an.at.Format("15:04:05.000"))
			case macA:
				if an.at.After(frozen) {
					if gap := an.at.Sub(prev); gap > longest {
						longest, from = gap, prev
					}
					prev = an.at
				}
			}
		}
		t.Logf("%s: longest stretch unanswered from the freeze to 3 s after the thaw: %v, from %s", vip, longest.Round(time.Millisecond), from.Format("15:04:05.000"))
		if longest > time.Second {
			t.Errorf("%s went unanswered for %v from %s (store frozen %s-%s), want at most 1 s", vip, longest,
				from.Format("15:04:05.000"), frozen.Format("15:04:05.000"), thawed.Format("15:04:05.000"))
		}
	}
	// a's status said it was not fenced all through the freeze (above).
	// etcd, woken, may expire a lease it did not hear renewed for its
	// TTL: a fences then and claims again at once, within the second
	// the gaps allow.
	out := f.agentA.Output()
	if !strings.Contains(out, "answering past the lease's deadline") {
		t.Errorf("a never said it answered on failsafe:\n%s", out)
	}
	if strings.Contains(f.agentB.Output(), "standby took over") {
		t.Errorf("b took over:\n%s", f.agentB.Output())
	}
}
