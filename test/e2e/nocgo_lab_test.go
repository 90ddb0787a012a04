package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// buildNoCgo builds vip with CGO_ENABLED=0 into a directory of the test's,
// and checks that the binary says it was built so.
func buildNoCgo(t *testing.T) string {
	t.Helper()
	labtest.SkipShort(t) // short mode builds no binary
	dir := t.TempDir()
	// World-readable, as vipBin's, for the lab hosts.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "vip-nocgo")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/vipctl/vip/cmd/vip")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build vip with CGO_ENABLED=0: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, "go", "version", "-m", bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CGO_ENABLED=0") {
		t.Fatalf("go version -m %s: %v; want a build with CGO_ENABLED=0:\n%s", bin, err, out)
	}
	return bin
}

// TestNoCgoAgentSeesClaimer runs the agent of a vip built without cgo, so
// without libpcap, on b: it captures all the same and reports a, which
// claims b's addresses too, as their competing claimer, over ARP and NDP.
// --filter, which needs libpcap, is refused with exit 2 and a sentence
// saying what it needs.
func TestNoCgoAgentSeesClaimer(t *testing.T) {
	t.Parallel()
	bin := buildNoCgo(t)
	l := labtest.New(t,
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.1/24"), IPv6: pfx("2001:db8::1/64")},
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24"), IPv6: pfx("2001:db8::2/64")},
	)
	a, b := l.Host("a"), l.Host("b")
	dir := sockDir(t)
	sa, sb := filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")

	out, err := b.Command(ctxFor(t, 30*time.Second), bin, "agent", "--socket", sb, "--filter", "arp").CombinedOutput()
	var exit *exec.ExitError
	const sentence = "--filter needs libpcap, and this vip was built without cgo: build it with CGO_ENABLED=1 and libpcap-dev, or leave --filter out"
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), sentence) {
		t.Errorf("vip agent --filter arp, built without cgo: got %v, %q; want exit 2 and %q", err, out, sentence)
	}

	startAgentOf(t, bin, b, sb)
	startAgent(t, a, sa)
	addrs := []string{"192.0.2.10", "2001:db8::10"}
	mustVip(t, b, sb, append([]string{"claim"}, addrs...)...)
	mustVip(t, a, sa, append([]string{"claim"}, addrs...)...)
	for _, addr := range addrs {
		labtest.Eventually(t, slow(3*time.Second), func() (bool, string) {
			macs, state := claimersOf(t, b, sb, addr)
			want := mac(a, "eth0")
			return state == "conflict" && len(macs) == 1 && macs[0] == want,
				fmt.Sprintf("b's agent, built without cgo, reports claimers %v for %s in state %s, want %s in state conflict", macs, addr, state, want)
		})
	}
	st := status(t, b, sb)
	if len(st.Captures) != 1 || st.Captures[0].Interface != "eth0" || st.Captures[0].Error != "" || st.Captures[0].Received == 0 || st.Captures[0].Scope != "held" {
		t.Errorf("b's captures: got %+v, want one on eth0 that received frames about the held addresses, without error", st.Captures)
	}
}
