package main_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/labtest"
)

// TestFleetShowsStoppedRenewals, against a real etcd: when the owner
// freezes (SIGSTOP), vip fleet --json stops calling it live within a second
// of its fence-after (2 s at the lab's 3 s TTL; etcd says leases to the
// second), lists its address fenced until the lease expires, never held by
// it after that, and then held by the standby; each node's renewal age is
// there throughout (issue 24: the dead node was listed live and held for
// up to the TTL).
func TestFleetShowsStoppedRenewals(t *testing.T) {
	t.Parallel()
	f := newFleetLab(t)
	const addr = "192.0.2.10"
	mustVip(t, f.a, f.sa, "claim", addr)
	mustVip(t, f.b, f.sb, "claim", addr, "--standby")
	if fl := fleetOf(t, f); !slices.ContainsFunc(fl.Nodes, func(n api.FleetNode) bool { return n.Node == "a" && n.Health == api.HealthLive && n.RenewedAgo != nil }) {
		t.Fatalf("before the freeze a is not listed live with its renewal age: %+v", fl.Nodes)
	}
	wake := freezeAgent(t, f.agentA)
	frozen := time.Now()
	defer wake()

	var notLive, fencedSeen, takenAt time.Duration
	var states []string
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		fl := fleetOf(t, f)
		at := time.Since(frozen)
		for _, n := range fl.Nodes {
			if n.Node == "a" && n.Health != api.HealthLive && notLive == 0 {
				notLive = at
			}
		}
		for _, c := range fl.Claims {
			if c.Addr != addr {
				continue
			}
			if len(states) == 0 || states[len(states)-1] != c.Node+" "+c.State {
				states = append(states, c.Node+" "+c.State)
			}
			if c.State == api.FleetFenced && fencedSeen == 0 {
				fencedSeen = at
			}
			if c.Node == "b" && c.State == api.FleetHeld {
				takenAt = at
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s is not held by b yet (states so far %v)", addr, states)
	})
	t.Logf("after the freeze: a not live at %v, its address fenced at %v, held by b at %v; states %v", notLive, fencedSeen, takenAt, states)
	// Fence-after is 2 s; etcd's TTL is to the second, and a poll takes
	// a moment: within 1 s of the fence, with 1.5 s of slack for a loaded
	// machine.
	if notLive == 0 || notLive > 4500*time.Millisecond {
		t.Errorf("a was still listed live %v after it froze, want not live by fence-after (2 s) + 1 s + slack", notLive)
	}
	if fencedSeen == 0 {
		t.Errorf("the address was never listed fenced between a's fence and b's takeover: %v", states)
	}
	if i := slices.Index(states, "a held"); i >= 0 && slices.Contains(states[i+1:], "a held") {
		t.Errorf("listed held by a again after a stale or fenced listing: %v", states)
	}
}
