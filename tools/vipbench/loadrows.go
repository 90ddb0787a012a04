package main

import (
	"fmt"
	"time"

	"github.com/vipctl/vip/tools/loadgen"
)

// Targets of the main table's load rows, as ratios to the kernel in the same
// run: the eBPF responder (issue 15) answers where the kernel does; the
// sockets keep the targets they were held to before it.
const (
	ebpfLimit   = 1.0
	busyLimit   = 1.5
	socketLimit = 3.0  // median
	socketP99   = 10.0 // p99
	agentCPUMax = 5.0  // percent of a core at 100,000/s for a held address
)

// quantile is one latency figure of a load run.
type quantile struct {
	name  string
	get   func(*loadgen.Result) time.Duration
	limit float64 // ratio to the kernel; 0: no target
}

// loadRows adds the load runs' rows to the main table: for the eBPF
// responder on tcx (vip's default) latency at every rate, loss, the agent's
// CPU and p99 with a core busy; for the sockets latency at the two lower
// rates and loss. The XDP generic runs are in the side-by-side table.
func (b *bench) loadRows() {
	main, socket := vipResponders[0], vipResponders[1]
	for _, f := range families {
		for _, rate := range rates {
			b.latencyRows(f, rate, "", main, "", []quantile{
				{"median", (*loadgen.Result).Median, ebpfLimit}, {"p99", (*loadgen.Result).P99, ebpfLimit}})
		}
		b.lossRow(f, main, "")
		b.latencyRows(f, busyRate, busySuffix, main, "", []quantile{{"p99", (*loadgen.Result).P99, busyLimit}})
		b.heldCPURow(f, main)
	}
	for _, f := range families {
		for _, rate := range rates[:2] {
			b.latencyRows(f, rate, "", socket, ", socket responder", []quantile{
				{"median", (*loadgen.Result).Median, socketLimit}, {"p99", (*loadgen.Result).P99, socketP99}})
		}
		b.lossRow(f, socket, ", socket responder")
		b.latencyRows(f, busyRate, busySuffix, socket, ", socket responder", []quantile{{"p99", (*loadgen.Result).P99, 0}})
	}
}

// latencyRows adds a row per quantile: v's run at rate against the
// kernel's (suffix names the runs with a core busy), when either ran.
func (b *bench) latencyRows(f family, rate int, suffix string, v vipResponder, label string, qs []quantile) {
	kstep, vstep := loadStep("kernel", f, rate)+suffix, loadStep(v.step, f, rate)+suffix
	_, kran := b.ran[kstep]
	_, vran := b.ran[vstep]
	if !kran && !vran {
		return
	}
	vl := b.loads[loadKey(v.name+suffix, f, rate)]
	for _, q := range qs {
		x := row{Scenario: fmt.Sprintf("%s %s/s%s: %s reply latency%s", f, fmtCount(rate), suffix, q.name, label),
			Ratio: "—", Target: "—", Met: noGoal}
		if q.limit > 0 {
			x.Target = fmt.Sprintf("≤ %.1f× kernel", q.limit)
		}
		var vv time.Duration
		// The kernel's runs beside v's, where there are: see paired.
		kv := b.kernelQ(v.name, suffix, f, rate, q.get)
		if kv > 0 {
			x.Kernel = fmtDur(kv)
		} else {
			x.Kernel, x.Met, _ = b.missing(kstep)
		}
		if vl != nil && vl.Res.Answered > 0 {
			vv = q.get(vl.Res)
			x.Vip = fmtDur(vv)
		} else {
			var vm verdict
			x.Vip, vm, _ = b.missing(vstep)
			if vm == failed {
				x.Met = failed
			}
		}
		if kv > 0 && vv > 0 {
			x.Ratio = fmtRatio(float64(vv), float64(kv))
			if q.limit > 0 {
				x.Met = verdictOf(float64(vv)/float64(kv) <= q.limit)
			}
		}
		b.rep.Rows = append(b.rep.Rows, x)
	}
}

// lossRow adds the row of requests lost at 100,000/s.
func (b *bench) lossRow(f family, v vipResponder, label string) {
	kstep, vstep := loadStep("kernel", f, lossRate), loadStep(v.step, f, lossRate)
	_, kran := b.ran[kstep]
	_, vran := b.ran[vstep]
	if !kran && !vran {
		return
	}
	x := row{Scenario: fmt.Sprintf("%s %s/s: requests without a reply within 1 s%s", f, fmtCount(lossRate), label),
		Ratio: "—", Target: "none lost", Met: noGoal}
	cell := func(lr *loadRow, step string) string {
		if lr == nil {
			c, vd, _ := b.missing(step)
			if vd == failed {
				x.Met = failed
			}
			return c
		}
		res := lr.Res
		s := fmt.Sprintf("%s of %s", fmtCount(res.Lost), fmtCount(res.Sent))
		if res.Lost > 0 {
			s += fmt.Sprintf(" (%.2f%%)", 100*res.LossRatio())
		}
		if a := res.AchievedRate(); a < 0.9*float64(res.Rate) {
			s += fmt.Sprintf(", sent at only %s/s", fmtCount(int64(a)))
		}
		return s
	}
	k, vl := b.loads[loadKey("kernel", f, lossRate)], b.loads[loadKey(v.name, f, lossRate)]
	x.Kernel, x.Vip = cell(k, kstep), cell(vl, vstep)
	if vl != nil && x.Met != failed {
		x.Met = verdictOf(vl.Res.Lost == 0)
		if vl.Res.RecvDrops > 0 {
			x.Met = invalid
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("%s %s/s against %s: the load generator's socket dropped %d replies, so some losses may be the generator's.", f, fmtCount(lossRate), v.name, vl.Res.RecvDrops))
		}
	}
	b.rep.Rows = append(b.rep.Rows, x)
}

// heldCPURow adds the agent's CPU over the 100,000/s run for a held
// address.
func (b *bench) heldCPURow(f family, v vipResponder) {
	step := loadStep(v.step, f, lossRate)
	if _, ok := b.ran[step]; !ok {
		return
	}
	x := row{Scenario: fmt.Sprintf("%s %s/s for a held address: vip CPU", f, fmtCount(lossRate)), Kernel: "—", Ratio: "—",
		Target: fmt.Sprintf("≤ %g%% of a core", agentCPUMax)}
	if lr := b.loads[loadKey(v.name, f, lossRate)]; lr != nil && lr.CPU != nil {
		x.Vip = fmtPercent(lr.CPU.Percent()) + " of a core"
		x.Met = verdictOf(lr.CPU.Percent() <= agentCPUMax)
	} else {
		x.Vip, x.Met, _ = b.missing(step)
	}
	b.rep.Rows = append(b.rep.Rows, x)
}
