package main

import (
	"testing"
	"time"

	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/test/labtest"
)

// TestFleetStep runs the fleet step small: a real etcd in a lab host, real
// members, a few claims and moves, and checks that every measure is there.
func TestFleetStep(t *testing.T) {
	labtest.RequireRoot(t, "the fleet step's lab")
	labtest.RequireTool(t, "ip")
	labtest.RequireTool(t, "etcd")
	// Not the default TTL: the agents renew at the one given (-fleet-ttl).
	cfg := fleetConfig{Agents: 3, PerAgent: 5, ClaimAtOnce: 2, Moves: 4, Rest: 2 * time.Second, TTL: 4 * time.Second}
	res, err := runFleet(t.Context(), cfg, t.Logf)
	if err != nil {
		t.Fatalf("fleet step: %v", err)
	}
	if got := len(res.Claims); got != cfg.Agents || res.Claimed != cfg.Agents {
		t.Errorf("claims timed: got %d (%d claimed), want %d", got, res.Claimed, cfg.Agents)
	}
	if got := len(res.MoveCmd); got != cfg.Moves || len(res.MoveLive) != cfg.Moves {
		t.Errorf("moves timed: got %d and %d, want %d", got, len(res.MoveLive), cfg.Moves)
	}
	if res.Fenced != 0 {
		t.Errorf("agents fenced: got %d, want none", res.Fenced)
	}
	// Each agent renews every renewal period of its TTL (1.5 times a
	// second at 4 s, against three at the default 2 s): that many
	// keepalives a second, and nothing else, however busy the machine.
	want := float64(cfg.Agents) * float64(time.Second) / float64(fleet.TimingFor(cfg.TTL).Renew)
	if got := res.Rest.method(keepAliveMethod).Received; got < want/2 || got > 1.5*want {
		t.Errorf("keepalives at rest: got %.1f/s, want about %.1f/s (%s)", got, want, res.Rest.summary())
	}
	if others, ok := res.Rest.onlyKeepAlives(); !ok {
		t.Errorf("at rest: got %.1f other requests/s and %.1f proposals/s, want only keepalives (%s)", others, res.Rest.Proposals, res.Rest.summary())
	}
	if res.Heap[1] <= res.Heap[0] || res.RSS[1] <= 0 {
		t.Errorf("memory: got heap %d → %d, RSS %d → %d KiB, want it to grow with the agents", res.Heap[0], res.Heap[1], res.RSS[0], res.RSS[1])
	}
	if res.Moving.method("KV/Txn").Calls == 0 {
		t.Errorf("etcd during the moves: got no transactions (%s)", res.Moving.summary())
	}
}
