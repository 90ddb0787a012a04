package e2e_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// hookScript is the hook both agents run: it appends each change to a log
// per node and address and writes a file per change, sleeps 5 s while
// DIR/slow exists, and fails for 192.0.2.29.
const hookScript = `#!/bin/sh
echo "$VIP_EVENT $VIP_OLD_STATE>$VIP_NEW_STATE peer=$VIP_PEER" >> "DIR/$VIP_NODE-$VIP_ADDR.log"
: > "DIR/change-$VIP_NODE-$VIP_ADDR-$(date +%s%N)"
if [ "$VIP_ADDR" = 192.0.2.29 ]; then echo "cannot restart the service" >&2; exit 1; fi
if [ -e DIR/slow ]; then sleep 5; fi
`

// hookCalls reads the calls of node's hook for addr, in order.
func hookCalls(t *testing.T, dir, node, addr string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, node+"-"+addr+".log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// waitCalls waits until node's hook was called for addr as want says.
func waitCalls(t *testing.T, dir, node, addr string, want ...string) {
	t.Helper()
	labtest.Eventually(t, 30*time.Second, func() (bool, string) {
		got := hookCalls(t, dir, node, addr)
		return slices.Equal(got, want), fmt.Sprintf("%s's hook for %s: got calls %q, want %q", node, addr, got, want)
	})
}

var arpingTime = regexp.MustCompile(`\]\s+([0-9.]+)ms`)

// arpLatencies asks h for addr n times, one request at a time, and
// returns the times of the answers, sorted; a request unanswered within a
// second fails the test.
func arpLatencies(t *testing.T, h *lab.Host, addr netip.Addr, n int) []float64 {
	t.Helper()
	var ms []float64
	for range n {
		out, code := arping(t, h, "-c", "1", "-w", "1", "-I", "eth0", addr.String())
		m := arpingTime.FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("arping %s: exit %d, no answer within 1 s:\n%s", addr, code, out)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, v)
	}
	sort.Float64s(ms)
	return ms
}

// renewalAge reads a's status for d and returns the oldest its last lease
// renewal was at a reading; a fenced agent fails the test.
func renewalAge(t *testing.T, f *fleetLab, d time.Duration) time.Duration {
	t.Helper()
	var oldest time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		st := status(t, f.a, f.sa).Agent.Store
		if st == nil || !st.Fenced.IsZero() {
			t.Fatalf("a fenced: %+v", st)
		}
		oldest = max(oldest, time.Since(st.Renewed))
	}
	return oldest
}

