package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// TestFleetClaimMoveDrain runs agents guarded by a real etcd in a lab host
// of its own: a claim on a is refused on b (exit 5); vip move from a client
// with no agent moves the VIP to b, the client's neighbour entry and its new
// TCP connections with it; a drain moves everything back; vip fleet from
// the client shows where each address is.
func TestFleetClaimMoveDrain(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "socat")
	f := newFleetLab(t)
	a, b, client, sa, sb, sc, storeURL := f.a, f.b, f.client, f.sa, f.sb, f.sc, f.storeURL
	// Each host serves on every address: only the one the VIP is
	// assigned to accepts the client's connections to it.
	for _, h := range []*lab.Host{a, b} {
		labtest.Start(t, h, "socat", "TCP-LISTEN:8080,fork,reuseaddr", "SYSTEM:echo "+h.Name)
	}
	ask := func() string {
		out, _ := client.Run(ctxFor(t, 10*time.Second), "socat", "-T", "2", "-", "TCP:192.0.2.10:8080,connect-timeout=2")
		return strings.TrimSpace(out)
	}

	mustVip(t, a, sa, "claim", "192.0.2.10", "--assign")
	out, code := vipOn(t, b, sb, "claim", "192.0.2.10", "--assign")
	if code != 5 || !strings.Contains(out, "held by node a") || !strings.Contains(out, "vip move 192.0.2.10 --to b") {
		t.Fatalf("claim on b of what a holds: exit %d, want 5 naming a and vip move:\n%s", code, out)
	}
	// --json says, address by address, which node holds each.
	out, code = vipOn(t, b, sb, "claim", "192.0.2.10", "--json")
	var cr api.ClaimResponse
	if i := strings.Index(out, "{"); code != 5 || i < 0 || json.Unmarshal([]byte(out[i:strings.LastIndex(out, "}")+1]), &cr) != nil ||
		len(cr.Refused) != 1 || cr.Refused[0].HeldBy != "a" || cr.Refused[0].Code != api.CodeHeld || cr.Refused[0].ClaimedAt.IsZero() {
		t.Fatalf("claim --json on b: exit %d, want 5 and a refusal held by a with since:\n%s", code, out)
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := ask()
		return got == "a", "the VIP's service answered " + got + ", want a"
	})
	if got := neighMAC(t, client, pfx("192.0.2.10/32").Addr()); got != mac(a, "eth0") {
		t.Fatalf("client's neighbour entry for the VIP is %q, want a's %s", got, mac(a, "eth0"))
	}

	// vip move from the client, which runs no agent, while the client
	// pings the VIP: the traffic that arrives at b after the move is
	// counted there (b answers in the kernel: --responder auto, as root).
	labtest.Start(t, client, "ping", "-i", "0.1", "192.0.2.10")
	out, code = vipOn(t, client, sc, "move", "192.0.2.10", "--to", "b", "--store", storeURL, "--json")
	if code != 0 {
		t.Fatalf("vip move: exit %d:\n%s", code, out)
	}
	var mv api.MoveResponse
	if err := json.Unmarshal([]byte(out), &mv); err != nil || len(mv.Moves) != 1 {
		t.Fatalf("vip move --json: %v:\n%s", err, out)
	}
	if m := mv.Moves[0]; !m.OK || m.Waited || m.From != "a" || m.ReleasedMS == nil || m.LiveMS == nil || *m.LiveMS < *m.ReleasedMS {
		t.Fatalf("the move: %+v, want released by a, then live on b", m)
	}
	t.Logf("move: released by a +%.1f ms, live on b +%.1f ms, traffic %+v", *mv.Moves[0].ReleasedMS, *mv.Moves[0].LiveMS, mv.Moves[0].Traffic)
	if tr := mv.Moves[0].Traffic; tr == nil || !tr.Counted || tr.Packets == 0 {
		t.Errorf("the move counted no traffic arriving at b in its window: %+v", tr)
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := neighMAC(t, client, pfx("192.0.2.10/32").Addr())
		return got == mac(b, "eth0"), "client's neighbour entry is " + got + ", want b's"
	})
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := ask()
		return got == "b", "new connections reach " + got + ", want b"
	})
	if hasAddr(t, a, "192.0.2.10") {
		t.Error("a kept the address on eth0 after the move")
	}
	// The owner checked from the wire, by node: b answers alone, and an
	// operator who expected a is told that b (named as a node) did.
	out, code = vipOn(t, client, sc, "probe", "192.0.2.10", "--expect", "b", "--store", storeURL)
	if code != 0 || !strings.Contains(out, "(node b), as expected") {
		t.Errorf("probe --expect b after the move: exit %d, want 0 and b as expected:\n%s", code, out)
	}
	out, code = vipOn(t, client, sc, "probe", "192.0.2.10", "--expect", "a", "--store", storeURL)
	if code != 3 || !strings.Contains(out, mac(b, "eth0")+" (node b), not by a") {
		t.Errorf("probe --expect a after the move: exit %d, want 3 naming node b:\n%s", code, out)
	}

	// The address remembers its home, a, where it came from; uncordon
	// --return (a is not cordoned: nothing to lift) takes it back there,
	// and at home it has none.
	homeOf := func(addr string) (string, string) {
		t.Helper()
		out := mustVip(t, client, sc, "fleet", "--json", "--store", storeURL)
		var fl api.FleetResponse
		if err := json.Unmarshal([]byte(out), &fl); err != nil {
			t.Fatalf("vip fleet --json: %v:\n%s", err, out)
		}
		for _, c := range fl.Claims {
			if c.Addr == addr {
				return c.Node, c.Home
			}
		}
		return "", ""
	}
	if node, home := homeOf("192.0.2.10"); node != "b" || home != "a" {
		t.Errorf("after the move 192.0.2.10 is on %q with home %q, want on b with home a", node, home)
	}
	out, code = vipOn(t, client, sc, "uncordon", "a", "--return", "--store", storeURL)
	if code != 0 || !strings.Contains(out, "was not cordoned") || !strings.Contains(out, "moved 192.0.2.10 from b to a") {
		t.Fatalf("uncordon a --return: exit %d, want 0 and 192.0.2.10 moved home:\n%s", code, out)
	}
	if node, home := homeOf("192.0.2.10"); node != "a" || home != "" {
		t.Errorf("back home 192.0.2.10 is on %q with home %q, want on a with none", node, home)
	}
	if out, code := vipOn(t, client, sc, "uncordon", "a", "--return", "--store", storeURL); code != 0 || !strings.Contains(out, "no address has node a as its home") {
		t.Errorf("a second uncordon a --return: exit %d, want 0 and nothing to move:\n%s", code, out)
	}

	// Drain b back to a.
	mustVip(t, b, sb, "claim", "192.0.2.20")
	out, code = vipOn(t, client, sc, "move", "--all", "--from", "b", "--to", "a", "--store", storeURL)
	if code != 0 {
		t.Fatalf("drain b: exit %d:\n%s", code, out)
	}
	out, code = vipOn(t, client, sc, "fleet", "--json", "--store", storeURL)
	if code != 0 {
		t.Fatalf("vip fleet: exit %d:\n%s", code, out)
	}
	var fl api.FleetResponse
	if err := json.Unmarshal([]byte(out), &fl); err != nil {
		t.Fatalf("vip fleet --json: %v:\n%s", err, out)
	}
	if len(fl.Nodes) != 2 || len(fl.Claims) != 2 {
		t.Fatalf("vip fleet: %d nodes and %d claims, want 2 and 2:\n%s", len(fl.Nodes), len(fl.Claims), out)
	}
	for _, c := range fl.Claims {
		if c.Node != "a" || c.State != api.FleetHolding {
			t.Errorf("after the drain %s is %s on %q, want held on a", c.Addr, c.State, c.Node)
		}
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := ask()
		return got == "a", "after the drain new connections reach " + got + ", want a"
	})
}

// TestStandbyCountsWhoHas: a standby's who-has table counts the requests
// for the address it stands by for, as its owner's does (issue 35's
// tryout: on a standby the pane showed 0.0/s with frozen counts while the
// client sent 20 requests a second): its agent holds nothing, but watches
// the address on the interface it would claim it on.
func TestStandbyCountsWhoHas(t *testing.T) {
	t.Parallel()
	f := newFleetLab(t)
	mustVip(t, f.a, f.sa, "claim", "192.0.2.10")
	mustVip(t, f.b, f.sb, "claim", "192.0.2.10", "--standby")
	var last string
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		arping(t, f.client, "-c", "3", "-w", "2", "-I", "eth0", "192.0.2.10")
		tr, err := api.NewClient(f.sb).WhoHas(ctxFor(t, 5*time.Second))
		if err != nil {
			return false, err.Error()
		}
		for _, e := range tr.Entries {
			if e.Addr == "192.0.2.10" && e.Requests >= 3 {
				return true, ""
			}
		}
		last = fmt.Sprintf("%+v (captures %+v)", tr.Entries, tr.Captures)
		return false, "the standby b counts no request for 192.0.2.10: " + last
	})
}
