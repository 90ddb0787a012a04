package hook

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/test/labtest"
)

// script writes a shell script with body to a new directory and returns
// its path. The tests here are not parallel: a script written while
// another test forks could fail to start ("text file busy").
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// reports collects what a Runner reports.
type reports struct {
	mu  sync.Mutex
	evs []event.Event
}

func (r *reports) add(ev event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *reports) all() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// idle reports whether r has no change waiting or running.
func (r *Runner) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queues) == 0
}

// logLines reads the lines of path, none if it does not exist yet.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

func change(a netip.Addr, seq int) Change {
	return Change{Event: "claim", Addr: a, Interface: "eth0", Old: None, New: Owner, Node: "here", Reason: strconv.Itoa(seq), Time: t0}
}

// TestRunnerOrderPerAddress runs a hook that writes a file per change and
// appends to its address's log: each address's calls come in the order of
// its changes, with the environment the change says over the agent's:
// an event's variable the agent's environment has too is the change's,
// and the agent's own settings (VIP_SOCKET, VIP_STORE) reach the hook,
// which may run vip.
func TestRunnerOrderPerAddress(t *testing.T) {
	out := t.TempDir()
	prog := script(t, `echo "$VIP_REASON" >> "$OUT/$VIP_ADDR.log"
env | grep -E '^VIP_(EVENT|ADDR|INTERFACE|GROUP|OLD_STATE|NEW_STATE|NODE|PEER|REASON|REASON_CODE|TIME|SOCKET)=' | sort > "$OUT/$VIP_ADDR-$VIP_REASON.env"
`)
	t.Setenv("OUT", out)
	t.Setenv("VIP_PEER", "inherited")
	t.Setenv("VIP_SOCKET", "/run/vip/other.sock")
	r := NewRunner(context.Background(), Config{Program: prog, Running: 2})
	defer r.Close()
	addrs := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("2001:db8::3")}
	const n = 20
	for i := range n {
		for _, a := range addrs {
			r.Enqueue(change(a, i))
		}
	}
	want := make([]string, n)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	for _, a := range addrs {
		labtest.Eventually(t, 20*time.Second, func() (bool, string) {
			got := logLines(t, filepath.Join(out, a.String()+".log"))
			return len(got) >= n, fmt.Sprintf("%s: %d of %d calls", a, len(got), n)
		})
		if got := logLines(t, filepath.Join(out, a.String()+".log")); !slices.Equal(got, want) {
			t.Errorf("%s: got calls in the order %v, want %v", a, got, want)
		}
	}
	env, err := os.ReadFile(filepath.Join(out, "2001:db8::3-7.env"))
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := `VIP_ADDR=2001:db8::3
VIP_EVENT=claim
VIP_GROUP=
VIP_INTERFACE=eth0
VIP_NEW_STATE=owner
VIP_NODE=here
VIP_OLD_STATE=none
VIP_PEER=
VIP_REASON=7
VIP_REASON_CODE=
VIP_SOCKET=/run/vip/other.sock
VIP_TIME=2025-01-02T03:04:05Z
`
	if string(env) != wantEnv {
		t.Errorf("the hook's environment: got\n%s\nwant\n%s", env, wantEnv)
	}
}

// TestRunnerFailureReportedOnce runs a hook that fails: it is reported
// once, with its status and last line, and not run again.
func TestRunnerFailureReportedOnce(t *testing.T) {
	out := filepath.Join(t.TempDir(), "calls")
	prog := script(t, `echo "$VIP_REASON" >> "`+out+`"
if [ "$VIP_REASON" = 0 ]; then echo first line; echo "cannot restart haproxy" >&2; exit 1; fi
`)
	var rep reports
	r := NewRunner(context.Background(), Config{Program: prog, Report: rep.add})
	defer r.Close()
	r.Enqueue(change(addrA, 0))
	r.Enqueue(change(addrA, 1))
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		return r.idle() && len(logLines(t, out)) == 2, fmt.Sprintf("calls %v", logLines(t, out))
	})
	if got := logLines(t, out); !slices.Equal(got, []string{"0", "1"}) {
		t.Errorf("calls: got %v, want [0 1]: the failed one once, never retried", got)
	}
	evs := rep.all()
	if len(evs) != 1 {
		t.Fatalf("got %d reports %+v, want 1", len(evs), evs)
	}
	e := evs[0]
	if e.Kind != event.HookFailed || e.Addr != addrA || e.State != "owner" ||
		!strings.Contains(e.Message, "exited with status 1") || !strings.HasSuffix(e.Message, "its last line: cannot restart haproxy") {
		t.Errorf("got report %+v, want a hook-failed event for %s saying status 1 and the last line", e, addrA)
	}
}

