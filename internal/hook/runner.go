package hook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vipctl/vip/internal/event"
)

// The defaults of Config, in one place.
const (
	// DefaultTimeout is how long a hook may run before its process group
	// is killed.
	DefaultTimeout = 10 * time.Second
	// MaxTimeout bounds --on-change-timeout: a hook that needs longer
	// should start its work and return.
	MaxTimeout = 10 * time.Minute
	// DefaultQueue is how many changes of one address wait to run.
	DefaultQueue = 64
	// DefaultRunning is how many hooks run at once, all addresses
	// together.
	DefaultRunning = 4
	// DefaultKillGrace is how long a hook past its timeout has between
	// SIGTERM and SIGKILL.
	DefaultKillGrace = 2 * time.Second
	// outputTail is how much of a hook's output is kept for the log.
	outputTail = 4 << 10
	// pipeDelay is how long a hook that exited may leave its output open
	// (a child it left in the background) before the run ends anyway.
	pipeDelay = time.Second
)

// Config configures a Runner.
type Config struct {
	// Program is the path of the program to run, with no arguments and
	// no shell: a script with a #! line brings its own.
	Program string
	// Timeout bounds each run; zero takes DefaultTimeout.
	Timeout time.Duration
	// Queue bounds the changes of one address waiting to run, Running
	// the runs at once; zero takes DefaultQueue, DefaultRunning.
	Queue   int
	Running int
	// KillGrace is the time between SIGTERM and SIGKILL for a hook past
	// its timeout; zero takes DefaultKillGrace.
	KillGrace time.Duration
	// Report, if set, receives the hook-failed events. It must not
	// block (the engine's Notify does not).
	Report func(event.Event)
	Log    *slog.Logger
	// Group, if set, names an address's group (VIP_GROUP) as the agent
	// knows it when the change is enqueued; it must not block.
	Group func(netip.Addr) string
}

// Runner runs the program for each Change it is given: one at a time per
// address, in order, at most Config.Running at once. Close stops it.
type Runner struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	queues map[netip.Addr]*queue
	closed bool
}

// queue is one address's changes waiting to run; dropped counts those
// dropped from its front since the last run, and active says a goroutine
// is draining it.
type queue struct {
	changes []Change
	dropped int
	active  bool
}

// NewRunner returns a Runner, whose runs end when ctx does or Close is
// called.
func NewRunner(ctx context.Context, cfg Config) *Runner {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Running <= 0 {
		cfg.Running = DefaultRunning
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Report == nil {
		cfg.Report = func(event.Event) {}
	}
	ctx, cancel := context.WithCancel(ctx)
	return &Runner{cfg: cfg, ctx: ctx, cancel: cancel, slots: make(chan struct{}, cfg.Running), queues: map[netip.Addr]*queue{}}
}

// Enqueue adds c behind the changes of its address not yet run, and never
// waits: on a full queue the oldest of them is dropped, counted and said
// so once the next one runs.
func (r *Runner) Enqueue(c Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	q := r.queues[c.Addr]
	if q == nil {
		q = &queue{}
		r.queues[c.Addr] = q
	}
	if len(q.changes) >= r.cfg.Queue {
		q.changes[0] = Change{}
		q.changes = q.changes[1:]
		q.dropped++
	}
	q.changes = append(q.changes, c)
	if !q.active {
		q.active = true
		r.wg.Add(1)
		go r.drain(c.Addr)
	}
}

// Close kills the hooks running (their whole process groups), forgets the
// changes waiting, and returns once every run has ended.
func (r *Runner) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	waiting := 0
	for _, q := range r.queues {
		waiting += len(q.changes)
	}
	clear(r.queues)
	if waiting > 0 {
		r.cfg.Log.Warn("hooks not run: the agent is stopping", "changes", waiting)
	}
}

// drain runs the changes of addr in order until none is left.
func (r *Runner) drain(addr netip.Addr) {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		q := r.queues[addr]
		if len(q.changes) == 0 || r.ctx.Err() != nil {
			q.active = false
			if len(q.changes) == 0 {
				delete(r.queues, addr)
			}
			r.mu.Unlock()
			return
		}
		c, dropped := q.changes[0], q.dropped
		q.changes[0] = Change{}
		q.changes, q.dropped = q.changes[1:], 0
		r.mu.Unlock()
		if dropped > 0 {
			r.dropped(c, dropped)
		}
		select {
		case r.slots <- struct{}{}:
		case <-r.ctx.Done():
			continue
		}
		r.run(c)
		<-r.slots
	}
}

