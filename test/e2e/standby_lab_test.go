package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/test/labtest"
)

// standbysOf is the standbys vip fleet --json lists for addr, and its owner.
func standbysOf(t *testing.T, f *fleetLab, addr string) (owner string, standbys []string) {
	t.Helper()
	for _, c := range fleetOf(t, f).Claims {
		if c.Addr == addr {
			return c.Node, c.Standbys
		}
	}
	return "", nil
}

// standsBy says whether the agent's status lists addr as a standby.
func standsBy(t *testing.T, f *fleetLab, sock string, addr string) bool {
	t.Helper()
	h := f.a
	if sock == f.sb {
		h = f.b
	}
	for _, c := range status(t, h, sock).Claims {
		if c.Addr == addr && c.State == api.StateStandby {
			return true
		}
	}
	return false
}

// TestStandbySetLasts, against a real etcd and real agents: vip standby
// from a host with no agent makes b a standby, which b's agent hears of at
// once; a move to b makes a the standby in b's place; b killed with -9, a
// takes the address back; b started again finds it stands by still (no
// lease bound its record); vip standby --remove takes it out. Bad requests
// are refused with one sentence, and change nothing.
func TestStandbySetLasts(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "arping")
	f := newFleetLab(t)
	st := f.storeURL
	const addr = "192.0.2.10"
	mustVip(t, f.a, f.sa, "claim", addr)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{addr, "--on", "a"}, "node a holds 192.0.2.10: a standby is another node"},
		{[]string{addr, "--on", "zz"}, "node zz is not alive in the store (live nodes: a, b)"},
		{[]string{"192.0.2.99", "--on", "b"}, "nobody holds 192.0.2.99 in the store: claim it first"},
		{[]string{addr}, "name the node that stands by with --on NODE"},
	} {
		out, code := vipOn(t, f.client, f.sc, append([]string{"standby", "--store", st}, tc.args...)...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("vip standby %v: exit %d, want 2 saying %q:\n%s", tc.args, code, tc.want, out)
		}
	}
	if _, sb := standbysOf(t, f, addr); len(sb) != 0 {
		t.Fatalf("refused requests left standbys %v", sb)
	}

	out := mustVip(t, f.client, f.sc, "standby", addr, "--on", "b", "--reason", "b is the spare", "--store", st)
	if !strings.Contains(out, "192.0.2.10: node b stands by (eth0)") {
		t.Errorf("vip standby --on b said:\n%s", out)
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		return standsBy(t, f, f.sb, addr), "b's agent does not say it stands by for " + addr
	})

	mustVip(t, f.client, f.sc, "move", addr, "--to", "b", "--store", st)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		owner, sb := standbysOf(t, f, addr)
		return owner == "b" && slices.Equal(sb, []string{"a"}), fmt.Sprintf("after the move: owner %s, standbys %v; want b, and a standing by", owner, sb)
	})
	if !standsBy(t, f, f.sa, addr) || standsBy(t, f, f.sb, addr) {
		t.Errorf("after the move a stands by %v (want true), b %v (want false: it holds it)", standsBy(t, f, f.sa, addr), standsBy(t, f, f.sb, addr))
	}

	// b dies: a, the old owner, takes it back; b's record stays.
	f.agentB.Kill(t)
	macA := mac(f.a, "eth0")
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		out, _ := arping(t, f.client, "-c", "1", "-w", "1", addr)
		macs := replyMACs(out)
		return len(macs) == 1 && macs[0] == macA, fmt.Sprintf("%s is answered by %v, want a (the standby) alone", addr, macs)
	})
	f.agentB = startAgent(t, f.b, f.sb, "--store", f.storeURL, "--node", "b", "--lease-ttl", fleetTTL, "--log-format", "json")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		return standsBy(t, f, f.sb, addr), "b started again does not stand by for " + addr
	})
	if owner, sb := standbysOf(t, f, addr); owner != "a" || !slices.Equal(sb, []string{"b"}) {
		t.Errorf("after b's return: owner %s, standbys %v; want a, with b standing by", owner, sb)
	}

	out = mustVip(t, f.client, f.sc, "standby", addr, "--on", "b", "--remove", "--store", st)
	if !strings.Contains(out, "192.0.2.10: node b stands by no more") {
		t.Errorf("vip standby --remove said:\n%s", out)
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		return !standsBy(t, f, f.sb, addr), "b still stands by after --remove"
	})
	if _, sb := standbysOf(t, f, addr); len(sb) != 0 {
		t.Errorf("after --remove the standbys are %v, want none", sb)
	}
	// The history keeps both changes of the set, the reason with the
	// first; a removal of a node that did not stand by writes nothing.
	mustVip(t, f.client, f.sc, "standby", addr, "--on", "b", "--remove", "--store", st)
	var set []string
	for _, c := range historyOf(t, f, addr).Changes {
		if strings.HasPrefix(c.Kind, "standby-") && c.Kind != "standby-takeover" {
			set = append(set, changeLine(c))
		}
	}
	if want := []string{"standby-add b (b is the spare)", "standby-remove b"}; !slices.Equal(set, want) {
		t.Errorf("the history of the standby set: %v, want %v", set, want)
	}
}
