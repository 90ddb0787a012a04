package labtest

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vipctl/vip/internal/lab"
)

// killAfter is how long Stop waits after its first signal before it kills.
const killAfter = 5 * time.Second

// Proc is a program running in the background inside a lab host, started by
// Start. Its standard output and standard error are collected together, line
// by line.
type Proc struct {
	name string
	cmd  *exec.Cmd
	out  lineBuffer
	done chan struct{} // closed once the program has exited and its output is collected
	err  error         // from cmd.Wait; read only after done is closed
}

// Start runs name with args inside host h and returns at once. The program
// gets a process group of its own; Stop and the test's cleanup signal the
// whole group, so children it started go with it. If the test ends with the
// program still running, it is killed, and if the test failed, its output is
// logged.
func Start(t TB, h *lab.Host, name string, args ...string) *Proc {
	t.Helper()
	p := &Proc{
		name: name,
		cmd:  h.Command(context.Background(), name, args...),
		done: make(chan struct{}),
	}
	p.out.changed = make(chan struct{})
	// One writer for both streams: exec then shares a single pipe between
	// them and the lines keep the order the program wrote them in.
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A grandchild that left the process group could hold the pipe open and
	// keep Wait from returning; give up on the output after a second.
	p.cmd.WaitDelay = time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s on %s: %v", name, h.Name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.out.close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			p.signal(syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %s on %s:\n%s", name, h.Name, p.Output())
		}
	})
	return p
}

// Output returns everything the program has written so far.
func (p *Proc) Output() string {
	return p.out.String()
}

// WaitOutput waits until the program writes a line containing substr and
// returns that line. Lines written before the call count too: it returns the
// first matching line the program ever wrote. The test fails if no such line
// comes within timeout or the program exits first.
func (p *Proc) WaitOutput(t TB, substr string, timeout time.Duration) string {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		line, ok, changed := p.out.find(substr)
		if ok {
			return line
		}
		select {
		case <-changed:
		case <-p.done:
			if line, ok, _ := p.out.find(substr); ok {
				return line
			}
			t.Fatalf("%s exited (%v) without writing %q; output:\n%s", p.name, p.err, substr, p.Output())
		case <-timer.C:
			t.Fatalf("%s wrote no line with %q within %v; output:\n%s", p.name, substr, timeout, p.Output())
		}
	}
}

// Wait waits for the program to exit on its own and returns its exit code, or
// -1 if a signal ended it. The test fails if it is still running after
// timeout.
func (p *Proc) Wait(t TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.exitCode(t)
	case <-time.After(timeout):
		t.Fatalf("%s still running after %v; output:\n%s", p.name, timeout, p.Output())
		return 0
	}
}

// Stop sends SIGTERM to the program, kills it if it has not exited five
// seconds later, and returns its exit code, or -1 if a signal ended it. If the
// program had already exited, Stop just returns its exit code.
func (p *Proc) Stop(t TB) int {
	t.Helper()
	return p.stop(t, syscall.SIGTERM)
}

// StopOrKill sends SIGTERM and, if the program is still there after
// grace, SIGKILL, for a program whose slow shutdown is not what the test
// is about (it says so in the log, and the test goes on); it returns the
// exit code.
func (p *Proc) StopOrKill(t TB, grace time.Duration) int {
	t.Helper()
	if !p.exited() {
		p.signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			t.Logf("%s still running %v after SIGTERM: killed", p.name, grace)
			p.signal(syscall.SIGKILL)
			<-p.done
		}
	}
	return p.exitCode(t)
}

// Kill sends SIGKILL to the program's process group, as a crash or `kill -9`
// would end it, waits for it to exit and returns its exit code (-1).
func (p *Proc) Kill(t TB) int {
	t.Helper()
	return p.stop(t, syscall.SIGKILL)
}

// Exited reports whether the program has exited, so that a wait for it to
// become ready can end at once when it never will.
func (p *Proc) Exited() bool {
	return p.exited()
}

func (p *Proc) stop(t TB, sig syscall.Signal) int {
	t.Helper()
	if !p.exited() {
		p.signal(sig)
		select {
		case <-p.done:
		case <-time.After(killAfter):
			t.Errorf("%s ignored %v for %v; killing it", p.name, sig, killAfter)
			p.signal(syscall.SIGKILL)
			<-p.done
		}
	}
	return p.exitCode(t)
}

func (p *Proc) exitCode(t TB) int {
	t.Helper()
	var exitErr *exec.ExitError
	if p.err != nil && !errors.As(p.err, &exitErr) && !errors.Is(p.err, exec.ErrWaitDelay) {
		t.Errorf("wait for %s: %v", p.name, p.err)
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *Proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the program's process group. `ip netns exec` execs the
// program in place, so the group is the program's own.
func (p *Proc) signal(sig syscall.Signal) {
	// An error means the group is gone already, which is what was wanted.
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// lineBuffer collects a program's output and lets a reader wait for lines.
type lineBuffer struct {
	mu      sync.Mutex
	lines   []string
	partial []byte        // the last line, while it has no newline yet
	changed chan struct{} // closed, and replaced, whenever a line completes
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial = append(b.partial, p...)
	completed := false
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		b.lines = append(b.lines, string(b.partial[:i]))
		b.partial = b.partial[i+1:]
		completed = true
	}
	if completed {
		b.notify()
	}
	return len(p), nil
}

// close turns a last line without a newline into a line.
func (b *lineBuffer) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.partial) > 0 {
		b.lines = append(b.lines, string(b.partial))
		b.partial = nil
	}
	b.notify()
}

func (b *lineBuffer) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// find returns the first line containing substr, or, if there is none yet, a
// channel that is closed when another line completes.
func (b *lineBuffer) find(substr string) (line string, ok bool, changed <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		if strings.Contains(l, substr) {
			return l, true, nil
		}
	}
	return "", false, b.changed
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	for _, l := range b.lines {
		s.WriteString(l)
		s.WriteByte('\n')
	}
	s.Write(b.partial)
	return s.String()
}

// Pid returns the program's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }
