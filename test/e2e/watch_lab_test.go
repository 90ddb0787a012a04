package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// tmuxCount numbers the tmux servers of this process.
var tmuxCount atomic.Uint64

// term is a terminal that a tmux server of its own runs a program in,
// inside a lab host: the test types with send-keys and reads the screen
// with capture-pane.
type term struct {
	t      *testing.T
	server string // tmux -L name, unique to the test
	status string // file the program's exit status is written to
}

// startTerm runs vip with args in a cols×rows terminal on h.
func startTerm(t *testing.T, h *lab.Host, cols, rows int, args ...string) *term {
	t.Helper()
	labtest.RequireTool(t, "tmux")
	dir := t.TempDir()
	tm := &term{t: t, server: "vipw" + strconv.Itoa(os.Getpid()) + "x" + strconv.FormatUint(tmuxCount.Add(1), 10),
		status: filepath.Join(dir, "status")}
	// No status line, so the program has every row; the pane stays after
	// the program exits, so its last screen can be read.
	conf := filepath.Join(dir, "tmux.conf")
	if err := os.WriteFile(conf, []byte("set -g status off\nset -g remain-on-exit on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last screen of the terminal:\n%s", tm.screen())
		}
		_ = exec.Command("tmux", "-L", tm.server, "kill-server").Run()
	})
	// A shell waits for the program and writes down its exit status:
	// tmux itself may leave a dead pane's process unreaped for a while.
	words := append([]string{"ip", "netns", "exec", h.Netns, vipBin}, args...)
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	cmdline := strings.Join(words, " ") + "; echo $? >" + shellQuote(tm.status)
	tm.tmux("-f", conf, "new-session", "-d", "-s", "vip", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows), cmdline)
	return tm
}

func (tm *term) tmux(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.server}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// screen is what the terminal shows now.
func (tm *term) screen() string {
	out, _ := exec.Command("tmux", "-L", tm.server, "capture-pane", "-p", "-t", "vip").CombinedOutput()
	return string(out)
}

// history is the screen with the lines scrolled off above it: a program
// that exits leaves its last words there once tmux marks the pane dead.
func (tm *term) history() string {
	out, _ := exec.Command("tmux", "-L", tm.server, "capture-pane", "-p", "-S", "-200", "-t", "vip").CombinedOutput()
	return string(out)
}

// keys presses keys, named as tmux names them (Enter, Tab, y).
func (tm *term) keys(keys ...string) {
	tm.t.Helper()
	tm.tmux(append([]string{"send-keys", "-t", "vip"}, keys...)...)
}

// typeText types s as it is.
func (tm *term) typeText(s string) {
	tm.t.Helper()
	tm.tmux("send-keys", "-t", "vip", "-l", s)
}

// waitFor waits until cond holds for the screen.
func (tm *term) waitFor(why string, timeout time.Duration, cond func(screen string) bool) {
	tm.t.Helper()
	labtest.Eventually(tm.t, timeout, func() (bool, string) {
		s := tm.screen()
		return cond(s), fmt.Sprintf("waiting for %s; the screen:\n%s", why, s)
	})
}

