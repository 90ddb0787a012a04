package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/test/labtest"
)

// TestCordon, against a real etcd and real agents: vip cordon from a host
// with no agent keeps new addresses off node b (a move, a take-over and a
// standby's takeover are refused, each naming the cordon, and a --force
// move is not), b keeps what it holds and shows the cordon in its status;
// vip uncordon lets b take as a standby what nobody took meanwhile; and a
// cordon with --for lifts itself with nobody connected.
func TestCordon(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "etcdctl")
	f := newFleetLab(t)
	st := f.storeURL
	fleetNow := func() api.FleetResponse { t.Helper(); return fleetOf(t, f) }
	ownerOf := func(fl api.FleetResponse, addr string) string {
		for _, c := range fl.Claims {
			if c.Addr == addr {
				return c.Node
			}
		}
		return ""
	}
	mustVip(t, f.a, f.sa, "claim", "192.0.2.10", "192.0.2.50")
	mustVip(t, f.b, f.sb, "claim", "192.0.2.20")

	// A name no node has is a typo until --force says otherwise.
	if out, code := vipOn(t, f.client, f.sc, "cordon", "bb", "--store", st); code != 2 || !strings.Contains(out, "node bb is not alive in the store (live nodes: a, b)") {
		t.Errorf("cordon of a node not alive: exit %d, want 2 naming the live nodes:\n%s", code, out)
	}
	if out := mustVip(t, f.client, f.sc, "cordon", "c", "--force", "--store", st); !strings.Contains(out, "not alive in the store now, and the cordon holds when it comes back") {
		t.Errorf("vip cordon c --force said:\n%s", out)
	}
	mustVip(t, f.client, f.sc, "uncordon", "c", "--store", st)
	mustVip(t, f.client, f.sc, "cordon", "b", "--reason", "first", "--store", st)
	out := mustVip(t, f.client, f.sc, "cordon", "b", "--reason", "kernel upgrade", "--store", st)
	if !strings.Contains(out, "node b is cordoned until vip uncordon b") || !strings.Contains(out, "keeps what it holds") ||
		!strings.Contains(out, `replaced the cordon of node b: "first"`) {
		t.Errorf("vip cordon b over a cordon said:\n%s", out)
	}
	fl := fleetNow()
	if len(fl.Cordons) != 1 || fl.Cordons[0].Node != "b" || fl.Cordons[0].Reason != "kernel upgrade" || fl.Cordons[0].By == "" || fl.Cordons[0].Left != nil {
		t.Errorf("vip fleet's cordons: %+v, want b's with its reason, who, and no end", fl.Cordons)
	}
	if ownerOf(fl, "192.0.2.20") != "b" {
		t.Error("the cordoned node let go of what it held")
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		s := status(t, f.b, f.sb).Agent.Store
		return s != nil && s.Cordon != nil && s.Cordon.Reason == "kernel upgrade", fmt.Sprintf("b's status does not show its cordon: %+v", s)
	})
	if out := mustVip(t, f.b, f.sb, "status"); !strings.Contains(out, `CORDONED ("kernel upgrade", until uncordoned`) {
		t.Errorf("b's plain status does not say it is cordoned:\n%s", out)
	}

	// A move and a take-over to b are refused before anything changes.
	out, code := vipOn(t, f.client, f.sc, "move", "192.0.2.10", "--to", "b", "--store", st)
	if code != 1 || !strings.Contains(out, "node b is cordoned") || !strings.Contains(out, `"kernel upgrade"`) || !strings.Contains(out, "--force") {
		t.Errorf("move to the cordoned b: exit %d, want 1 naming the cordon and --force:\n%s", code, out)
	}
	out, code = vipOn(t, f.b, f.sb, "claim", "192.0.2.10", "--take-over")
	if code == 0 || !strings.Contains(out, "node b is cordoned") {
		t.Errorf("take-over on the cordoned b: exit %d, want a refusal naming the cordon:\n%s", code, out)
	}
	if got := ownerOf(fleetNow(), "192.0.2.10"); got != "a" {
		t.Fatalf("after the refusals 192.0.2.10 is on %q, want a", got)
	}
	// --force moves there all the same.
	out, code = vipOn(t, f.client, f.sc, "move", "192.0.2.30", "--to", "b", "--force", "--store", st)
	if got := ownerOf(fleetNow(), "192.0.2.30"); code != 0 || got != "b" {
		t.Errorf("a forced move to the cordoned b: exit %d, 192.0.2.30 on %q, want b:\n%s", code, got, out)
	}

	if out, code := vipOn(t, f.b, f.sb, "claim", "192.0.2.50", "--take-over", "--force"); code != 0 || ownerOf(fleetNow(), "192.0.2.50") != "b" {
		t.Errorf("a forced take-over on the cordoned b: exit %d, want 0 and 192.0.2.50 on b:\n%s", code, out)
	}

	// The owner dies: the cordoned standby does not take its address.
	mustVip(t, f.b, f.sb, "claim", "192.0.2.10", "--standby")
	f.agentA.Kill(t)
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		_, ok := findLog(logLines(t, f.agentB.Output()), "a standby for an address whose owner's lease expired does not take it: this node is cordoned", "192.0.2.10")
		return ok, "b's log does not say it left 192.0.2.10 alone for its cordon"
	})
	if got := ownerOf(fleetNow(), "192.0.2.10"); got != "" {
		t.Fatalf("192.0.2.10 is on %q while its only standby is cordoned, want nobody", got)
	}
	if out, _ := arping(t, f.client, "-c", "2", "-w", "2", "192.0.2.10"); len(replyMACs(out)) != 0 {
		t.Errorf("someone answers for 192.0.2.10 while nobody holds it: %v", replyMACs(out))
	}

	// Uncordon: b takes what it stood by for, and answers for it.
	if out := mustVip(t, f.client, f.sc, "uncordon", "b", "--store", st); !strings.Contains(out, "node b is uncordoned") {
		t.Errorf("vip uncordon b said:\n%s", out)
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := ownerOf(fleetNow(), "192.0.2.10")
		return got == "b", "after the uncordon 192.0.2.10 is on " + got + ", want b"
	})
	macB := mac(f.b, "eth0")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		out, _ := arping(t, f.client, "-c", "1", "-w", "1", "192.0.2.10")
		macs := replyMACs(out)
		return len(macs) == 1 && macs[0] == macB, fmt.Sprintf("192.0.2.10 is answered by %v, want b alone", macs)
	})
	if out := mustVip(t, f.client, f.sc, "uncordon", "b", "--store", st); !strings.Contains(out, "was not cordoned") {
		t.Errorf("a second uncordon said:\n%s", out)
	}

	// --for: the cordon lifts by itself, with no client connected: its
	// key goes with its lease.
	out = mustVip(t, f.client, f.sc, "cordon", "b", "--for", "5s", "--json", "--store", st)
	var cr api.CordonResponse
	if err := json.Unmarshal([]byte(out), &cr); err != nil || cr.Cordon == nil || cr.Cordon.Left == nil || !cr.Live {
		t.Fatalf("vip cordon --for 5s --json: %v:\n%s", err, out)
	}
	if out, code := vipOn(t, f.client, f.sc, "move", "192.0.2.40", "--to", "b", "--store", st); code != 1 || !strings.Contains(out, "left") {
		t.Errorf("move during the 5 s cordon: exit %d, want 1 with the time left:\n%s", code, out)
	}
	storeHost := f.l.Host("store")
	labtest.Eventually(t, 15*time.Second, func() (bool, string) {
		out, _ := storeHost.Run(ctxFor(t, 5*time.Second), "etcdctl", "--endpoints", f.etcd.Endpoint(), "get", "--prefix", "--keys-only", "/vip/cordons/")
		return strings.TrimSpace(out) == "" && len(fleetNow().Cordons) == 0, "the 5 s cordon's key is still in the store: " + out
	})
	if out, code := vipOn(t, f.client, f.sc, "move", "192.0.2.40", "--to", "b", "--store", st); code != 0 {
		t.Errorf("move after the cordon lifted by itself: exit %d:\n%s", code, out)
	}
}
