package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/vipctl/vip/tools/loadgen"
)

// The agent is measured with each of its responders in turn, one agent
// after another on b: the eBPF program on tcx ingress (vip's default where
// the kernel allows it, and every vip step), the sockets (for machines
// without eBPF), and the program on XDP generic (the opt-in hook). Each
// agent is started with its responder forced, and status must say that it
// answers, so that a fallback is never measured for what it is not.

// vipResponder is one of the agent's responders, as the driver runs it.
type vipResponder struct {
	// name is the load table's responder; step its steps' prefix.
	name, step string
	flags      []string
	// want is what status says answers for the claims.
	want string
	// main runs every vip step against it; the others, the load runs.
	main bool
	// busy and tenK add the runs with a core busy and the 10,000 claims.
	busy, tenK bool
}

var vipResponders = []vipResponder{
	{name: "vip", step: "vip", flags: []string{"--responder", "ebpf", "--responder-hook", "tcx"}, want: "ebpf (tcx)", main: true, busy: true, tenK: true},
	{name: "vip, socket", step: "vip socket", flags: []string{"--responder", "socket"}, want: "socket", busy: true, tenK: true},
	{name: "vip, xdp-generic", step: "vip xdp-generic", flags: []string{"--responder", "ebpf", "--responder-hook", "xdp-generic"}, want: "ebpf (xdp-generic)"},
}

// busyRate is the rate of the runs with a core busy.
const busyRate = 20000

// busySuffix marks a run with a core busy, in step and responder names.
const busySuffix = ", a core busy"

func loadStep(prefix string, f family, rate int) string {
	return fmt.Sprintf("%s %s %s/s", prefix, f, fmtCount(rate))
}

// vipSteps names every step of v, for -run.
func (v vipResponder) vipSteps() []string {
	var names []string
	if v.main {
		for _, f := range families {
			names = append(names, fmt.Sprintf("%s %s %s/s for an address nobody holds", v.step, f, fmtCount(lossRate)))
		}
	}
	for _, f := range families {
		for _, rate := range rates {
			names = append(names, loadStep(v.step, f, rate))
		}
	}
	if v.busy {
		for _, f := range families {
			names = append(names, loadStep(v.step, f, busyRate)+busySuffix)
		}
	}
	if v.main {
		names = append(names, "vip idle with one claim", "claim to the wire")
	}
	if v.tenK {
		names = append(names, v.step+" 10,000 claims")
	}
	return names
}

// runResponders runs each responder's steps against an agent of its own.
func (b *bench) runResponders(ctx context.Context, vipErr, labErr error) {
	for _, v := range vipResponders {
		need := false
		for _, n := range v.vipSteps() {
			need = need || b.selected(n)
		}
		if need {
			b.runResponder(ctx, v, vipErr, labErr)
		}
	}
}

func (b *bench) runResponder(ctx context.Context, v vipResponder, vipErr, labErr error) {
	var agentErr error
	switch {
	case vipErr != nil:
		agentErr = fmt.Errorf("%w: vip was not built: %v", errSkipped, vipErr)
	case labErr != nil:
		agentErr = fmt.Errorf("%w: no lab: %v", errSkipped, labErr)
	default:
		if b.agent != nil {
			if err := b.agent.stop(); err != nil {
				b.logf("stop the agent: %v", err)
			}
			b.agent = nil
		}
		if err := b.step(ctx, v.step+" agent", 60*time.Second, func(ctx context.Context) error { return b.startAgent(ctx, v) }); err != nil {
			agentErr = fmt.Errorf("%w: the vip agent did not start: %v", errSkipped, err)
		}
	}
	vipStep := func(name string, timeout time.Duration, fn func(context.Context) error) {
		if !b.selected(name) {
			return
		}
		b.step(ctx, name, timeout, func(ctx context.Context) error {
			if agentErr != nil {
				return agentErr
			}
			if err := b.agent.alive(); err != nil {
				return err
			}
			return fn(ctx)
		})
	}
	if v.main {
		// Floods for addresses nobody holds first: the claims' gratuitous
		// windows run out meanwhile.
		for _, f := range families {
			vipStep(fmt.Sprintf("%s %s %s/s for an address nobody holds", v.step, f, fmtCount(lossRate)), b.unheldFor()+30*time.Second,
				func(ctx context.Context) error { return b.unheldRun(ctx, f) })
		}
	}
	for _, f := range families {
		for _, rate := range rates {
			vipStep(loadStep(v.step, f, rate), 3*b.duration(rate)+30*time.Second, func(ctx context.Context) error {
				return b.paired(ctx, v, f, func(ctx context.Context, responder string, target netip.Addr) error {
					return b.loadRun(ctx, responder, f, rate, target)
				})
			})
		}
	}
	if v.busy {
		for _, f := range families {
			vipStep(loadStep(v.step, f, busyRate)+busySuffix, 3*b.duration(busyRate)+30*time.Second, func(ctx context.Context) error {
				return b.paired(ctx, v, f, func(ctx context.Context, responder string, target netip.Addr) error {
					return b.busyRun(ctx, responder, f, target)
				})
			})
		}
	}
	if v.main {
		vipStep("vip idle with one claim", b.idleFor()+30*time.Second, func(ctx context.Context) error { return b.idleRun(ctx, v) })
		vipStep("claim to the wire", 2*time.Minute, b.claimRun)
	}
	if v.tenK {
		vipStep(v.step+" 10,000 claims", 3*time.Minute, func(ctx context.Context) error { return b.tenKRun(ctx, v) })
	}
}

