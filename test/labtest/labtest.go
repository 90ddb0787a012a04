package labtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
)

// upTimeout bounds how long New waits for a lab to come up.
const upTimeout = 10 * time.Second

// pollInterval is how often Eventually checks its condition.
const pollInterval = 20 * time.Millisecond

// labCount numbers the labs of this process, so that each gets its own prefix.
var labCount atomic.Uint64

// New builds a lab with the given hosts for the test and removes it when the
// test and its subtests end. It skips the test in short mode (SkipShort), and
// skips it (or fails it under CI=true) when not run as root or when iproute2
// is missing.
func New(t TB, hosts ...lab.HostConfig) *lab.Lab {
	t.Helper()
	SkipShort(t)
	if os.Geteuid() != 0 {
		unavailable(t, "needs root to create network namespaces; run as root, e.g. sudo go test ./...")
	}
	RequireTool(t, "ip")
	RequireTool(t, "bridge")
	RequireTool(t, "sysctl")

	prefix := Prefix()
	// The prefix holds this process's pid, so a namespace that already has it
	// was left by a dead process that once had the same pid; it is no other
	// live test's.
	if err := lab.Clean(prefix); err != nil {
		t.Fatalf("clean leftovers of an earlier run: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	l, err := lab.Up(ctx, lab.Config{Prefix: prefix, Hosts: hosts})
	if err != nil {
		t.Fatalf("lab up: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Down(); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	return l
}

// Prefix returns a lab prefix that no other lab, in this process or another,
// is using: "vt", this process's pid and a counter, in base 36. It stays short
// because it starts every namespace name.
func Prefix() string {
	n := labCount.Add(1)
	return "vt" + strconv.FormatInt(int64(os.Getpid()), 36) + "x" + strconv.FormatUint(n, 36)
}

// RequireTool returns the path of the program name. It skips the test in
// short mode (SkipShort), and skips it (or fails it under CI=true) when the
// program is not installed.
func RequireTool(t TB, name string) string {
	t.Helper()
	SkipShort(t)
	path, err := exec.LookPath(name)
	if err != nil {
		unavailable(t, fmt.Sprintf("needs %s, which is not installed or not in PATH; install it to run this test", name))
	}
	return path
}

// RequireRoot skips the test in short mode (SkipShort), and skips it (or
// fails it under CI=true) when not run as root; what says what needs it
// ("loading eBPF programs").
func RequireRoot(t TB, what string) {
	t.Helper()
	SkipShort(t)
	if os.Geteuid() != 0 {
		unavailable(t, what+" needs root; run as root, e.g. sudo go test ./...")
	}
}

// SkipShort skips a lab test in short mode (go test -short, which make unit
// runs), under CI=true as well: short mode is the explicit choice of the
// unit loop, which needs no root, builds no lab and no vip binary, and runs
// no outside program (etcd, tcpdump, arping); make lab and make test run
// these tests. New, RequireRoot and RequireTool call it, so a test that
// needs any of them skips at its first call; a lab test that needs none of
// them (one that runs the vip binary only) calls it itself. Outside a test
// binary (vipbench's driver) it does nothing.
func SkipShort(t TB) {
	t.Helper()
	if testing.Testing() && testing.Short() {
		t.Skip("a lab test, skipped in short mode (make unit); make lab runs it")
	}
}

// unavailable ends a test that cannot run here: a skip on a developer's
// machine, a failure in CI, where every test is expected to run.
func unavailable(t TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true, so this fails instead of skipping)", why)
	}
	t.Skip(why)
}

// Eventually calls cond every 20ms until it reports ok, and fails the test if
// that has not happened within timeout, quoting the last reason cond gave.
// cond runs on the test's goroutine, so it may itself fail the test.
func Eventually(t TB, timeout time.Duration, cond func() (ok bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, why)
			return
		}
		<-tick.C
	}
}
