package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/vipctl/vip/tools/loadgen"
)

// verdict says whether a row met its target.
type verdict string

const (
	met     verdict = "yes"
	notMet  verdict = "**no**"
	failed  verdict = "**failed**"
	noGoal  verdict = "—"
	invalid verdict = "**invalid**" // the measurement itself is in doubt
)

// row is one line of the main table.
type row struct {
	Scenario    string
	Kernel, Vip string
	Ratio       string
	Target      string
	Met         verdict
}

// loadRow is one load run, for the detail table.
type loadRow struct {
	Responder string // "kernel" or "vip"
	Res       *loadgen.Result
	// CPU is the vip agent's use of a core over the run (vip runs only).
	CPU *cpuUse
	// CaptureReceived and CaptureDropped are the agent capture's counts
	// over the run (vip runs only; -1 when unknown).
	CaptureReceived, CaptureDropped int64
	// Busy is how busy all cores together were over the run, 0 to 1; -1
	// when unknown.
	Busy float64
}

// step is one part of the run and how long it took.
type step struct {
	Name string
	Took time.Duration
	Err  error
}

// report is everything BENCHMARKS.md says.
type report struct {
	Machine machine
	Command string
	Short   bool
	Rows    []row
	Floor   []floorRow
	// Responders lays the agent's responders side by side.
	Responders []responderRow
	Loads      []loadRow
	Fleet      *fleetResult
	FleetErr   error
	// EtcdVersion is the etcd the fleet and failover steps ran.
	EtcdVersion string
	// FleetBroke are the fleet's sizes that fenced themselves; Fleet is
	// then the next smaller one.
	FleetBroke []brokenFleet
	GoBench    []goBench
	GoCmd      string
	GoErr      error
	Steps      []step
	Notes      []string
	Clock      string // where the load runs' send times came from
	IdleSecs   int
	// LoadBefore and LoadAfter are /proc/loadavg around the run: other
	// work on the machine shows there.
	LoadBefore, LoadAfter string
	// Failover is keepalived's and vip's takeovers after a kill.
	Failover    *failoverResult
	FailoverErr error
}

// fmtDur prints a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// fmtRatio prints vip over kernel, or a dash when there is nothing to
// divide by.
func fmtRatio(v, k float64) string {
	if k <= 0 || math.IsNaN(v/k) {
		return "—"
	}
	// Near the kernel's own figure a tenth is too coarse: 1.04× is over a
	// target of 1.0×.
	if v/k < 2 {
		return fmt.Sprintf("%.2f×", v/k)
	}
	return fmt.Sprintf("%.1f×", v/k)
}

// fmtCount prints n with thousands separators.
func fmtCount[T ~int | ~int64 | ~uint32 | ~uint64](n T) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtPercent(p float64) string {
	switch {
	case p == 0:
		return "0%"
	case p < 0.1:
		return fmt.Sprintf("%.3f%%", p)
	case p < 10:
		return fmt.Sprintf("%.2f%%", p)
	}
	return fmt.Sprintf("%.1f%%", p)
}

// fmtMB prints a size given in KiB in megabytes (10^6 bytes), the unit of
// the targets.
func fmtMB(kib int64) string { return fmt.Sprintf("%.1f MB", float64(kib)*1024/1e6) }

func verdictOf(ok bool) verdict {
	if ok {
		return met
	}
	return notMet
}