// waitResponder waits until status says v's responder answers for every
// claim; a claim answered by another (a fallback) fails the agent's step.
func (b *bench) waitResponder(ctx context.Context, v vipResponder) error {
	for {
		st, err := b.agent.client.Status(ctx)
		if err != nil {
			return err
		}
		done := len(st.Claims) > 0
		for _, c := range st.Claims {
			switch c.Responder {
			case v.want:
			case "":
				done = false // waiting
			default:
				return fmt.Errorf("vip agent %v answers for %s with %q, want %q: not measuring it as %s; its output:\n%s",
					v.flags, c.Addr, c.Responder, v.want, v.name, b.agent.out.String())
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("status never said %q answers for every claim: %w", v.want, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// paired runs v's load (run, as responder for target) between two runs
// of the same load against the kernel, right before and right after it:
// this machine's latencies drift by 10-30% over minutes, and a ratio to
// the kernel's step, run first, would count the drift as vip's. The
// ratios are to the mean of the two (kernelQ).
func (b *bench) paired(ctx context.Context, v vipResponder, f family, run func(ctx context.Context, responder string, target netip.Addr) error) error {
	if err := run(ctx, kernelBeside(v.name, true), kernelAddr[f]); err != nil {
		return fmt.Errorf("the kernel's run before %s's: %w", v.name, err)
	}
	if err := run(ctx, v.name, vipAddr[f]); err != nil {
		return err
	}
	if err := run(ctx, kernelBeside(v.name, false), kernelAddr[f]); err != nil {
		return fmt.Errorf("the kernel's run after %s's: %w", v.name, err)
	}
	return nil
}

// kernelBeside names the kernel's run right before (or after) v's in the
// load table.
func kernelBeside(v string, before bool) string {
	if before {
		return "kernel, before " + v
	}
	return "kernel, after " + v
}

// kernelQ is the kernel's q to compare v's run at rate with (suffix names
// the runs with a core busy): the mean of its runs right before and right
// after v's, or the one of them that answered, or else its own step's.
func (b *bench) kernelQ(v string, suffix string, f family, rate int, q func(*loadgen.Result) time.Duration) time.Duration {
	var sum time.Duration
	n := 0
	for _, before := range []bool{true, false} {
		if lr := b.loads[loadKey(kernelBeside(v, before)+suffix, f, rate)]; lr != nil && lr.Res != nil && lr.Res.Answered > 0 {
			sum += q(lr.Res)
			n++
		}
	}
	if n > 0 {
		return sum / time.Duration(n)
	}
	if lr := b.loads[loadKey("kernel"+suffix, f, rate)]; lr != nil && lr.Res != nil && lr.Res.Answered > 0 {
		return q(lr.Res)
	}
	return 0
}

// busyRun is a load run while a thread of the driver spins on a core of
// its own: the other core busy, as other work on the host would keep it.
func (b *bench) busyRun(ctx context.Context, responder string, f family, target netip.Addr) error {
	c := startBusyCore()
	defer c.stop()
	return b.loadRun(ctx, responder+busySuffix, f, busyRate, target)
}

// busyCore spins on a thread of its own until stopped.
type busyCore struct {
	quit atomic.Bool
	done chan struct{}
}

func startBusyCore() *busyCore {
	c := &busyCore{done: make(chan struct{})}
	go func() {
		// Locked and never unlocked: the thread exits with the goroutine.
		runtime.LockOSThread()
		defer close(c.done)
		for !c.quit.Load() {
		}
	}()
	return c
}

func (c *busyCore) stop() {
	c.quit.Store(true)
	<-c.done
}

// responderRow is one line of the side-by-side table.
type responderRow struct {
	Scenario string
	Kernel   string
	Cells    []string // per vipResponders
}

// responderRows lays the responders' load runs side by side with the
// kernel's: latency at every rate and with a core busy, loss and the
// agent's CPU at 100,000/s.
func (b *bench) responderRows() []responderRow {
	var out []responderRow
	res := func(responder string, f family, rate int) *loadRow {
		lr := b.loads[loadKey(responder, f, rate)]
		if lr == nil || lr.Res == nil {
			return nil
		}
		return lr
	}
	any := false
	for _, f := range families {
		type variant struct {
			label, suffix string
			rates         []int
		}
		for _, vr := range []variant{{"", "", rates}, {busySuffix, busySuffix, []int{busyRate}}} {
			for _, rate := range vr.rates {
				for _, q := range []struct {
					name string
					get  func(*loadgen.Result) time.Duration
				}{{"median", (*loadgen.Result).Median}, {"p99", (*loadgen.Result).P99}} {
					cell := func(responder string) (string, time.Duration) {
						lr := res(responder+vr.suffix, f, rate)
						if lr == nil || lr.Res.Answered == 0 {
							return "—", 0
						}
						return fmtDur(q.get(lr.Res)), q.get(lr.Res)
					}
					ks, _ := cell("kernel")
					r := responderRow{Scenario: fmt.Sprintf("%s %s/s%s: %s", f, fmtCount(rate), vr.label, q.name), Kernel: ks}
					for _, v := range vipResponders {
						s, d := cell(v.name)
						if d > 0 {
							any = true
							if kd := b.kernelQ(v.name, vr.suffix, f, rate, q.get); kd > 0 {
								s += " (" + fmtRatio(float64(d), float64(kd)) + ")"
							}
						}
						r.Cells = append(r.Cells, s)
					}
					out = append(out, r)
				}
			}
		}
		lost := responderRow{Scenario: fmt.Sprintf("%s %s/s: lost", f, fmtCount(lossRate)), Kernel: "—"}
		cpu := responderRow{Scenario: fmt.Sprintf("%s %s/s: the agent's CPU", f, fmtCount(lossRate)), Kernel: "—"}
		if k := res("kernel", f, lossRate); k != nil {
			lost.Kernel = fmt.Sprintf("%s of %s", fmtCount(k.Res.Lost), fmtCount(k.Res.Sent))
		}
		// What the agent's capture got: on tcx it sees every request, on
		// XDP none of those answered.
		capt := responderRow{Scenario: fmt.Sprintf("%s %s/s: frames the agent's capture received", f, fmtCount(lossRate)), Kernel: "—"}
		for _, v := range vipResponders {
			l, c, capture := "—", "—", "—"
			if lr := res(v.name, f, lossRate); lr != nil {
				if lr.CaptureReceived >= 0 {
					capture = fmtCount(lr.CaptureReceived)
				}
				l = fmt.Sprintf("%s of %s", fmtCount(lr.Res.Lost), fmtCount(lr.Res.Sent))
				if lr.CPU != nil {
					c = fmtPercent(lr.CPU.Percent()) + " of a core"
				}
			}
			lost.Cells, cpu.Cells = append(lost.Cells, l), append(cpu.Cells, c)
			capt.Cells = append(capt.Cells, capture)
		}
		out = append(out, lost, cpu, capt)
	}
	if !any {
		return nil
	}
	// Rows of runs this run did not make are left out.
	kept := out[:0]
	for _, r := range out {
		seen := r.Kernel != "—"
		for _, c := range r.Cells {
			seen = seen || c != "—"
		}
		if seen {
			kept = append(kept, r)
		}
	}
	return kept
}

// writeResponders renders the side-by-side table.
func writeResponders(w io.Writer, rows []responderRow) {
	if len(rows) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("## The responders side by side\n\n")
	p("The same loads against the agent with each of its responders, one agent after another on b, in the same run as the kernel's: ")
	p("the eBPF program on tcx ingress (`vip agent --responder ebpf`, the hook `auto` picks, and *vip* everywhere else in this file), ")
	p("the same program on XDP generic (`--responder-hook xdp-generic`, opt-in) and the sockets (`--responder socket`, for machines without eBPF). ")
	p("Each agent's status said that responder answered for both addresses before its runs. In brackets, the ratio to the kernel: to the mean of its runs right before and right after that responder's (the kernel column is its own step, run first). ")
	p("*A core busy*: a thread of the driver spins on one of the two cores through the run. Targets are in the first table.\n\n")
	p("| scenario | kernel |")
	for _, v := range vipResponders {
		p(" %s |", v.want)
	}
	p("\n|---|---|")
	for range vipResponders {
		p("---|")
	}
	p("\n")
	for _, r := range rows {
		p("| %s | %s |", r.Scenario, r.Kernel)
		for _, c := range r.Cells {
			p(" %s |", c)
		}
		p("\n")
	}
	p("\n")
}
