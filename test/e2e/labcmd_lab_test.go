package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/test/labtest"
)

// TestLabCommand runs the sandbox a newcomer starts with: vip lab up, the
// scripted failover of vip lab demo without a terminal, and vip lab down,
// which must leave no namespace, link, process or file behind.
func TestLabCommand(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		labtest.New(t) // skips (or fails under CI) with the reason
	}
	labtest.RequireTool(t, "ip")
	name := fmt.Sprintf("vl%d", os.Getpid()%100000)
	dir := sockDir(t)
	vip := labVip(t, name, dir, 60*time.Second)
	t.Cleanup(func() { vip("down") })
	namespaces := func() string {
		out, _ := exec.Command("ip", "netns", "list").Output()
		var mine []string
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, name+"-") {
				mine = append(mine, strings.Fields(line)[0])
			}
		}
		return strings.Join(mine, " ")
	}

	if out, code := vip("up"); code != 0 || namespaces() == "" {
		t.Fatalf("lab up: exit %d, namespaces %q:\n%s", code, namespaces(), out)
	}
	if out, code := vip("up"); code != 0 || !strings.Contains(out, "already up") {
		t.Errorf("second lab up: exit %d, want 0 saying it is already up:\n%s", code, out)
	}
	if out, code := vip("exec", "nowhere", "--", "true"); code != 2 || !strings.Contains(out, "no lab host") {
		t.Errorf("exec on an unknown host: exit %d, want 2:\n%s", code, out)
	}
	if out, code := vip("exec", "client", "--", "sh", "-c", "exit 7"); code != 7 {
		t.Errorf("exec passes the exit code through: got %d, want 7:\n%s", code, out)
	}

	out, code := vip("demo")
	if code != 0 {
		t.Fatalf("lab demo: exit %d:\n%s", code, out)
	}
	for _, want := range []string{"a claims 192.0.2.10", "a's MAC", "split brain", "conflict", "claims 192.0.2.10 again", "b's MAC", "failover clean"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	var pids []string
	for _, host := range []string{"a", "b", "client", "sw"} {
		p, _ := exec.Command("ip", "netns", "pids", name+"-"+host).Output()
		pids = append(pids, strings.Fields(string(p))...)
	}
	if len(pids) == 0 {
		t.Error("after the demo: want b's agent still running in the lab")
	}

	if out, code := vip("down"); code != 0 {
		t.Fatalf("lab down: exit %d:\n%s", code, out)
	}
	if ns := namespaces(); ns != "" {
		t.Errorf("after lab down: namespaces %s remain", ns)
	}
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + pid); err == nil {
			t.Errorf("after lab down: process %s of the lab is still running", pid)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("after lab down: files left in %s: %v", dir, left)
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil && strings.Contains(string(out), name) {
		t.Errorf("after lab down: a link of the lab remains in the root namespace:\n%s", out)
	}
}

// TestLabFleet: vip lab up --fleet builds the fleet a newcomer tries the
// guarantee on: Debian's etcd in a host of its own and guarded agents on
// a, b and c. Inside the lab VIP_STORE is set, so a claim on a is guarded
// and vip fleet on the client lists a, b and c with a holding it; vip lab
// down leaves no namespace, process or file, the store's data included.
func TestLabFleet(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		labtest.New(t) // skips (or fails under CI) with the reason
	}
	labtest.RequireTool(t, "ip")
	labtest.RequireTool(t, "etcd")
	name := fmt.Sprintf("vf%d", os.Getpid()%100000)
	dir := sockDir(t)
	vip := labVip(t, name, dir, 90*time.Second)
	t.Cleanup(func() { vip("down") })
	if out, code := vip("up", "--fleet"); code != 0 || !strings.Contains(out, "fleet lab up") {
		t.Fatalf("lab up --fleet: exit %d:\n%s", code, out)
	}
	if out, code := vip("up", "--fleet"); code != 0 || !strings.Contains(out, "already up") {
		t.Errorf("second lab up --fleet: exit %d, want 0 saying it is already up:\n%s", code, out)
	}
	if out, code := vip("exec", "a", "--", "vip", "claim", "192.0.2.10"); code != 0 {
		t.Fatalf("a guarded claim in the fleet lab: exit %d:\n%s", code, out)
	}
	out, code := vip("exec", "client", "--", "vip", "fleet", "--json")
	var fl api.FleetResponse
	if code != 0 || json.Unmarshal([]byte(out), &fl) != nil {
		t.Fatalf("vip fleet in the fleet lab: exit %d:\n%s", code, out)
	}
	var nodes []string
	for _, n := range fl.Nodes {
		nodes = append(nodes, n.Node)
	}
	slices.Sort(nodes)
	if !slices.Equal(nodes, []string{"a", "b", "c"}) || len(fl.Claims) != 1 || fl.Claims[0].Node != "a" || fl.Claims[0].Addr != "192.0.2.10" {
		t.Errorf("vip fleet in the fleet lab: nodes %v, claims %+v; want a, b and c, and 192.0.2.10 held by a", nodes, fl.Claims)
	}
	var pids []string
	for _, host := range []string{"a", "b", "c", "client", "store", "sw"} {
		p, _ := exec.Command("ip", "netns", "pids", name+"-"+host).Output()
		pids = append(pids, strings.Fields(string(p))...)
	}
	if out, code := vip("down"); code != 0 {
		t.Fatalf("lab down: exit %d:\n%s", code, out)
	}
	if ns, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(ns), name+"-") {
		t.Errorf("after lab down: namespaces of the lab remain:\n%s", ns)
	}
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + pid); err == nil {
			t.Errorf("after lab down: process %s of the lab is still running", pid)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("after lab down: files left in %s (the store's data?): %v", dir, left)
	}
}

// labVip runs vip lab with the lab's name and directory, each run given
// timeout, and returns its output and exit code.
func labVip(t *testing.T, name, dir string, timeout time.Duration) func(args ...string) (string, int) {
	return func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctxFor(t, timeout), vipBin, append([]string{"lab", "--name", name, "--dir", dir}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return string(out), ee.ExitCode()
			}
			t.Fatal(err)
		}
		return string(out), 0
	}
}