// TestHooks runs vip agent --on-change on two guarded agents. While a's
// hook sleeps 5 s per call, for six addresses (four running, two waiting),
// a answers ARP as fast as before and renews its lease on time. The calls
// of each address come in the order of its changes, with the node taking
// over: claims, a standby set, a move away and here, a standby taking
// over a killed owner; a failing hook is logged as failed.
func TestHooks(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "arping")
	dir := t.TempDir()
	prog := filepath.Join(dir, "on-change")
	if err := os.WriteFile(prog, []byte(strings.ReplaceAll(hookScript, "DIR", dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFleetLabWith(t, "--on-change", prog)
	v4 := "192.0.2.10"
	mustVip(t, f.a, f.sa, "claim", v4)
	mustVip(t, f.b, f.sb, "claim", v4, "--standby")
	waitCalls(t, dir, "a", v4, "claim none>owner peer=")
	waitCalls(t, dir, "b", v4, "standby none>standby peer=")

	before := arpLatencies(t, f.client, netip.MustParseAddr(v4), 10)
	ageBefore := renewalAge(t, f, 2*time.Second)

	// Six claims whose hooks sleep 5 s: four at once, two waiting.
	if err := os.WriteFile(filepath.Join(dir, "slow"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	slow := []string{"192.0.2.20", "192.0.2.21", "192.0.2.22", "192.0.2.23", "192.0.2.24", "192.0.2.25"}
	mustVip(t, f.a, f.sa, append([]string{"claim"}, slow...)...)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		m, _ := filepath.Glob(filepath.Join(dir, "change-a-192.0.2.2[0-5]-*"))
		return len(m) == 4, fmt.Sprintf("%d hooks started, want 4 at once", len(m))
	})
	during := arpLatencies(t, f.client, netip.MustParseAddr(v4), 10)
	ageDuring := renewalAge(t, f, 3*time.Second)
	ran := 0
	for _, l := range logLines(t, f.agentA.Output()) {
		if l.Msg == "hook ran" && slices.Contains(slow, l.Addr) {
			ran++
		}
	}
	if ran == len(slow) {
		t.Fatalf("every slow hook had ended before the measurements did: they measured nothing")
	}
	t.Logf("arping %s from the client, ms: before %v, while 4 hooks sleep %v; the oldest renewal seen %v before, %v while they sleep (one every 500 ms)",
		v4, before, during, ageBefore.Round(time.Millisecond), ageDuring.Round(time.Millisecond))
	if med, base := during[len(during)/2], before[len(before)/2]; med > 3*base+2 {
		t.Errorf("the median answer took %.3f ms while the hooks slept, %.3f ms before: want comparable (at most 3x + 2 ms)", med, base)
	}
	// Not delayed: no older than before by more than one renewal period
	// (a loaded or race-built agent renews later in both), and short of
	// the fence (2 s at the lab's 3 s TTL).
	if ageDuring > ageBefore+500*time.Millisecond || ageDuring >= 2*time.Second {
		t.Errorf("a's last renewal was %v old while its hooks slept (%v before), want within one renewal period (500 ms) of before and under the fence's 2 s", ageDuring.Round(time.Millisecond), ageBefore.Round(time.Millisecond))
	}
	for _, a := range slow {
		waitCalls(t, dir, "a", a, "claim none>owner peer=")
	}
	if err := os.Remove(filepath.Join(dir, "slow")); err != nil {
		t.Fatal(err)
	}

	// A failing hook is logged with its status and last line.
	mustVip(t, f.a, f.sa, "claim", "192.0.2.29")
	line := f.agentA.WaitOutput(t, `"msg":"hook failed"`, 20*time.Second)
	if !strings.Contains(line, "192.0.2.29") || !strings.Contains(line, "exited with status 1") || !strings.Contains(line, "cannot restart the service") {
		t.Errorf("a's log of the failed hook: got %s, want the address, status 1 and its output", line)
	}

	// A move away and here, then a standby taking over a killed owner.
	moved := slow[0]
	if out, code := vipOn(t, f.client, f.sc, "move", moved, "--to", "b", "--store", f.storeURL); code != 0 {
		t.Fatalf("vip move %s --to b: exit %d:\n%s", moved, code, out)
	}
	waitCalls(t, dir, "a", moved, "claim none>owner peer=", "move owner>standby peer=b")
	waitCalls(t, dir, "b", moved, "move none>owner peer=a")
	f.agentA.Kill(t)
	waitCalls(t, dir, "b", v4, "standby none>standby peer=", "standby standby>owner peer=a")
}

// TestHookSeesARestart: an agent stopped with SIGTERM and started again (as
// systemctl restart does) takes its claims back, and its hook is told
// "resume owner>owner", not a new claim, so that a hook that restarts a
// service when its host becomes the owner does not do so at every restart
// of the agent.
func TestHookSeesARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "on-change")
	if err := os.WriteFile(prog, []byte(strings.ReplaceAll(hookScript, "DIR", dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFleetLabWith(t, "--on-change", prog)
	v4, v6 := "192.0.2.10", "2001:db8::10"
	mustVip(t, f.a, f.sa, "claim", v4, v6, "--assign")
	waitCalls(t, dir, "a", v4, "claim none>owner peer=")
	waitCalls(t, dir, "a", v6, "claim none>owner peer=")
	if code := f.agentA.Stop(t); code != 0 {
		t.Fatalf("a's agent after SIGTERM: exit %d:\n%s", code, f.agentA.Output())
	}
	f.agentA = startAgent(t, f.a, f.sa, "--store", f.storeURL, "--node", "a", "--lease-ttl", fleetTTL, "--log-format", "json", "--on-change", prog)
	waitCalls(t, dir, "a", v4, "claim none>owner peer=", "resume owner>owner peer=")
	waitCalls(t, dir, "a", v6, "claim none>owner peer=", "resume owner>owner peer=")
	// The resume event names why, for scripts that read vip events.
	events := labtest.Start(t, f.a, vipBin, "events", "--json", "--since", "1m", "--socket", f.sa)
	line := events.WaitOutput(t, `"kind":"resume","addr":"192.0.2.10"`, 10*time.Second)
	if !strings.Contains(line, "adopted from an earlier run") {
		t.Errorf("the restarted agent's resume event of %s does not say why: %s", v4, line)
	}
}