// exited reports whether the program has exited, and its exit status.
func (tm *term) exited() (bool, string) {
	b, err := os.ReadFile(tm.status)
	if err != nil || !strings.HasSuffix(string(b), "\n") {
		return false, ""
	}
	return true, strings.TrimSpace(string(b))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// pane returns the lines of the screen from the title that starts with
// from up to the next title, to.
func pane(screen, from, to string) string {
	i := strings.Index(screen, from)
	if i < 0 {
		return ""
	}
	s := screen[i:]
	if j := strings.Index(s, to); j >= 0 {
		s = s[:j]
	}
	return s
}

func claimsPane(s string) string   { return pane(s, "Claims (", "Who-has requests") }
func whoHasPane(s string) string   { return pane(s, "Who-has requests", "Competing claimers") }
func claimersPane(s string) string { return pane(s, "Competing claimers", "Events (") }

// hasRow reports whether a line of text holds every one of words.
func hasRow(text string, words ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestWatchSteersClaims drives the real binary's full-screen view in a
// terminal: a claim typed at the prompt goes live, a client's arping shows
// in the traffic pane, g sends a new gratuitous burst that a third host
// captures, a rival's claim shows as a competing claimer, r then y ends the
// answers, the view reconnects when the agent comes back, and q leaves the
// claims with the agent.
func TestWatchSteersClaims(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "tmux")
	labtest.RequireTool(t, "arping")
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
		lab.HostConfig{Name: "rival", IPv4: pfx("192.0.2.4/24")},
		lab.HostConfig{Name: "watch", IPv4: pfx("192.0.2.9/24")},
	)
	b, client, rivalHost, watch := l.Host("b"), l.Host("client"), l.Host("rival"), l.Host("watch")
	sock := filepath.Join(sockDir(t), "b.sock")
	agent := startAgent(t, b, sock)
	capture := labtest.Capture(t, watch, "eth0", "arp")

	tm := startTerm(t, b, 120, 40, "watch", "--socket", sock)
	tm.waitFor("the view of the agent", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "Claims (0)") && strings.Contains(s, "on "+sock)
	})

	// c, an address and an interface, Enter: the claim goes live.
	tm.keys("c")
	tm.waitFor("the claim prompt", 5*time.Second, func(s string) bool { return strings.Contains(s, "enter ok") })
	tm.typeText("192.0.2.10 eth0")
	tm.keys("Enter")
	tm.waitFor("192.0.2.10 on eth0 in the claims pane", 10*time.Second, func(s string) bool {
		return hasRow(claimsPane(s), "192.0.2.10", "eth0")
	})
	if st := status(t, b, sock); len(st.Claims) != 1 || st.Claims[0].Addr != "192.0.2.10" || st.Claims[0].Interface != "eth0" {
		t.Fatalf("status after the claim typed in the view: got %+v, want 192.0.2.10 on eth0", st.Claims)
	}
	labtest.Eventually(t, 15*time.Second, func() (bool, string) {
		st := status(t, b, sock)
		return st.Claims[0].State == "holding", "waiting for the first burst to end: " + st.Claims[0].State
	})

	// A client asks for the address: it is answered, and the view shows
	// who asked.
	out, code := arping(t, client, "-c", "3", "-w", "5", "-I", "eth0", "192.0.2.10")
	if got := replyMACs(out); code != 0 || len(got) != 3 || got[0] != mac(b, "eth0") {
		t.Fatalf("arping 192.0.2.10: got exit %d, replies %v; want 3 from b's %s:\n%s", code, got, mac(b, "eth0"), out)
	}
	tm.waitFor("the client's requests in the traffic pane", 10*time.Second, func(s string) bool {
		return hasRow(whoHasPane(s), "192.0.2.10", "192.0.2.3")
	})

	// g: a new gratuitous burst, seen on the wire by a third host.
	t1 := time.Now()
	tm.keys("g")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		n := roundsAfter(capture.Snapshot(t), "192.0.2.10", t1)
		return n >= 3, fmt.Sprintf("gratuitous rounds for 192.0.2.10 after g: %d, want a new burst (3 or more)", n)
	})
	tm.waitFor("the refresh said", 5*time.Second, func(s string) bool { return strings.Contains(s, "refreshed 192.0.2.10") })

	// A rival claims the address too: it shows as a competing claimer.
	rival := claim(t, rivalHost, "192.0.2.10", "-i", "eth0")
	tm.waitFor("the rival in the competing claimers pane", 15*time.Second, func(s string) bool {
		return hasRow(claimersPane(s), "192.0.2.10", mac(rivalHost, "eth0"))
	})
	if code := rival.Stop(t); code != 0 {
		t.Fatalf("rival claim: exit %d:\n%s", code, rival.Output())
	}

	// r asks first; y releases, and the answers end.
	tm.keys("r")
	tm.waitFor("the release question", 5*time.Second, func(s string) bool { return strings.Contains(s, "release 192.0.2.10 on eth0?") })
	tm.keys("y")
	tm.waitFor("192.0.2.10 gone from the claims pane", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "released 192.0.2.10") && !hasRow(claimsPane(s), "192.0.2.10")
	})
	if st := status(t, b, sock); len(st.Claims) != 0 {
		t.Fatalf("status after r, y: got %+v, want no claims", st.Claims)
	}
	if out, code := arping(t, client, "-c", "2", "-w", "3", "-I", "eth0", "192.0.2.10"); code == 0 || len(replyMACs(out)) != 0 {
		t.Errorf("arping 192.0.2.10 after the release: got exit %d, replies %v; want none:\n%s", code, replyMACs(out), out)
	}

	// The agent goes away and comes back: the view says so, then follows
	// the new agent.
	agent.Stop(t)
	tm.waitFor("the agent reported gone", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "agent unreachable on "+sock+": reconnecting")
	})
	startAgent(t, b, sock)
	mustVip(t, b, sock, "claim", "192.0.2.11", "-i", "eth0")
	tm.waitFor("the new agent's claim", 15*time.Second, func(s string) bool {
		// The banner and the footer say "agent unreachable"; the event
		// log's note of the events not seen stays.
		return !strings.Contains(s, "agent unreachable") && hasRow(claimsPane(s), "192.0.2.11", "eth0")
	})

	// q closes the view and leaves the claim with the agent.
	tm.keys("q")
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		done, code := tm.exited()
		return done && code == "0", fmt.Sprintf("vip watch after q: exited %v, status %q; want exit status 0", done, code)
	})
	if st := status(t, b, sock); len(st.Claims) != 1 || st.Claims[0].Addr != "192.0.2.11" {
		t.Errorf("status after q: got %+v, want 192.0.2.11 still held", st.Claims)
	}
}

