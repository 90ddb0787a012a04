package e2e_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/test/labtest"
)

// TestFleetCommands runs the fleet's command line against a real etcd in a
// lab host of its own, with agents on a and b guarded by it and a client
// host that has no agent: a claim on a is refused on b (exit 5, naming a),
// vip fleet from the client lists both nodes and the claim, vip move from
// the client prints its timeline and the client's ARP answers come from b
// alone after it, vip status on b has the store line, a move to a node that
// is not alive is refused (exit 1), and a store that does not answer is
// exit 4.
func TestFleetCommands(t *testing.T) {
	t.Parallel()
	fl := newFleetLab(t)
	a, b, client, sa, sb, sc, url := fl.a, fl.b, fl.client, fl.sa, fl.sb, fl.sc, fl.storeURL

	mustVip(t, a, sa, "claim", "192.0.2.10")
	out, code := vipOn(t, b, sb, "claim", "192.0.2.10", "--no-autostart")
	if code != 5 || !strings.Contains(out, "held by node a") || !strings.Contains(out, "vip move 192.0.2.10 --to b") || !strings.Contains(out, "--take-over") {
		t.Fatalf("claim on b of a's address: exit %d, want 5 naming a and the two ways on:\n%s", code, out)
	}
	if why := labtest.CheckLastLine(out); why != "" {
		t.Errorf("claim on b of a's address: its message %s:\n%s", why, out)
	}

	// The client has no agent: fleet and move talk to the store alone.
	var f api.FleetResponse
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		out := mustVip(t, client, sc, "fleet", "--json", "--store", url)
		f = api.FleetResponse{}
		if err := json.Unmarshal([]byte(out), &f); err != nil {
			t.Fatalf("fleet --json: %v:\n%s", err, out)
		}
		return len(f.Nodes) == 2 && len(f.Claims) == 1, "waiting for both nodes and the claim in vip fleet --json:\n" + out
	})
	if c := f.Claims[0]; c.Addr != "192.0.2.10" || c.Node != "a" || c.MAC != mac(a, "eth0") || c.State != api.FleetHolding {
		t.Errorf("fleet --json: got claim %+v, want 192.0.2.10 held by a with %s", c, mac(a, "eth0"))
	}
	out = mustVip(t, client, sc, "fleet", "--store", url)
	for _, want := range []string{`(?m)^NODE `, `(?m)^b\s.*eth0 ` + mac(b, "eth0"), `(?m)^ADDRESS `, `(?m)^192\.0\.2\.10\s+a\s+eth0\s+` + mac(a, "eth0") + `\s.*\sheld\s`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("fleet: want a line matching %s in:\n%s", want, out)
		}
	}

	out = mustVip(t, client, sc, "move", "192.0.2.10", "--to", "b", "--store", url)
	// Then what arrived at b in the second after (--traffic-window).
	timeline := regexp.MustCompile(`^moved 192\.0\.2\.10 from a to b \(eth0\): asked, released by a \+\d+ ms, taken by b \+\d+ ms, live on b \+\d+ ms; (then \d+ packets \(\d+ bytes\) arrived for it on b in 1s|traffic not counted on b \(it answers on sockets\))\n$`)
	if !timeline.MatchString(out) {
		t.Errorf("move: got %q, want a timeline matching %s", out, timeline)
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		out, _ := arping(t, client, "-c", "2", "-w", "3", "-I", "eth0", "192.0.2.10")
		return slices.Equal(replyMACs(out), []string{mac(b, "eth0"), mac(b, "eth0")}), "waiting for b alone to answer the client:\n" + out
	})
	out = mustVip(t, b, sb, "status")
	if !strings.Contains(out, "store: node b on http://192.0.2.1:2379 (prefix /vip/), lease TTL 3s") || !strings.Contains(out, "192.0.2.10") {
		t.Errorf("status on b: want the store line and 192.0.2.10:\n%s", out)
	}

	out, code = vipOn(t, client, sc, "move", "192.0.2.10", "--to", "c", "--store", url)
	if code != 1 || !strings.Contains(out, "node c is not alive in the store (live nodes: a, b)") {
		t.Errorf("move to c: exit %d, want 1 naming the live nodes:\n%s", code, out)
	}
	// Nothing listens on 2399 in the store host: no store answers.
	out, code = vipOn(t, client, sc, "fleet", "--store", "etcd://192.0.2.1:2399")
	if code != 4 || !strings.Contains(out, "the store is unreachable") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("fleet of a store that does not answer: exit %d, want 4 and one sentence:\n%s", code, out)
	}
}
