package e2e_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/test/labtest"
)

// TestFleetRegistersAddressesAddedLater: an address the operator adds to a
// guarded agent's interface after the agent joined becomes the node's own
// in the store (its registration lists it within seconds), so that a move
// of it to that node is refused (exit 1); one removed is no longer listed;
// and the address of a claim made with --assign is never registered as
// the node's own, so that it still moves away.
func TestFleetRegistersAddressesAddedLater(t *testing.T) {
	t.Parallel()
	f := newFleetLab(t)
	// registered reads a's eth0 prefixes from the store.
	registered := func() []string {
		out := mustVip(t, f.client, f.sc, "fleet", "--json", "--store", f.storeURL)
		var fl api.FleetResponse
		if err := json.Unmarshal([]byte(out), &fl); err != nil {
			t.Fatalf("vip fleet --json: %v:\n%s", err, out)
		}
		for _, n := range fl.Nodes {
			for _, ifc := range n.Interfaces {
				if n.Node == "a" && ifc.Name == "eth0" {
					return ifc.Prefixes
				}
			}
		}
		return nil
	}
	waitRegistered := func(prefix string, want bool, why string) []string {
		t.Helper()
		var got []string
		labtest.Eventually(t, 10*time.Second, func() (bool, string) {
			got = registered()
			return slices.Contains(got, prefix) == want, why + ": a's eth0 in the store has " + strings.Join(got, ", ")
		})
		return got
	}
	if got := registered(); !slices.Contains(got, "192.0.2.11/24") || slices.Contains(got, "192.0.2.7/24") {
		t.Fatalf("a's eth0 in the store at start: %v, want 192.0.2.11/24 and not 192.0.2.7/24", got)
	}

	mustRun(t, f.a, "ip", "addr", "add", "192.0.2.7/24", "dev", "eth0")
	waitRegistered("192.0.2.7/24", true, "the address added after the agent joined is not registered")
	out, code := vipOn(t, f.client, f.sc, "move", "192.0.2.7", "--to", "a", "--store", f.storeURL)
	if code != 1 || !strings.Contains(out, "node a's own address on eth0") {
		t.Errorf("a move to a of the address added on a: exit %d, %q; want exit 1 naming it a's own", code, out)
	}

	// A claim with --assign adds its address to eth0: vip's, not a's.
	// The address the operator adds after it is registered by a read of
	// the interfaces made once the claim's address was there.
	mustVip(t, f.a, f.sa, "claim", "192.0.2.20", "--assign")
	if !hasAddr(t, f.a, "192.0.2.20") {
		t.Fatal("the --assign claim did not add 192.0.2.20 to a's eth0")
	}
	mustRun(t, f.a, "ip", "addr", "add", "192.0.2.8/24", "dev", "eth0")
	if got := waitRegistered("192.0.2.8/24", true, "the second address added is not registered"); slices.ContainsFunc(got, func(p string) bool {
		return strings.HasPrefix(p, "192.0.2.20/")
	}) {
		t.Errorf("a's registration lists the --assign claim's address as a's own: %v", got)
	}
	out, code = vipOn(t, f.client, f.sc, "move", "192.0.2.20", "--to", "b", "--store", f.storeURL)
	if code != 0 {
		t.Errorf("a move of a's --assign claim to b: exit %d, want 0:\n%s", code, out)
	}

	mustRun(t, f.a, "ip", "addr", "del", "192.0.2.7/24", "dev", "eth0")
	waitRegistered("192.0.2.7/24", false, "the address removed is still registered")
}
