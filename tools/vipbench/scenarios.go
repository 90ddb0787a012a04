package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/tools/loadgen"
)

// claimResult is the claim-to-the-wire scenario: per repeat, how long from
// the command's start to the first gratuitous frame on the wire.
type claimResult struct {
	vip, arping []time.Duration
}

// claimRun starts `vip claim` against the running agent, and arping -U
// the same way, and times each to its first gratuitous frame as another
// host receives it.
func (b *bench) claimRun(ctx context.Context) error {
	if _, err := exec.LookPath("arping"); err != nil {
		return fmt.Errorf("the comparison needs iputils arping (apt-get install iputils-arping): %w", err)
	}
	// The commands are forked from a thread inside a host's namespace; make
	// sure that is where they land before arping sends anything.
	for _, h := range []*lab.Host{b.a, b.b} {
		if err := b.checkStartIn(ctx, h); err != nil {
			return err
		}
	}
	reps := 5
	if b.o.short {
		reps = 3
	}
	res := &claimResult{}
	for i := range reps {
		vipA := netip.AddrFrom4([4]byte{192, 0, 2, byte(20 + i)})
		d, err := b.firstFrame(ctx, b.b, vipA, b.vipBin, "claim", vipA.String(), "-i", "eth0", "--socket", b.agent.sock)
		if err != nil {
			return fmt.Errorf("vip claim %s: %w", vipA, err)
		}
		res.vip = append(res.vip, d)
		kernA := netip.AddrFrom4([4]byte{192, 0, 2, byte(40 + i)})
		if _, err := b.a.Run(ctx, "ip", "addr", "add", kernA.String()+"/32", "dev", "eth0"); err != nil {
			return err
		}
		d, err = b.firstFrame(ctx, b.a, kernA, "arping", "-U", "-c", "1", "-I", "eth0", kernA.String())
		if err != nil {
			return fmt.Errorf("arping -U %s: %w", kernA, err)
		}
		res.arping = append(res.arping, d)
		b.logf("  repeat %d: vip claim %v, arping -U %v", i+1, res.vip[i], res.arping[i])
	}
	b.claim = res
	return nil
}

// startIn starts a command in h's network namespace, forked from a thread
// that entered it, and returns the clock read right before the fork.
func startIn(h *lab.Host, cmd *exec.Cmd) (time.Time, error) {
	var t0 time.Time
	err := lab.InNetns(netnsPath(h), func() error {
		t0 = time.Now()
		return cmd.Start()
	})
	return t0, err
}

func (b *bench) checkStartIn(ctx context.Context, h *lab.Host) error {
	cmd := exec.CommandContext(ctx, "ip", "-o", "link", "show", "dev", "eth0")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if _, err := startIn(h, cmd); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("ip link in %s: %w: %s", h.Name, err, out.String())
	}
	if mac := h.Links[0].MAC.String(); !strings.Contains(out.String(), mac) {
		return fmt.Errorf("a command started in %s's namespace saw another eth0 (%q, want MAC %s): not running the comparison", h.Name, strings.TrimSpace(out.String()), mac)
	}
	return nil
}

// firstFrame starts name on h and returns how long after its start the
// client host received the first gratuitous frame for addr.
func (b *bench) firstFrame(ctx context.Context, h *lab.Host, addr netip.Addr, name string, args ...string) (time.Duration, error) {
	mon, err := loadgen.OpenMonitor(netnsPath(b.client), "eth0")
	if err != nil {
		return 0, err
	}
	defer mon.Close()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	t0, err := startIn(h, cmd)
	if err != nil {
		return 0, err
	}
	wctx, wcancel := context.WithTimeout(cctx, 5*time.Second)
	at, ferr := mon.First(wctx, addr)
	wcancel()
	werr := cmd.Wait()
	if ferr != nil {
		return 0, fmt.Errorf("%w (command: %v; output: %s)", ferr, werr, out.String())
	}
	if werr != nil {
		return 0, fmt.Errorf("%w: %s", werr, out.String())
	}
	return at.Sub(t0), nil
}

// tenKResult is the 10,000-claim scenario.
type tenKResult struct {
	claims    int
	claimTook time.Duration
	rss       int64
	status    []time.Duration // `vip status --json`, whole command
	statusLen int
	release   time.Duration
}