func pidRunning(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestWatchAutostartsAgent: with no agent, watch starts one; it stays while
// the view is open and exits once the view closes, holding nothing.
func TestWatchAutostartsAgent(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "tmux")
	l := labtest.New(t, lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")})
	b := l.Host("b")
	sock := filepath.Join(sockDir(t), "auto.sock")
	tm := startTerm(t, b, 80, 24, "watch", "--socket", sock)
	tm.waitFor("the view of a started agent", 15*time.Second, func(s string) bool { return strings.Contains(s, "Claims (0)") })
	st := status(t, b, sock)
	if !st.Agent.Autostarted {
		t.Fatalf("status: got %+v, want an autostarted agent", st.Agent)
	}
	t.Cleanup(func() { _ = syscall.Kill(st.Agent.PID, syscall.SIGTERM) })
	// The view's event stream keeps the agent, idle as it is, for longer
	// than its idle grace (2s).
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if !pidRunning(st.Agent.PID) {
			t.Fatal("the autostarted agent exited while the view was open")
		}
	}
	tm.keys("q")
	labtest.Eventually(t, 15*time.Second, func() (bool, string) {
		return !pidRunning(st.Agent.PID), fmt.Sprintf("autostarted agent pid %d still running after the view closed", st.Agent.PID)
	})
}

// TestForegroundClaimShowsTheView: vip claim --foreground in a terminal
// shows the live view of its own claims; q ends the process, and with it the
// claim.
func TestForegroundClaimShowsTheView(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
	)
	b, client := l.Host("b"), l.Host("client")
	tm := startTerm(t, b, 100, 30, "claim", "192.0.2.10", "-i", "eth0", "--foreground")
	tm.waitFor("the claim in the view", 10*time.Second, func(s string) bool {
		return hasRow(claimsPane(s), "192.0.2.10", "eth0")
	})
	out, code := arping(t, client, "-c", "2", "-w", "4", "-I", "eth0", "192.0.2.10")
	if code != 0 || len(replyMACs(out)) != 2 {
		t.Fatalf("arping while the view runs: exit %d:\n%s", code, out)
	}
	tm.waitFor("the client's requests in the traffic pane", 10*time.Second, func(s string) bool {
		return hasRow(whoHasPane(s), "192.0.2.10")
	})
	tm.keys("q")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		done, status := tm.exited()
		return done && status == "0", fmt.Sprintf("exited %v with %q; want 0", done, status)
	})
	out, code = arping(t, client, "-c", "2", "-w", "3", "-I", "eth0", "192.0.2.10")
	if code == 0 || len(replyMACs(out)) != 0 {
		t.Errorf("after quitting the foreground view: want the claim released, got replies %v", replyMACs(out))
	}
}