// TestRunnerCannotStart reports a program that cannot start.
func TestRunnerCannotStart(t *testing.T) {
	var rep reports
	r := NewRunner(context.Background(), Config{Program: filepath.Join(t.TempDir(), "missing"), Report: rep.add})
	defer r.Close()
	r.Enqueue(change(addrA, 0))
	labtest.Eventually(t, 5*time.Second, func() (bool, string) { return len(rep.all()) == 1, "no report yet" })
	if e := rep.all()[0]; !strings.Contains(e.Message, "could not start") {
		t.Errorf("got report %q, want one saying the hook could not start", e.Message)
	}
}

// gone reports whether pid has exited (a zombie counts: nothing runs).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// TestRunnerTimeoutKillsGroup runs hooks that sleep past their timeout,
// with a child in the background: the run is reported as timed out, the
// whole process group is killed (the child too), and the next change runs.
func TestRunnerTimeoutKillsGroup(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"the hook and its child end on SIGTERM", `sleep 60 & echo $! > "$PIDS/$VIP_REASON"; wait`},
		{"the child ignores SIGTERM", `(trap '' TERM; exec sleep 60) & echo $! > "$PIDS/$VIP_REASON"; sleep 60`},
		{"both ignore SIGTERM", `trap '' TERM; sleep 60 & echo $! > "$PIDS/$VIP_REASON"; wait; wait`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pids := t.TempDir()
			t.Setenv("PIDS", pids)
			prog := script(t, `[ "$VIP_REASON" = 1 ] && exit 0
`+tt.body+"\n")
			var rep reports
			// Long enough for a shell to start and write its child's
			// pid on a loaded machine.
			const timeout = 1500 * time.Millisecond
			r := NewRunner(context.Background(), Config{Program: prog, Timeout: timeout, KillGrace: 200 * time.Millisecond, Report: rep.add})
			defer r.Close()
			start := time.Now()
			r.Enqueue(change(addrA, 0))
			r.Enqueue(change(addrA, 1))
			labtest.Eventually(t, 10*time.Second, func() (bool, string) { return r.idle(), "the runs have not ended" })
			took := time.Since(start)
			if took > timeout+2*time.Second {
				t.Errorf("the runs took %v, want about the timeout %v (plus the grace)", took, timeout)
			}
			evs := rep.all()
			if len(evs) != 1 || !strings.Contains(evs[0].Message, "ran past its timeout of 1.5s") {
				t.Fatalf("got reports %+v, want one saying the hook ran past its timeout", evs)
			}
			b, err := os.ReadFile(filepath.Join(pids, "0"))
			if err != nil {
				t.Fatalf("the hook wrote no child pid: %v", err)
			}
			child, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			labtest.Eventually(t, 2*time.Second, func() (bool, string) {
				return gone(child), fmt.Sprintf("the hook's child %d still runs", child)
			})
			_ = syscall.Kill(child, syscall.SIGKILL) // whatever happened, leave nothing behind
		})
	}
}