func tenKAddrs() []string {
	var addrs []string
	for _, p := range []string{"198.51.100.", "203.0.113."} {
		for i := 1; i <= 254; i++ {
			addrs = append(addrs, fmt.Sprintf("%s%d", p, i))
		}
	}
	for i := 0; len(addrs) < 10000; i++ {
		addrs = append(addrs, fmt.Sprintf("2001:db8:1::%x:%x", i>>16, i&0xffff))
	}
	return addrs
}

// tenKRun claims 10,000 addresses at once on the agent answering with v,
// times status with them held, and releases them; for the main responder
// it also records their gratuitous frames on the wire.
func (b *bench) tenKRun(ctx context.Context, v vipResponder) error {
	if _, err := b.vip(ctx, "release", "--all"); err != nil {
		return err
	}
	addrs := tenKAddrs()
	file := filepath.Join(b.dir, "vips.txt")
	if err := os.WriteFile(file, []byte(strings.Join(addrs, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	res := &tenKResult{}
	// Their gratuitous frames on the wire, until every window has closed
	// (schedwire.go).
	var wire *wireRecording
	if v.main {
		w, err := b.startWire()
		if err != nil {
			return err
		}
		defer w.abort()
		wire = w
	}
	start := time.Now()
	if _, err := b.vip(ctx, "claim", "-f", file, "-i", "eth0"); err != nil {
		return err
	}
	res.claimTook = time.Since(start)
	armedBy := time.Now()
	rss, err := rssKiB(b.agent.pid)
	if err != nil {
		return err
	}
	res.rss = rss
	// The windows first, with nothing else asked of the agent; then
	// status, with the 10,000 claims held (its own step: five status
	// commands and the decoding of 5 MB here would compete with the
	// sender for the two cores).
	if wire != nil {
		if err := b.finishWire(ctx, wire, armedBy, addrs); err != nil {
			return fmt.Errorf("gratuitous frames on the wire: %w", err)
		}
	} else {
		// The same wait without the recording: status with the windows
		// closed.
		select {
		case <-time.After(time.Until(armedBy.Add(wireWait(wireVariant(announce.SchedulerConfig{}).cfg)))):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var first []byte
	for i := range 5 {
		cmd := exec.CommandContext(ctx, b.vipBin, "status", "--json", "--socket", b.agent.sock)
		start := time.Now()
		out, err := cmd.Output()
		took := time.Since(start)
		if err != nil {
			return fmt.Errorf("vip status --json: %w", err)
		}
		res.status = append(res.status, took)
		if i == 0 {
			first = out
		}
	}
	// Read after the runs, not between them.
	var st api.StatusResponse
	if err := json.Unmarshal(first, &st); err != nil {
		return fmt.Errorf("vip status --json: %w", err)
	}
	res.claims, res.statusLen = len(st.Claims), len(first)
	if res.claims != len(addrs) {
		return fmt.Errorf("status lists %d claims after claiming %d", res.claims, len(addrs))
	}
	start = time.Now()
	if _, err := b.vip(ctx, "release", "--all"); err != nil {
		return err
	}
	res.release = time.Since(start)
	b.tenK[v.name] = res
	b.logf("  %s, 10,000 claims: claim %v, RSS %s, status --json %v", v.name, res.claimTook, fmtMB(res.rss), res.status)
	return nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// missing returns what a row shows for a step that produced nothing: failed
// or not run.
func (b *bench) missing(step string) (string, verdict, bool) {
	err, ran := b.ran[step]
	if !ran {
		return "not run", noGoal, false
	}
	if err != nil {
		return "failed", failed, true
	}
	return "—", noGoal, true
}

// finish builds the main table and the notes from what was measured.
func (b *bench) finish() {
	r := b.rep
	r.Floor = b.floorRows()
	r.Responders = b.responderRows()
	b.loadRows()

	// Duplicates over every answered run.
	var kd, vd, kn, vn int
	for key, lr := range b.loads {
		switch {
		case strings.HasPrefix(key, "kernel"):
			kd += lr.Res.Duplicates
			kn++
		case strings.HasPrefix(key, "vip"):
			vd += lr.Res.Duplicates
			vn++
		}
	}
	if kn+vn > 0 {
		x := row{Scenario: "duplicate replies, all load runs", Ratio: "—", Target: "none", Met: verdictOf(vd == 0)}
		x.Kernel, x.Vip = fmtCount(kd)+fmt.Sprintf(" in %d runs", kn), fmtCount(vd)+fmt.Sprintf(" in %d runs", vn)
		if vn == 0 {
			x.Vip, x.Met = "no run", noGoal
		}
		r.Rows = append(r.Rows, x)
	}

	// The agent's capture at 100,000 frames/s.
	for _, f := range families {
		lr := b.loads[loadKey("vip", f, lossRate)]
		if lr == nil || lr.CaptureReceived < 0 {
			continue
		}
		r.Rows = append(r.Rows, row{
			Scenario: fmt.Sprintf("%s %s/s: frames the agent's capture dropped", f, fmtCount(lossRate)),
			Kernel:   "—", Vip: fmt.Sprintf("%s of %s received", fmtCount(lr.CaptureDropped), fmtCount(lr.CaptureReceived)),
			Ratio: "—", Target: "none dropped", Met: verdictOf(lr.CaptureDropped == 0),
		})
	}

	for _, f := range families {
		name := fmt.Sprintf("vip %s %s/s for an address nobody holds", f, fmtCount(lossRate))
		if _, ok := b.ran[name]; !ok {
			continue
		}
		x := row{Scenario: fmt.Sprintf("%s %s/s for an address nobody holds: vip CPU", f, fmtCount(lossRate)),
			Kernel: "—", Ratio: "—", Target: "≤ 5% of a core"}
		if use := b.unheld[f]; use != nil {
			x.Vip = fmtPercent(use.Percent()) + " of a core"
			if res := b.unheldN[f]; res != nil && res.AchievedRate() < 0.9*lossRate {
				x.Vip += fmt.Sprintf(" (load sent at %s/s)", fmtCount(int64(res.AchievedRate())))
			}
			x.Met = verdictOf(use.Percent() <= 5)
		} else {
			x.Vip, x.Met, _ = b.missing(name)
		}
		r.Rows = append(r.Rows, x)
	}

	if _, ok := b.ran["vip idle with one claim"]; ok {
		cpu := row{Scenario: fmt.Sprintf("idle with one claim: CPU over %d s", int(b.idleFor().Seconds())), Kernel: "—", Ratio: "—", Target: "< 0.1% of a core"}
		rss := row{Scenario: "idle with one claim: RSS", Kernel: "—", Ratio: "—", Target: "≤ 30 MB"}
		if b.idle != nil {
			cpu.Vip = fmtPercent(b.idle.Percent()) + fmt.Sprintf(" (%d ms)", b.idle.CPU.Milliseconds())
			cpu.Met = verdictOf(b.idle.Percent() < 0.1)
			if res := b.idle.Resolution(); res >= 0.1 {
				cpu.Met = invalid
				r.Notes = append(r.Notes, fmt.Sprintf("Idle CPU over %v has a resolution of %.2f%% of a core (one 10 ms tick), too coarse for the 0.1%% target: run without -short for 60 s.", b.idle.Wall.Round(time.Second), res))
			}
			rss.Vip = fmtMB(b.idleRSS)
			rss.Met = verdictOf(b.idleRSS*1024 <= 30e6)
		} else {
			cpu.Vip, cpu.Met, _ = b.missing("vip idle with one claim")
			rss.Vip, rss.Met = cpu.Vip, cpu.Met
		}
		r.Rows = append(r.Rows, cpu, rss)
	}

	if _, ok := b.ran["claim to the wire"]; ok {
		x := row{Scenario: "`vip claim` against a running agent: start to first gratuitous frame on the wire", Target: "≤ 20 ms", Ratio: "—"}
		if c := b.claim; c != nil {
			km, vm := median(c.arping), median(c.vip)
			x.Scenario += fmt.Sprintf(" (median of %d)", len(c.vip))
			x.Kernel = fmtDur(km) + " (arping -U)"
			x.Vip = fmtDur(vm)
			x.Ratio = fmtRatio(float64(vm), float64(km))
			x.Met = verdictOf(vm <= 20*time.Millisecond)
			r.Notes = append(r.Notes, fmt.Sprintf("Claim to the wire, every repeat: vip %v; arping -U %v.", roundAll(c.vip), roundAll(c.arping)))
		} else {
			x.Kernel, x.Met, _ = b.missing("claim to the wire")
			x.Vip = x.Kernel
		}
		r.Rows = append(r.Rows, x)
	}

	for _, v := range vipResponders {
		if v.tenK {
			b.tenKRows(v)
		}
	}

	b.schedRows()
	b.fleetRows()
	b.failoverRows()

	// Where the send times came from, by rate.
	r.Clock = b.clocks()
	for _, lr := range r.Loads {
		res := lr.Res
		if res.Stray+res.Disagreeing+res.Negative+res.SendErrors > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s %s at %s/s: %d stray replies, %d disagreeing, %d stamped before their request, %d sends refused.",
				lr.Responder, res.Target, fmtCount(res.Rate), res.Stray, res.Disagreeing, res.Negative, res.SendErrors))
		}
		if len(res.Responders) > 1 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s %s at %s/s: replies came from %s.", lr.Responder, res.Target, fmtCount(res.Rate), sortedResponders(res.Responders)))
		}
	}
}

// tenKRows adds the 10,000 claims' rows of the agent answering with v: RSS
// and status for the main responder, status alone for the others.
func (b *bench) tenKRows(v vipResponder) {
	r := b.rep
	step := v.step + " 10,000 claims"
	if _, ok := b.ran[step]; !ok {
		return
	}
	label, note := "", "10,000 claims"
	if !v.main {
		label = ", " + v.want + " responder"
		note += label
	}
	rss := row{Scenario: "10,000 claims" + label + ": RSS", Kernel: "—", Ratio: "—", Target: "≤ 100 MB"}
	st := row{Scenario: "10,000 claims" + label + ": `vip status --json` (median of 5)", Kernel: "—", Ratio: "—", Target: "< 50 ms"}
	if t := b.tenK[v.name]; t != nil {
		rss.Vip, rss.Met = fmtMB(t.rss), verdictOf(t.rss*1024 <= 100e6)
		st.Vip, st.Met = fmtDur(median(t.status)), verdictOf(median(t.status) < 50*time.Millisecond)
		r.Notes = append(r.Notes, fmt.Sprintf("%s: `vip claim -f` took %v end to end, `vip release --all` %v; `vip status --json` printed %s bytes; every status run: %v.",
			note, t.claimTook.Round(time.Millisecond), t.release.Round(time.Millisecond), fmtCount(t.statusLen), roundAll(t.status)))
	} else {
		rss.Vip, rss.Met, _ = b.missing(step)
		st.Vip, st.Met = rss.Vip, rss.Met
	}
	r.Rows = append(r.Rows, rss, st)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Microsecond)
	}
	return out
}