// write renders the report as Markdown.
func (r *report) write(w io.Writer) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# Benchmarks\n\n")
	p("## vip against the kernel\n\n")
	p("Ratios are vip over the kernel, in the same run. Each of vip's latency runs goes between two runs of the same load against the kernel, right before and right after it, and the *kernel* column beside it is their mean: this machine's latencies drift by 10–30%% over minutes, and a ratio to a kernel run made minutes earlier would count the drift as vip's (the kernel's own steps, run first, are in the load runs table and in the side-by-side table's kernel column). *vip* is the agent with its eBPF responder on tcx ingress (`vip agent --responder ebpf`, what `auto` picks on this kernel); ")
	p("rows marked *socket responder* are an agent with `--responder socket`, for machines without eBPF. ")
	p("*A core busy*: a thread spins on one of the two cores through the run, the kernel's and vip's alike. A row marked **failed** could not be measured; see Failures.\n\n")
	p("| scenario | kernel | vip | ratio | target | met? |\n|---|---|---|---|---|---|\n")
	for _, x := range r.Rows {
		p("| %s | %s | %s | %s | %s | %s |\n", x.Scenario, x.Kernel, x.Vip, x.Ratio, x.Target, x.Met)
	}
	p("\n")
	writeFailover(w, r)
	writeResponders(w, r.Responders)
	writeFloor(w, r.Floor)
	writeFleet(w, r)

	if len(r.Loads) > 0 {
		p("## Load runs\n\n")
		p("Each run asks from the lab's client host, at a fixed rate, for one address. *Lost*: no reply within 1 s. ")
		p("*Dup*: replies beyond the first to a request. *Gen drops*: replies the load generator's own socket dropped ")
		p("(non-zero would make losses ours, not the responder's). *vip CPU*: the agent's share of one core over the run. ")
		p("*Capture*: frames the agent's capture (its packet socket, which competing-claimer detection reads) received / dropped over the run. ")
		p("*Machine*: how busy all %d cores together were over the run (generator, bridge, responders, everything else).\n\n", r.Machine.Cores)
		p("| responder | target | asked/s | sent/s | sent | answered | lost | dup | median | p99 | max | gen drops | vip CPU | capture | machine |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, l := range r.Loads {
			res := l.Res
			cpu, capt, busy := "—", "—", "—"
			if l.Busy >= 0 {
				busy = fmt.Sprintf("%.0f%%", 100*l.Busy)
			}
			if l.CPU != nil {
				cpu = fmtPercent(l.CPU.Percent())
			}
			if l.CaptureReceived >= 0 && strings.HasPrefix(l.Responder, "vip") {
				capt = fmtCount(l.CaptureReceived) + " / " + fmtCount(l.CaptureDropped)
			}
			med, p99, mx := fmtDur(res.Median()), fmtDur(res.P99()), fmtDur(res.Max())
			if res.Answered == 0 {
				med, p99, mx = "—", "—", "—"
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				l.Responder, res.Target, fmtCount(res.Rate), fmtCount(int64(math.Round(res.AchievedRate()))),
				fmtCount(res.Sent), fmtCount(res.Answered), fmtCount(res.Lost), fmtCount(res.Duplicates),
				med, p99, mx, fmtCount(res.RecvDrops), cpu, capt, busy)
		}
		p("\n")
	}

	if r.GoErr != nil || len(r.GoBench) > 0 {
		p("## Go benchmarks\n\n")
	}
	if r.GoErr != nil {
		p("**failed:** %s\n\n", codeBlockLine(r.GoErr.Error()))
	}
	if len(r.GoBench) > 0 {
		p("`%s`\n\n", r.GoCmd)
		p("| package | benchmark | ns/op | B/op | allocs/op | other |\n|---|---|---|---|---|---|\n")
		for _, g := range r.GoBench {
			var other []string
			cell := func(unit string) string {
				v, ok := g.Metric(unit)
				if !ok {
					return "—"
				}
				return trimFloat(v)
			}
			for _, m := range g.Metrics {
				switch m.Unit {
				case "ns/op", "B/op", "allocs/op":
				default:
					other = append(other, trimFloat(m.Value)+" "+m.Unit)
				}
			}
			p("| %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(g.Pkg, "github.com/vipctl/vip/"),
				g.Name, cell("ns/op"), cell("B/op"), cell("allocs/op"), strings.Join(other, ", "))
		}
		p("\n")
	}

	writeFindings(w)
	p("## How measured\n\n")
	for _, h := range r.howMeasured() {
		p("- %s\n", h)
	}
	p("\n")

	if len(r.Notes) > 0 {
		p("## Notes from this run\n\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
		p("\n")
	}

	p("## What took how long\n\n| step | time | result |\n|---|---|---|\n")
	var total time.Duration
	for _, s := range r.Steps {
		res := "ok"
		if s.Err != nil {
			res = "failed"
		}
		p("| %s | %s | %s |\n", s.Name, s.Took.Round(100*time.Millisecond), res)
		total += s.Took
	}
	p("| total | %s | |\n\n", total.Round(100*time.Millisecond))

	var fails []step
	for _, s := range r.Steps {
		if s.Err != nil {
			fails = append(fails, s)
		}
	}
	if len(fails) > 0 {
		p("## Failures\n\n")
		for _, s := range fails {
			p("- **%s**: %s\n", s.Name, codeBlockLine(s.Err.Error()))
		}
		p("\n")
	}

	// The run log comes last: the headline table opens the file
	// (withHeadline), and the figures before the run that made them.
	p("%s\n\n", runLogHeading)
	p("Written by `%s`; every number in this file is from that one run.\n\n", r.Command)
	p("**Machine:** %s.  \n", r.Machine)
	p("**Code:** %s.  \n", r.Machine.Source)
	mode := "full run"
	if r.Short {
		mode = "short run (`-short`: shorter load runs, idle measured over 5 s instead of 60 s)"
	}
	p("**Mode:** %s.  \n", mode)
	p("**Load average** (1, 5, 15 min) before the run: %s; after: %s.\n", r.LoadBefore, r.LoadAfter)
	return nil
}

