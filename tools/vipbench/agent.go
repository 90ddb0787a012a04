package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// vip runs a vip client command on b against the agent.
func (b *bench) vip(ctx context.Context, args ...string) (string, error) {
	cmd := b.b.Command(ctx, b.vipBin, append(args, "--socket", b.agent.sock)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("vip %s: %w: %s", strings.Join(args, " "), err, tail(out, 10))
	}
	return string(out), nil
}

// agent is a vip agent running on lab host b.
type agent struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	sock   string
	client *api.Client
	pid    int
	done   chan struct{}
	err    error // from Wait, once done is closed
}

// startAgent starts an agent answering with v and claims both addresses.
func (b *bench) startAgent(ctx context.Context, v vipResponder) error {
	return b.startAgentAs(ctx, v, v.step)
}

// startAgentAs is startAgent with the agent's socket, and so its state
// file, named after name: each agent has its own.
func (b *bench) startAgentAs(ctx context.Context, v vipResponder, name string) error {
	sock := filepath.Join(b.dir, strings.ReplaceAll(name, " ", "-")+".sock")
	a := &agent{out: &lockedBuffer{}, sock: sock, client: api.NewClient(sock), done: make(chan struct{})}
	// ip netns exec execs vip in place: the process started is vip.
	args := append([]string{"agent", "--socket", sock, "--log-level", "warn"}, v.flags...)
	args = append(args, b.o.agentFlags...)
	a.cmd = b.b.Command(context.Background(), b.vipBin, args...)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	a.cmd.WaitDelay = time.Second
	if err := a.cmd.Start(); err != nil {
		return fmt.Errorf("start vip agent: %w", err)
	}
	b.agent = a
	go func() { a.err = a.cmd.Wait(); close(a.done) }()
	for {
		st, err := a.client.Status(ctx)
		if err == nil {
			a.pid = st.Agent.PID
			break
		}
		if err := a.alive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the agent did not answer on %s: %w; its output:\n%s", sock, ctx.Err(), a.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if a.pid != a.cmd.Process.Pid {
		b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("the agent reports pid %d, the driver started %d; measured %d", a.pid, a.cmd.Process.Pid, a.pid))
	}
	if _, err := b.vip(ctx, "claim", vipAddr[v4].String(), vipAddr[v6].String(), "-i", "eth0"); err != nil {
		return err
	}
	// The capture of who-has traffic opens beside the claim; its counters
	// go into the load table, so wait for it.
	for a.capture(ctx) == nil {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the agent reports no capture on eth0: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return b.waitResponder(ctx, v)
}

// alive returns an error with the agent's output if it has exited.
func (a *agent) alive() error {
	select {
	case <-a.done:
		return fmt.Errorf("the vip agent exited (%v); its output:\n%s", a.err, a.out.String())
	default:
		return nil
	}
}

// capture returns the agent's capture counters on eth0, or nil.
func (a *agent) capture(ctx context.Context) *api.CaptureStat {
	st, err := a.client.Status(ctx)
	if err != nil {
		return nil
	}
	for _, c := range st.Captures {
		if c.Interface == "eth0" {
			return &c
		}
	}
	return nil
}

// stop ends the agent: SIGTERM, and SIGKILL if it is still there after 10 s.
func (a *agent) stop() error {
	if a.cmd.Process == nil {
		return nil
	}
	select {
	case <-a.done:
		return nil
	default:
	}
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-a.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.done
		return fmt.Errorf("the agent ignored SIGTERM for 10s and was killed")
	}
}

// lockedBuffer collects a process's output from two streams.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // enough to say what went wrong
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return tail(l.b.Bytes(), 40)
}
