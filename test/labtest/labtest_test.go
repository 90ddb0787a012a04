package labtest_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// fakeTB records a fatal failure instead of ending the test.
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
}

func TestEventually(t *testing.T) {
	t.Run("met", func(t *testing.T) {
		n := 0
		labtest.Eventually(t, time.Second, func() (bool, string) {
			n++
			return n == 3, "not yet"
		})
		if n != 3 {
			t.Errorf("got %d calls, want 3", n)
		}
	})
	t.Run("not met", func(t *testing.T) {
		f := &fakeTB{TB: t}
		n := 0
		labtest.Eventually(f, 50*time.Millisecond, func() (bool, string) {
			n++
			return false, fmt.Sprintf("call %d", n)
		})
		if want := fmt.Sprintf("call %d", n); !strings.HasSuffix(f.fatal, want) {
			t.Errorf("got failure %q, want one ending in the last reason %q", f.fatal, want)
		}
	})
}

// skipTB records a skip and ends its goroutine, as a test's Skip does, and
// records a fatal failure without ending it, as fakeTB does.
type skipTB struct {
	fakeTB
	skipped string
}

func (f *skipTB) Skip(args ...any) {
	f.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

// TestSkipShort: in short mode (make unit) every way into a lab skips the
// test, under CI=true too, rather than fail for want of root or a tool;
// outside short mode SkipShort lets the test go on.
func TestSkipShort(t *testing.T) {
	t.Setenv("CI", "true")
	call := func(fn func(labtest.TB)) *skipTB {
		f := &skipTB{fakeTB: fakeTB{TB: t}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			fn(f)
		}()
		<-done
		return f
	}
	if !testing.Short() {
		if f := call(func(tb labtest.TB) { labtest.SkipShort(tb) }); f.skipped != "" || f.fatal != "" {
			t.Errorf("SkipShort outside short mode: skipped %q, failed %q; want neither", f.skipped, f.fatal)
		}
		return
	}
	for _, tt := range []struct {
		name string
		fn   func(labtest.TB)
	}{
		{"SkipShort", func(tb labtest.TB) { labtest.SkipShort(tb) }},
		{"New", func(tb labtest.TB) { labtest.New(tb, lab.HostConfig{Name: "a"}) }},
		{"RequireRoot", func(tb labtest.TB) { labtest.RequireRoot(tb, "this") }},
		{"RequireTool", func(tb labtest.TB) { labtest.RequireTool(tb, "vip-no-such-tool") }},
	} {
		f := call(tt.fn)
		if f.fatal != "" || !strings.Contains(f.skipped, "short mode") {
			t.Errorf("%s in short mode under CI=true: skipped %q, failed %q; want a skip that names short mode", tt.name, f.skipped, f.fatal)
		}
	}
}

func host(t *testing.T) *lab.Host {
	t.Helper()
	return labtest.New(t, lab.HostConfig{Name: "a"}).Host("a")
}

// pidAlive reports whether a process with the pid exists and is no zombie.
func pidAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

func pidFrom(t *testing.T, line string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(line[strings.LastIndex(line, " ")+1:]))
	if err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return pid
}

func TestStopEndsProgramAndChildren(t *testing.T) {
	h := host(t)
	p := labtest.Start(t, h, "sh", "-c", "sleep 30 & echo child $!; echo self $$; wait")
	// ip netns exec execs the program in place: $$ is the process Start made.
	self := pidFrom(t, p.WaitOutput(t, "self ", 2*time.Second))
	child := pidFrom(t, p.WaitOutput(t, "child ", 2*time.Second))
	if got := p.Stop(t); got != -1 {
		t.Errorf("stop: got exit code %d, want -1 (ended by SIGTERM)", got)
	}
	labtest.Eventually(t, 2*time.Second, func() (bool, string) {
		for _, pid := range []int{self, child} {
			if pidAlive(pid) {
				return false, fmt.Sprintf("process %d still running", pid)
			}
		}
		return true, ""
	})
}

func TestStopReturnsExitCode(t *testing.T) {
	h := host(t)
	p := labtest.Start(t, h, "sh", "-c", `trap "exit 3" TERM; echo ready; while :; do sleep 0.05; done`)
	p.WaitOutput(t, "ready", 2*time.Second)
	if got := p.Stop(t); got != 3 {
		t.Errorf("stop: got exit code %d, want 3; output:\n%s", got, p.Output())
	}
}

func TestWaitAndOutput(t *testing.T) {
	h := host(t)
	p := labtest.Start(t, h, "sh", "-c", "ip -br link show eth0; echo no newline >&2; printf last; exit 7")
	if got := p.Wait(t, 2*time.Second); got != 7 {
		t.Errorf("wait: got exit code %d, want 7", got)
	}
	// The program has exited; its lines are still found, a last line
	// without a newline included.
	if line := p.WaitOutput(t, "eth0", time.Second); !strings.Contains(line, "UP") {
		t.Errorf("got line %q, want eth0 up inside the host", line)
	}
	p.WaitOutput(t, "last", time.Second)
	if got, want := p.Stop(t), 7; got != want {
		t.Errorf("stop after exit: got %d, want %d", got, want)
	}
	if out := p.Output(); !strings.Contains(out, "no newline\nlast") {
		t.Errorf("got output %q, want stderr and stdout together", out)
	}
}
