package agent

import (
	"context"
	"net/netip"
	"os"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/hook"
)

// HookConfig runs a program on each change of state of the agent's claims
// (vip agent --on-change); see package hook.
type HookConfig struct {
	// Program is the path of the program; empty for no hooks.
	Program string
	// Timeout bounds each run; zero takes hook.DefaultTimeout.
	Timeout time.Duration
}

// hookSettle is how long a guarded agent's claim or release waits for the
// fleet's event saying why (a standby took over, a move): a standby's
// comes at once, a move's after one write to the store.
const hookSettle = 250 * time.Millisecond

// hookEvents buffers the hooks' subscription: the reader only enqueues,
// so it falls behind only when the engine publishes thousands at once.
const hookEvents = 4096

// startHooks subscribes the hooks to the engine's events, before the
// re-adoption so that it runs them too. The returned stop ends them (the
// runs under way are killed) and waits.
func (d *daemon) startHooks(ctx context.Context) (stop func()) {
	node, settle := "", time.Duration(0)
	if d.member != nil {
		node, settle = d.member.Node(), hookSettle
	} else if h, err := os.Hostname(); err == nil {
		node = h
	}
	eng := d.rt.Engine
	log := d.log.With("component", "hook")
	r := hook.NewRunner(ctx, hook.Config{Program: d.cfg.Hooks.Program, Timeout: d.cfg.Hooks.Timeout, Report: eng.Notify, Log: log,
		Group: d.groupMemo()})
	events, unsubscribe := eng.Subscribe(hookEvents)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		hook.Follow(fctx, events, hook.NewTracker(node, settle), r)
	}()
	log.Info("running a hook on each change of state of the claims", "program", d.cfg.Hooks.Program, "timeout", d.cfg.Hooks.Timeout, "node", node)
	return func() {
		cancel()
		<-done
		unsubscribe()
		r.Close()
	}
}

// groupMemo names an address's group as the agent's status says, or as it
// last said while the address was held (a release's hook still names the
// group it left). Called from the hooks' one reader alone.
func (d *daemon) groupMemo() func(netip.Addr) string {
	last := map[netip.Addr]string{}
	return func(a netip.Addr) string {
		var st []announce.Status
		if d.member != nil {
			st = d.member.Status(a)
		} else {
			st = d.rt.Engine.Status(a)
		}
		for _, s := range st {
			if s.Options.Group != "" {
				last[a] = s.Options.Group
				return s.Options.Group
			}
		}
		return last[a]
	}
}