// provenance is how a partial run names itself in the file it is spliced
// into.
func (r *report) provenance() runProvenance {
	mode := "full run"
	if r.Short {
		mode = "short run"
	}
	return runProvenance{Command: r.Command, Source: r.Machine.Source, Mode: mode, Date: r.Machine.Date,
		LoadBefore: r.LoadBefore, LoadAfter: r.LoadAfter, Steps: r.Steps}
}

// codeBlockLine keeps a multi-line error readable inside a list item.
func codeBlockLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	return lines[0] + "\n\n  ```\n  " + strings.Join(lines[1:], "\n  ") + "\n  ```"
}

func trimFloat(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmtCount(int64(v))
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func (r *report) howMeasured() []string {
	idle := fmt.Sprintf("%d s", r.IdleSecs)
	h := []string{
		"**Lab.** `internal/lab` builds a Linux bridge in a namespace of its own and three hosts on veth pairs, all on this machine: " +
			"`a` (192.0.2.1/24, 2001:db8::1/64), `b` (192.0.2.2/24, 2001:db8::2/64) and `client` (192.0.2.3/24, 2001:db8::3/64). " +
			"The bridge floods no unknown unicast to a's and b's ports (their own MACs are pinned there), as a switch that " +
			"knows where the asker is: replies, which go to the generator's sequence addresses, reach the client alone instead of " +
			"every host. The kernel answers for a's own addresses 192.0.2.1 and 2001:db8::1. vip runs on b as an agent (`vip agent`, the binary " +
			"built from this checkout by the driver) holding 192.0.2.10 and 2001:db8::10 (`vip claim … -i eth0`), with its defaults " +
			"(capture of who-has traffic, probes every 10 s) but for the responder, one agent after another: `--responder ebpf` (tcx), " +
			"which every vip step measures, then `--responder socket`, then `--responder ebpf --responder-hook xdp-generic`, each " +
			"stopped (its claims released, its program detached) before the next starts, and each checked in status to answer with the " +
			"responder asked for. The kernel's own steps go first, with no vip on the segment; then vip's, each latency run of vip's between a run " +
			"of the same load against the kernel right before it and one right after it (on a, with vip's agent on b). " +
			"Documentation prefixes only, inside namespaces the driver made and removed.",
		"**Load generator** (`tools/loadgen`), on the client host: a packet socket sends ARP requests, or neighbor solicitations " +
			"to the target's solicited-node group with a correct ICMPv6 checksum, paced by nanosleep at a 1 µs timer slack: one request " +
			"per wake up to 10,000/s, batches of rate × 100 µs above (2 at 20,000/s, 10 at 100,000/s). Each request carries its " +
			"sequence number in a hardware address of its own, 02:RR:SS:SS:SS:SS: the ARP sender hardware address, or the NDP source " +
			"link-layer option (solicitations also cycle through 64 source addresses 2001:db8::f000:0–3f, so that the responder's neighbour table stays small). " +
			"Replies go back to that address, and the generator reads them from a second packet socket in promiscuous mode behind a " +
			"kernel filter for this run's replies. A reply whose two copies of the sequence disagree, or that answers no request sent, " +
			"is counted apart and never as an answer.",
		"**Times.** Receive times are the kernel's receive timestamps on the generator's socket (SO_TIMESTAMPNS). Send times: " + r.Clock + ". " +
			"Latency is reply receive time minus request send time, both CLOCK_REALTIME on one machine. Median and p99 are nearest-rank " +
			"over the answered requests; a request with no reply within 1 s counts as lost; more than one reply to a request is a duplicate.",
		"**Pace on this machine.** The generator, the bridge and both responders share " + fmt.Sprint(r.Machine.Cores) + " cores; " +
			"the kernel answers inside the generator's own write (veth hands the frame over in the sender's softirq), vip answers " +
			"from its own thread. *sent/s* in the load table is the rate actually achieved.",
		"**A core busy**: through the run, a thread of the driver (locked to itself, not pinned) spins in a loop reading an atomic flag, " +
			"as the spinning floor does with a socket: one of the two cores is taken, and the generator, the bridge and the responder " +
			"share the other. The kernel's runs and vip's have the same spinner, at " + fmtCount(busyRate) + "/s.",
		"**CPU** of vip is utime + stime of the agent process (all threads) from /proc/PID/stat, before and after, over wall time: " +
			"a share of one core, with a resolution of one 10 ms tick over the stretch measured. **RSS** is VmRSS from /proc/PID/status, " +
			"of vip as `go build` wrote it, then copied into place as a package's install does: run from the linker's own output, an idle agent had about 6 MB more of the binary resident.",
		"**Idle**: a fresh agent, started for it, holding one claim (192.0.2.10, the IPv6 one released), no load, measured over " + idle + ", long after its gratuitous window ended " +
			"(the agent of the load runs keeps counts of the thousands of senders it answered, which it sweeps).",
		"**10,000 claims**: 508 IPv4 (198.51.100.1–254, 203.0.113.1–254) and 9,492 IPv6 (2001:db8:1::/112) in one `vip claim -f FILE -i eth0`. " +
			"RSS is read after the claim returns; `vip status --json` is the wall time of the whole command (process start to exit, run " +
			"directly, not through `ip netns exec`), median of 5, once every gratuitous window has closed: the 10,000 claims held, the agent " +
			"otherwise idle. (The gratuitous frames on the wire are recorded before, with nothing else asked of the agent.)",
		"**Claim to the wire**: the agent running and holding 192.0.2.10, the driver reads the clock and starts `vip claim ADDR -i eth0` " +
			"on b; a packet socket on the client host takes the kernel receive timestamp of the first gratuitous ARP for ADDR. " +
			"The kernel column is `arping -U -c 1 -I eth0 ADDR` on a (the address assigned there first, as arping -U needs), started the " +
			"same way: the process is forked from a thread that entered the host's network namespace (no `ip netns exec` in between). Median of the repeats.",
		"**Go benchmarks** run before the lab, on the same machine: `-benchmem`, one count, default benchtime.",
		schedHowMeasured(),
		fleetHowMeasured(r.EtcdVersion),
		failoverHowMeasured(r.EtcdVersion),
	}
	return h
}

// sortedResponders lists a result's responders for notes.
func sortedResponders(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%s", k, fmtCount(m[k])))
	}
	return strings.Join(parts, ", ")
}
