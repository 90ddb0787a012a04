package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/test/labtest"
)

// nightProofs are the proofs vip lab demo --fleet prints when each holds:
// the claim, the take after the freeze, the take after the kill, the
// drain's five (the move home, made only when a standby's take left the
// group away from a, the drain's move, the client's kernel, the return and
// the kernel again), the outage's two (through it and after the store's
// return) and the history.
const nightProofs = 11

// TestLabDemoFleet plays the night of maintenance on a fleet lab of its
// own, as make demo does: each act's proof, taken from the capture on the
// client, holds, and the demo exits 0 saying so. Not parallel: its proofs
// are timing (no address silent over a second through the store's
// outage), and it runs a lab of four agents and etcd; for the same reason
// it runs in the plain run only, not again under -race (skipRaced).
func TestLabDemoFleet(t *testing.T) {
	skipRaced(t)
	if os.Geteuid() != 0 {
		labtest.New(t) // skips (or fails under CI) with the reason
	}
	labtest.RequireTool(t, "ip")
	labtest.RequireTool(t, "etcd")
	name := fmt.Sprintf("vn%d", os.Getpid()%100000)
	dir := sockDir(t)
	vip := labVip(t, name, dir, 4*time.Minute)
	t.Cleanup(func() { vip("down") })
	out, code := vip("demo", "--fleet")
	if code != 0 {
		t.Fatalf("lab demo --fleet: exit %d:\n%s", code, out)
	}
	if n := strings.Count(out, "   proof: "); n < nightProofs-1 || strings.Contains(out, "FAILED") {
		t.Errorf("lab demo --fleet printed %d proofs (want %d or %d, none failed):\n%s", n, nightProofs-1, nightProofs, out)
	}
	for _, want := range []string{"act 6 of 6", "0 from a after", "never silent for more than", "the store's history holds", "every proof from the client's capture held"} {
		if !strings.Contains(out, want) {
			t.Errorf("lab demo --fleet output lacks %q:\n%s", want, out)
		}
	}
}

// TestLabDemoFleetFailsABrokenProof breaks the guarantee on purpose while
// the demo watches: once a standby has taken the group from the frozen a,
// an unguarded vip claim --foreground on a answers for 192.0.2.10 with a's
// MAC, as a frozen owner that woke and answered would. The client's
// capture sees it, and the demo exits 3 naming the act and the answers.
func TestLabDemoFleetFailsABrokenProof(t *testing.T) {
	skipRaced(t) // a minute of CI's 30 under -race; its paths run there in the other lab tests
	if os.Geteuid() != 0 {
		labtest.New(t)
	}
	labtest.RequireTool(t, "ip")
	labtest.RequireTool(t, "etcd")
	name := fmt.Sprintf("vb%d", os.Getpid()%100000)
	dir := sockDir(t)
	t.Cleanup(func() { labVip(t, name, dir, time.Minute)("down") })
	ctx := ctxFor(t, 4*time.Minute)
	cmd := exec.CommandContext(ctx, vipBin, "lab", "--name", name, "--dir", dir, "demo", "--fleet")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		out   strings.Builder
		rogue *exec.Cmd
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if rogue == nil && strings.Contains(line, "took the group") && strings.Contains(line, "a wakes now") {
				rogue = exec.CommandContext(ctx, "ip", "netns", "exec", name+"-a", vipBin,
					"claim", "--foreground", "192.0.2.10", "-i", "eth0", "--responder", "socket")
				rogue.Env = []string{"PATH=" + os.Getenv("PATH")} // no VIP_STORE: unguarded
				rogue.Stdout, rogue.Stderr = io.Discard, io.Discard
				if err := rogue.Start(); err != nil {
					t.Errorf("start the rogue claim on a: %v", err)
					rogue = nil
				}
			}
		}
	}()
	err := cmd.Wait()
	pw.Close()
	wg.Wait()
	if rogue != nil {
		_ = rogue.Process.Kill()
		_ = rogue.Wait()
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if rogue == nil {
		t.Fatalf("the demo never said a standby took the group from a (exit %d):\n%s", code, out.String())
	}
	if code != 3 || !strings.Contains(out.String(), "act 2 FAILED") || !strings.Contains(out.String(), "answered twice") {
		t.Fatalf("the demo with a's rogue answers: exit %d, want 3 with act 2's proof failed:\n%s", code, out.String())
	}
}
