package e2e_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// TestExitUnreachableInTheLab makes the exit 4 of the two commands that
// need root or a terminal for it, which cmd's TestExitCases cannot: an
// agent whose store does not answer, and a view in a terminal with no
// agent to watch (--no-autostart). Each exits 4 and ends with one sentence
// that names the fix.
func TestExitUnreachableInTheLab(t *testing.T) {
	t.Parallel()
	l := labtest.New(t, lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")})
	b := l.Host("b")
	dir := sockDir(t)

	// Port 1 of the host's own address: refused at once, as a store that
	// is down.
	agent := labtest.Start(t, b, vipBin, "agent", "--socket", filepath.Join(dir, "agent.sock"), "--store", "etcd://192.0.2.2:1", "--node", "b")
	code := agent.Wait(t, 30*time.Second)
	if out := agent.Output(); code != 4 || !strings.Contains(out, "192.0.2.2:1") {
		t.Errorf("vip agent with a store that does not answer: exit %d, want 4 naming the store:\n%s", code, out)
	} else if why := labtest.CheckLastLine(out); why != "" {
		t.Errorf("vip agent with a store that does not answer: its message %s:\n%s", why, out)
	}

	labtest.RequireTool(t, "tmux")
	sock := filepath.Join(dir, "none.sock")
	tm := startTerm(t, b, 300, 10, "watch", "--no-autostart", "--socket", sock)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		done, _ := tm.exited()
		return done, fmt.Sprintf("vip watch with no agent is still running; the screen:\n%s", tm.screen())
	})
	_, status := tm.exited()
	var last string
	for _, line := range strings.Split(tm.history(), "\n") {
		if line = strings.TrimRight(line, " "); strings.HasPrefix(line, "vip: ") {
			last = line
		}
	}
	if status != "4" || !strings.Contains(last, sock) {
		t.Errorf("vip watch --no-autostart with no agent: exit status %s, message %q; want 4 naming the socket", status, last)
	} else if why := labtest.CheckSentence(last); why != "" {
		t.Errorf("vip watch --no-autostart with no agent: the message %s: %q", why, last)
	}
}