// dropped says that n changes of c's address were dropped before c.
func (r *Runner) dropped(c Change, n int) {
	msg := fmt.Sprintf("%d changes dropped, the oldest first: more came than the hook ran (at most %d wait per address); the next runs for %s", n, r.cfg.Queue, c.Event)
	r.cfg.Log.Warn("hook changes dropped", "addr", c.Addr, "dropped", n)
	r.cfg.Report(event.Event{Kind: event.HookFailed, Addr: c.Addr, Interface: c.Interface, State: string(c.New), Count: n, Message: msg})
}

// result is how a run ended.
type result struct {
	err      error // from Start or Wait
	timedOut bool
	stopped  bool // the runner was closed
	took     time.Duration
	output   string
}

// run runs the program for c, and logs (and reports a failure of) the run.
func (r *Runner) run(c Change) {
	res := r.exec(c)
	attrs := []any{"program", r.cfg.Program, "event", c.Event, "addr", c.Addr, "old_state", c.Old, "new_state", c.New,
		"took", res.took.Round(time.Millisecond), "output", res.output}
	if res.err == nil && !res.timedOut {
		r.cfg.Log.Info("hook ran", append(attrs, "exit", 0)...)
		return
	}
	how := describe(res, r.cfg.Timeout)
	if res.stopped {
		r.cfg.Log.Warn("hook killed: the agent is stopping", append(attrs, "how", how)...)
		return
	}
	r.cfg.Log.Warn("hook failed", append(attrs, "how", how)...)
	msg := fmt.Sprintf("hook %s for %s (%s to %s) %s; not retried", filepath.Base(r.cfg.Program), c.Event, c.Old, c.New, how)
	if last := lastLine(res.output); last != "" {
		msg += "; its last line: " + last
	}
	r.cfg.Report(event.Event{Kind: event.HookFailed, Addr: c.Addr, Interface: c.Interface, State: string(c.New), Message: msg})
}

// exec runs the program for c in a process group of its own, killed whole
// at the timeout or when the runner stops.
func (r *Runner) exec(c Change) result {
	out := &tail{max: outputTail}
	cmd := exec.Command(r.cfg.Program)
	cmd.Env = append(os.Environ(), c.Env()...)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = pipeDelay
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{err: fmt.Errorf("could not start: %w", err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(r.cfg.Timeout)
	defer timer.Stop()
	var res result
	select {
	case res.err = <-done:
	case <-timer.C:
		res.timedOut = true
		res.err = r.kill(cmd.Process.Pid, done)
	case <-r.ctx.Done():
		res.stopped = true
		res.err = r.kill(cmd.Process.Pid, done)
	}
	res.took = time.Since(start)
	res.output = out.String()
	if errors.Is(res.err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		// It exited 0 and left a child holding its output: a success.
		res.err = nil
	}
	return res
}

// kill ends the process group pgid: SIGTERM, then SIGKILL after the grace
// or once its leader exited (what it left behind goes too), and returns
// the leader's end from done.
func (r *Runner) kill(pgid int, done <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(r.cfg.KillGrace)
	defer grace.Stop()
	var err error
	select {
	case err = <-done:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	case <-grace.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err = <-done
	}
	return err
}

// describe says in words how a failed run ended.
func describe(res result, timeout time.Duration) string {
	var exit *exec.ExitError
	switch {
	case res.timedOut:
		return fmt.Sprintf("ran past its timeout of %v and was killed with its process group", timeout)
	case res.stopped:
		return "was killed with its process group"
	case errors.As(res.err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("was killed by signal %v after %v", ws.Signal(), res.took.Round(time.Millisecond))
		}
		return fmt.Sprintf("exited with status %d after %v", exit.ExitCode(), res.took.Round(time.Millisecond))
	}
	return res.err.Error()
}

// lastLine is the last line of out that is not blank.
func lastLine(out string) string {
	out = strings.TrimRight(out, " \t\r\n")
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	return strings.TrimSpace(out)
}

// tail keeps the last max bytes written to it. Its lock is for a copy
// that outlives Wait (a child left holding the output past pipeDelay).
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) > t.max {
		return string(t.b[len(t.b)-t.max:])
	}
	return string(t.b)
}