// clocks says where the load runs' send times came from, rate by rate.
func (b *bench) clocks() string {
	type tally struct{ stamped, sent int }
	byRate := map[int]*tally{}
	for _, lr := range b.loads {
		t := byRate[lr.Res.Rate]
		if t == nil {
			t = &tally{}
			byRate[lr.Res.Rate] = t
		}
		t.stamped += lr.Res.TxStamped
		t.sent += lr.Res.Sent
	}
	// Rates that share a clock are named together.
	var hows []string
	ratesOf := map[string][]string{}
	for _, rate := range rates {
		t := byRate[rate]
		if t == nil {
			continue
		}
		var how string
		switch {
		case t.stamped == 0 && rate >= lossRate:
			how = "the clock read right before each write(2) (no kernel transmit timestamps: they cost the generator about a sixth of its rate)"
		case t.stamped == 0:
			how = "the clock read right before each write(2): the kernel gave no transmit timestamps"
		case t.stamped == t.sent:
			how = "the kernel's software transmit timestamp of every request (SO_TIMESTAMPING, TX_SOFTWARE: taken as the veth driver takes the frame)"
		default:
			how = fmt.Sprintf("the kernel's software transmit timestamp for %s of %s requests, the clock read right before write(2) for the rest", fmtCount(t.stamped), fmtCount(t.sent))
		}
		if ratesOf[how] == nil {
			hows = append(hows, how)
		}
		ratesOf[how] = append(ratesOf[how], fmtCount(rate)+"/s")
	}
	if len(hows) == 0 {
		return "none measured"
	}
	var parts []string
	for _, how := range hows {
		parts = append(parts, fmt.Sprintf("at %s, %s", strings.Join(ratesOf[how], " and "), how))
	}
	return strings.Join(parts, "; ")
}
