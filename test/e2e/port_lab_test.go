package e2e_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// brxMAC is brx's address, from the documentation range of RFC 7042: set
// by hand, so a reply that carries it came from the bridge, not its port.
const brxMAC = "00:00:5e:00:53:b0"

// refused checks that a claim failed with exit 2 and one line holding want.
func refused(t *testing.T, what string, code int, out, want string) {
	t.Helper()
	if code != 2 || !strings.Contains(out, want) {
		t.Errorf("%s: got exit %d, output %q; want exit 2 and %q", what, code, out, want)
	}
	if n := strings.Count(strings.TrimSpace(out), "\n"); n > 0 {
		t.Errorf("%s: got %d lines, want one sentence:\n%s", what, n+1, out)
	}
}

// TestClaimOnAPortIsRefused builds a bridge brx inside a lab host with its
// eth1 as the port: a claim on eth1 is refused, naming brx, through both
// the foreground claim and the agent, and a claim on brx answers the
// client's ARP through the port.
func TestClaimOnAPortIsRefused(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "b", Links: 2},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
	)
	b, client := l.Host("b"), l.Host("client")
	// Only eth1 joins brx: eth0 reaches the lab's switch too, and a
	// second port would close a loop through it.
	mustRun(t, b, "ip", "link", "add", "brx", "address", brxMAC, "type", "bridge", "stp_state", "0", "forward_delay", "0")
	mustRun(t, b, "ip", "link", "set", "eth1", "master", "brx")
	mustRun(t, b, "ip", "link", "set", "brx", "up")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		out, _ := b.Run(ctxFor(t, 5*time.Second), "ip", "-j", "link", "show", "brx")
		var links []struct{ Operstate string }
		_ = json.Unmarshal([]byte(out), &links)
		return len(links) == 1 && links[0].Operstate == "UP", "brx: " + out
	})
	const wantPort = "interface eth1 is a port of bridge brx, which receives its frames: claim on brx instead (-i brx)"
	noAnswer := func(t *testing.T) {
		t.Helper()
		out, code := arping(t, client, "-c", "2", "-w", "3", "-I", "eth0", vip4.String())
		if code == 0 || len(replyMACs(out)) != 0 {
			t.Errorf("arping %s after the refusal: got exit %d, replies %v; want none:\n%s", vip4, code, replyMACs(out), out)
		}
	}

	t.Run("foreground claim on the port", func(t *testing.T) {
		p := labtest.Start(t, b, vipBin, "claim", vip4.String(), "-i", "eth1", "--foreground")
		code := p.Wait(t, 10*time.Second)
		refused(t, "claim --foreground -i eth1", code, p.Output(), wantPort)
		noAnswer(t)
	})

	t.Run("claim through the agent on the port", func(t *testing.T) {
		sock := filepath.Join(sockDir(t), "port.sock")
		out, code := vipOn(t, b, sock, "claim", vip4.String(), "-i", "eth1")
		refused(t, "claim -i eth1 (agent)", code, out, wantPort)
		// The agent it started holds nothing, so it leaves by itself;
		// should it not, the cleanup ends it.
		out, code = vipOn(t, b, sock, "status", "--json")
		var st api.StatusResponse
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.Agent.PID > 0 {
			t.Cleanup(func() { syscall.Kill(st.Agent.PID, syscall.SIGTERM) })
			labtest.Eventually(t, 15*time.Second, func() (bool, string) {
				return !pidRunning(st.Agent.PID), "the autostarted agent still runs after the refused claim"
			})
		}
		noAnswer(t)
	})

	t.Run("claim on the bridge", func(t *testing.T) {
		vip := claim(t, b, vip4.String(), "-i", "brx")
		out, code := arping(t, client, "-c", "3", "-w", "5", "-I", "eth0", vip4.String())
		got := replyMACs(out)
		if code != 0 || len(got) != 3 {
			t.Fatalf("arping %s held on brx: got exit %d and %d replies, want 3:\n%s", vip4, code, len(got), out)
		}
		for _, m := range got {
			if m != brxMAC {
				t.Errorf("arping %s: got a reply from %s, want brx's %s (eth1 is %s)", vip4, m, brxMAC, mac(b, "eth1"))
			}
		}
		if code := vip.Stop(t); code != 0 {
			t.Errorf("vip after SIGTERM: got exit %d, want 0:\n%s", code, vip.Output())
		}
	})

	t.Run("claim on a bond slave", func(t *testing.T) {
		// Skipped even under CI: kernels without bonding are common, and
		// nothing here can load the module.
		if out, err := b.Run(ctxFor(t, 10*time.Second), "ip", "link", "add", "bondx", "type", "bond"); err != nil {
			t.Skipf("this kernel cannot make a bond (no bonding support): %s", strings.TrimSpace(out))
		}
		// The slave is one end of a veth pair inside b, so nothing of
		// this reaches the segment.
		mustRun(t, b, "ip", "link", "add", "bxa", "type", "veth", "peer", "name", "bxb")
		mustRun(t, b, "ip", "link", "set", "bxa", "master", "bondx")
		for _, dev := range []string{"bondx", "bxa", "bxb"} {
			mustRun(t, b, "ip", "link", "set", dev, "up")
		}
		p := labtest.Start(t, b, vipBin, "claim", vip4.String(), "-i", "bxa", "--foreground")
		code := p.Wait(t, 10*time.Second)
		refused(t, "claim --foreground -i bxa", code, p.Output(),
			"interface bxa is a slave of bond bondx, which receives its frames: claim on bondx instead (-i bondx)")
	})
}

// TestClaimedInterfaceBecomesAPort: an interface made a port of a bridge
// after it was claimed receives nothing itself any more; its claim waits,
// and the log says why and where to claim instead. Freed from the bridge, it
// answers again.
func TestClaimedInterfaceBecomesAPort(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "b", Links: 2},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
	)
	b, client := l.Host("b"), l.Host("client")
	answers := func(t *testing.T) []string {
		t.Helper()
		out, _ := arping(t, client, "-c", "2", "-w", "3", "-I", "eth0", vip4.String())
		return replyMACs(out)
	}
	p := claim(t, b, vip4.String(), "-i", "eth1")
	if got := answers(t); len(got) != 2 || got[0] != mac(b, "eth1") {
		t.Fatalf("arping %s held on eth1: got replies %v, want 2 from eth1's %s", vip4, got, mac(b, "eth1"))
	}
	// brx gets eth1 alone: eth0 reaches the lab's switch too, and a second
	// port would close a loop through it.
	mustRun(t, b, "ip", "link", "add", "brx", "address", brxMAC, "type", "bridge", "stp_state", "0", "forward_delay", "0")
	mustRun(t, b, "ip", "link", "set", "eth1", "master", "brx")
	p.WaitOutput(t, "became a port of bridge brx, which receives its frames", 10*time.Second)
	if got := answers(t); len(got) != 0 {
		t.Errorf("arping %s while eth1 is a port of brx: got replies %v, want none (nothing holds it on brx)", vip4, got)
	}
	mustRun(t, b, "ip", "link", "set", "eth1", "nomaster")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := answers(t)
		return len(got) > 0 && got[0] == mac(b, "eth1"), fmt.Sprintf("replies %v once eth1 left brx; want eth1's %s", got, mac(b, "eth1"))
	})
}
