package fleet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
)

// TestNodeHealth: with the default TTL (6 s: renewals every 1 s, fence
// after 4.5 s), a node is live to 2 s since its last renewal, stale after,
// fenced from 4.5 s; its held addresses say so, a moving one stays moving.
func TestNodeHealth(t *testing.T) {
	ttl := 6 * time.Second
	for _, tc := range []struct {
		ago  time.Duration
		want string
	}{{0, api.HealthLive}, {time.Second, api.HealthLive}, {2 * time.Second, api.HealthLive}, {3 * time.Second, api.HealthStale}, {4400 * time.Millisecond, api.HealthStale}, {5 * time.Second, api.HealthFenced}} {
		if got := fleet.NodeHealth(ttl, tc.ago); got != tc.want {
			t.Errorf("renewed %v ago: %s, want %s", tc.ago, got, tc.want)
		}
	}
	d := func(x time.Duration) *api.Duration { v := api.Duration(x); return &v }
	f := api.FleetResponse{
		Nodes: []api.FleetNode{{Node: "a", LeaseTTL: api.Duration(ttl), RenewedAgo: d(5 * time.Second)}, {Node: "b", LeaseTTL: api.Duration(ttl), RenewedAgo: d(0)},
			{Node: "c", LeaseTTL: api.Duration(ttl)}},
		Claims: []api.FleetClaim{{Addr: "192.0.2.10", Node: "a", State: api.FleetHolding}, {Addr: "192.0.2.11", Node: "a", State: api.FleetMoving},
			{Addr: "192.0.2.12", Node: "b", State: api.FleetHolding}, {Addr: "192.0.2.13", Node: "c", State: api.FleetHolding}},
	}
	fleet.Annotate(&f)
	var got []string
	for _, n := range f.Nodes {
		got = append(got, n.Node+":"+n.Health)
	}
	for _, c := range f.Claims {
		got = append(got, c.Addr+":"+c.State)
	}
	want := "[a:fenced b:live c: 192.0.2.10:fenced 192.0.2.11:moving 192.0.2.12:held 192.0.2.13:held]"
	if s := fmt.Sprint(got); s != want {
		t.Errorf("annotated %s, want %s", s, want)
	}
}