// TestEnqueueNeverWaits gives a hook that takes 100 ms far more changes
// than its queue holds: Enqueue returns at once, the oldest not yet run
// are dropped and reported, and the newest run, in order.
func TestEnqueueNeverWaits(t *testing.T) {
	out := filepath.Join(t.TempDir(), "calls")
	prog := script(t, `echo "$VIP_REASON" >> "`+out+`"; sleep 0.1
`)
	var rep reports
	const queue, n = 8, 500
	r := NewRunner(context.Background(), Config{Program: prog, Queue: queue, Report: rep.add})
	defer r.Close()
	start := time.Now()
	for i := range n {
		r.Enqueue(change(addrA, i))
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("enqueueing %d changes took %v, want no wait (well under 100ms)", n, took)
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := logLines(t, out)
		return r.idle() && len(got) > 0 && got[len(got)-1] == strconv.Itoa(n-1), fmt.Sprintf("calls so far %v", got)
	})
	got := logLines(t, out)
	dropped := 0
	for _, e := range rep.all() {
		if e.Kind != event.HookFailed || !strings.Contains(e.Message, "dropped") {
			t.Errorf("got report %+v, want only drops", e)
		}
		dropped += e.Count
	}
	if len(got)+dropped != n {
		t.Errorf("%d calls and %d dropped, want %d in all", len(got), dropped, n)
	}
	if len(got) > queue+2 {
		t.Errorf("%d calls, want at most the queue (%d) and the one or two running", len(got), queue)
	}
	for i := 1; i < len(got); i++ {
		a, _ := strconv.Atoi(got[i-1])
		b, _ := strconv.Atoi(got[i])
		if b <= a {
			t.Errorf("calls out of order: %v", got)
			break
		}
	}
}

// TestCloseKillsRunningHooks stops a runner while a hook sleeps: Close
// returns once the hook's group is killed, well before the hook's end.
func TestCloseKillsRunningHooks(t *testing.T) {
	pids := t.TempDir()
	prog := script(t, `echo $$ > "`+pids+`/pid"; sleep 60
`)
	r := NewRunner(context.Background(), Config{Program: prog, Timeout: time.Minute, KillGrace: 200 * time.Millisecond})
	r.Enqueue(change(addrA, 0))
	r.Enqueue(change(addrA, 1))
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(pids, "pid"))
		return err == nil, "the hook has not started"
	})
	start := time.Now()
	r.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v, want the hook killed at once", took)
	}
	b, _ := os.ReadFile(filepath.Join(pids, "pid"))
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid == 0 || !gone(pid) {
		t.Errorf("the hook %s still runs after Close", b)
	}
	r.Enqueue(change(addrA, 2)) // after Close: ignored, no goroutine left
	if !r.idle() {
		t.Error("a change enqueued after Close waits to run")
	}
}

// TestFollow feeds events to Follow: the changes reach the hook in order,
// and missed events are reported.
func TestFollow(t *testing.T) {
	out := filepath.Join(t.TempDir(), "calls")
	prog := script(t, `echo "$VIP_EVENT:$VIP_OLD_STATE:$VIP_NEW_STATE:$VIP_PEER" >> "`+out+`"
`)
	var rep reports
	r := NewRunner(context.Background(), Config{Program: prog, Report: rep.add})
	defer r.Close()
	events := make(chan event.Event, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Follow(ctx, events, NewTracker("b", 50*time.Millisecond), r) }()
	defer func() { cancel(); <-done }()
	now := time.Now()
	at := func(ms int) time.Time { return now.Add(time.Duration(ms) * time.Millisecond) }
	events <- event.Event{Time: at(0), Kind: event.Standby, Addr: addrA, To: event.StateStandby, Message: "registered as a standby: takes the address if its owner's lease expires"}
	events <- event.Event{Time: at(1), Kind: event.Claim, Addr: addrA, Message: "claimed"}
	events <- event.Event{Time: at(2), Kind: event.Standby, Addr: addrA, To: event.StateOwner, Peer: "a", Message: "took the address as a standby: the lease of its owner a expired"}
	events <- event.Event{Time: at(3), Kind: event.Missed, Count: 3}
	events <- event.Event{Time: at(4), Kind: event.Release, Addr: addrA, Message: "released"}
	want := []string{"standby:none:standby:", "standby:standby:owner:a", "release:owner:none:"}
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		got := logLines(t, out)
		return slices.Equal(got, want), fmt.Sprintf("got calls %v, want %v", got, want)
	})
	evs := rep.all()
	if len(evs) != 1 || evs[0].Count != 3 || !strings.Contains(evs[0].Message, "missed 3 events") {
		t.Errorf("got reports %+v, want one of 3 missed events", evs)
	}
}
