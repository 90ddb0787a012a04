package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/tools/loadgen"
)

// The lab. Documentation prefixes only (RFC 5737, RFC 3849).
var (
	kernelAddr = map[family]netip.Addr{v4: netip.MustParseAddr("192.0.2.1"), v6: netip.MustParseAddr("2001:db8::1")}
	vipAddr    = map[family]netip.Addr{v4: netip.MustParseAddr("192.0.2.10"), v6: netip.MustParseAddr("2001:db8::10")}
	unheldAddr = map[family]netip.Addr{v4: netip.MustParseAddr("192.0.2.99"), v6: netip.MustParseAddr("2001:db8::99")}
	senderAddr = map[family]netip.Addr{v4: netip.MustParseAddr("192.0.2.3"), v6: netip.MustParseAddr("2001:db8::f000:0")}
	labHosts   = []lab.HostConfig{
		{Name: "a", IPv4: netip.MustParsePrefix("192.0.2.1/24"), IPv6: netip.MustParsePrefix("2001:db8::1/64")},
		{Name: "b", IPv4: netip.MustParsePrefix("192.0.2.2/24"), IPv6: netip.MustParsePrefix("2001:db8::2/64")},
		{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24"), IPv6: netip.MustParsePrefix("2001:db8::3/64")},
	}
)

type family string

const (
	v4 family = "IPv4"
	v6 family = "IPv6"
)

var families = []family{v4, v6}

// Rates of the load runs: the first two for latency, the last for loss.
var rates = []int{1000, 20000, 100000}

const lossRate = 100000

// errSkipped marks a step that did not run because one it needs failed.
var errSkipped = errors.New("skipped")

// bench is one run of the driver.
type bench struct {
	o   *options
	log io.Writer
	rep *report

	dir    string // sockets, address files, the vip and etcd binaries
	vipBin string
	lab    *lab.Lab
	labErr error
	a, b   *lab.Host
	client *lab.Host
	agent  *agent
	runID  uint8

	loads   map[string]*loadRow // by loadKey
	unheld  map[family]*cpuUse
	unheldN map[family]*loadgen.Result
	ran     map[string]error // steps run, by name
	idle    *cpuUse
	idleRSS int64
	tenK    map[string]*tenKResult // by responder
	claim   *claimResult
	sched   []*schedVariant
	wire    *schedVariant
	fleet   *fleetResult
	// failover is keepalived's takeovers and vip's, side by side.
	failover *failoverResult
	// fleetBroke are the fleet step's sizes that fenced themselves.
	fleetBroke []brokenFleet
}

func newBench(o *options, log io.Writer) *bench {
	return &bench{
		o: o, log: log,
		rep:     &report{Short: o.short},
		loads:   map[string]*loadRow{},
		unheld:  map[family]*cpuUse{},
		unheldN: map[family]*loadgen.Result{},
		ran:     map[string]error{},
		tenK:    map[string]*tenKResult{},
	}
}

func loadKey(responder string, f family, rate int) string {
	return fmt.Sprintf("%s %s %d", responder, f, rate)
}

// duration returns how long a load run at rate lasts.
func (b *bench) duration(rate int) time.Duration {
	switch {
	case b.o.short && rate <= 1000:
		return 2 * time.Second
	case b.o.short:
		return time.Second
	case rate <= 1000:
		return 10 * time.Second
	}
	return 5 * time.Second
}

func (b *bench) idleFor() time.Duration {
	if b.o.short {
		return 5 * time.Second
	}
	return time.Minute
}

func (b *bench) unheldFor() time.Duration {
	if b.o.short {
		return 3 * time.Second
	}
	return 10 * time.Second
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "vipbench: "+format+"\n", args...)
}

// selected reports whether a lab step is to run.
func (b *bench) selected(name string) bool {
	return b.o.only == nil || b.o.only.MatchString(name)
}

// step runs fn under its own timeout and records how long it took and how
// it ended.
func (b *bench) step(ctx context.Context, name string, timeout time.Duration, fn func(context.Context) error) error {
	start := time.Now()
	b.logf("%s …", name)
	var err error
	if ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", errSkipped, context.Cause(ctx))
	} else {
		sctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%s took longer than %v", name, timeout))
		err = fn(sctx)
		if err == nil && sctx.Err() != nil {
			err = context.Cause(sctx)
		}
		cancel()
	}
	took := time.Since(start)
	b.rep.Steps = append(b.rep.Steps, step{Name: name, Took: took, Err: err})
	b.ran[name] = err
	if err != nil {
		b.logf("%s failed after %v: %v", name, took.Round(time.Millisecond), err)
	} else {
		b.logf("%s done in %v", name, took.Round(time.Millisecond))
	}
	return err
}

// run does everything and returns the report; the lab and the agent are
// gone when it returns.
func (b *bench) run(ctx context.Context) *report {
	b.rep.Machine = describeMachine(ctx, b.o.goTool)
	b.rep.LoadBefore = loadAvg()
	if f := strings.Fields(b.rep.LoadBefore); len(f) > 0 {
		if l, err := strconv.ParseFloat(f[0], 64); err == nil && l > 0.5*float64(b.rep.Machine.Cores) {
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("The machine was not idle: a load average of %.2f on %d cores when the run started. "+
				"Other work competed with the generator and the responders; the load table's machine column shows how busy all cores were during each run.", l, b.rep.Machine.Cores))
		}
	}
	defer func() { b.rep.LoadAfter = loadAvg() }()
	b.rep.IdleSecs = int(b.idleFor().Seconds())
	b.rep.Clock = "none measured"

	if b.o.goBench {
		pkgs := strings.Fields(b.o.pkgs)
		b.step(ctx, "Go benchmarks", 15*time.Minute, func(ctx context.Context) error {
			res, cmdline, err := runGoBench(ctx, b.o.goTool, pkgs)
			b.rep.GoBench, b.rep.GoCmd = res, cmdline
			b.rep.GoErr = err
			return err
		})
	}

	// The scheduler in process, before the build and the lab load the
	// machine.
	if b.selected(schedStep) {
		b.step(ctx, schedStep, time.Duration(b.schedRuns())*20*time.Second, b.schedulerRun)
	}

	// The fleet in process, in a lab of its own, gone before the main lab
	// comes up: its thousand agents would compete with every later step.
	dir, err := os.MkdirTemp("", "vipbench-")
	if err != nil {
		b.rep.Steps = append(b.rep.Steps, step{Name: "set up", Err: err})
		return b.rep
	}
	b.dir = dir
	defer os.RemoveAll(dir)
	if b.selected(fleetStep) || b.selected(failoverStep) {
		b.step(ctx, etcdStep, 5*time.Minute, b.buildEtcd)
	}
	if b.selected(fleetStep) {
		b.step(ctx, fleetStep, b.fleetConfig().timeout(), b.fleetRun)
	}

	vipErr := b.step(ctx, "build vip", 5*time.Minute, b.buildVip)
	// keepalived and vip killed in turn, in a lab of their own, gone
	// before the main lab comes up.
	if b.selected(failoverStep) {
		b.step(ctx, failoverStep, b.failoverConfig().timeout(), b.failoverRun)
	}
	labErr := b.step(ctx, "lab up", 30*time.Second, b.labUp)
	defer b.teardown()
	if labErr != nil {
		b.labErr = labErr
	}

	// The kernel first, with no vip on the segment.
	for _, f := range families {
		for _, rate := range rates {
			name := fmt.Sprintf("kernel %s %s/s", f, fmtCount(rate))
			if !b.selected(name) {
				continue
			}
			b.step(ctx, name, b.duration(rate)+30*time.Second, func(ctx context.Context) error {
				return b.loadRun(ctx, "kernel", f, rate, kernelAddr[f])
			})
		}
	}

	for _, f := range families {
		name := loadStep("kernel", f, busyRate) + busySuffix
		if !b.selected(name) {
			continue
		}
		b.step(ctx, name, b.duration(busyRate)+30*time.Second, func(ctx context.Context) error {
			return b.busyRun(ctx, "kernel", f, kernelAddr[f])
		})
	}

	// The userspace floor, on b before vip runs there.
	for _, fr := range floorResponders {
		for _, rate := range rates[:2] {
			name := floorStep(fr.name, rate)
			if !b.selected(name) {
				continue
			}
			b.step(ctx, name, b.duration(rate)+30*time.Second, func(ctx context.Context) error {
				return b.floorRun(ctx, fr.name, fr.spin, rate)
			})
		}
	}

	// vip: an agent on b holding both addresses, with each responder in
	// turn.
	b.runResponders(ctx, vipErr, labErr)
	b.finish()
	return b.rep
}

// etcdStep builds the etcd the fleet and failover steps run.
const etcdStep = "build etcd"

// buildEtcd builds etcd from go.mod's go.etcd.io/etcd/server/v3 (the
// version the embedded test store runs, and the client speaks to), unless
// -etcd names a binary, and has the labs run it (etcdlab.EnvBinary).
// Debian's etcd-server is 3.4, whose every response header copied the
// store's read buffer: at rest, a thousand agents' keepalives cost it 64%
// of a core against 21% for 3.7 (BENCHMARKS.md's findings).
func (b *bench) buildEtcd(ctx context.Context) error {
	bin := b.o.etcd
	if bin == "" {
		bin = filepath.Join(b.dir, "etcd")
		cmd := exec.CommandContext(ctx, b.o.goTool, "build", "-o", bin, "go.etcd.io/etcd/server/v3")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build go.etcd.io/etcd/server/v3 (run vipbench from the repository, or name an etcd with -etcd): %w\n%s", err, tail(out, 30))
		}
	}
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", bin, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	b.rep.EtcdVersion = strings.TrimSpace(strings.TrimPrefix(first, "etcd Version:"))
	if b.o.etcd == "" {
		b.rep.EtcdVersion += ", built from go.mod"
	}
	return os.Setenv(etcdlab.EnvBinary, bin)
}

func (b *bench) buildVip(ctx context.Context) error {
	if b.o.vip != "" {
		if _, err := os.Stat(b.o.vip); err != nil {
			return fmt.Errorf("-vip: %w", err)
		}
		b.vipBin = b.o.vip
		return nil
	}
	built := filepath.Join(b.dir, "vip.built")
	// By its import path, so that a test of the driver, which runs in
	// tools/vipbench, builds it too.
	cmd := exec.CommandContext(ctx, b.o.goTool, "build", "-o", built, "github.com/vipctl/vip/cmd/vip")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/vip (run vipbench from the repository): %w\n%s", err, tail(out, 30))
	}
	b.vipBin = filepath.Join(b.dir, "vip")
	return install(built, b.vipBin)
}

// install copies the binary at from to a new file at to, as a package's
// install does (dpkg, install(1): written with write(2)), and removes
// from. The linker's own output, written through a mapping, is mapped
// back by a process that runs it in larger pieces of the page cache: an
// idle agent run from it had 6 MB more of the binary's pages resident
// (RssFile 25.2 against 19.1 MB, twice each, the same build), which no
// installed agent has.
func install(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("install vip: %w", err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("install vip: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("install vip: %w", err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("install vip: %w", err)
	}
	return os.Remove(from)
}

func (b *bench) labUp(ctx context.Context) error {
	for _, tool := range []string{"ip", "bridge", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the lab needs %s (iproute2, procps): %w", tool, err)
		}
	}
	prefix := "vb" + strconv.FormatInt(int64(os.Getpid()), 36)
	if err := lab.Clean(prefix); err != nil {
		return err
	}
	l, err := lab.Up(ctx, lab.Config{Prefix: prefix, Hosts: labHosts})
	if err != nil {
		return err
	}
	b.lab = l
	b.a, b.b, b.client = l.Host("a"), l.Host("b"), l.Host("client")
	return b.quietSwitch(ctx)
}

// quietSwitch makes the bridge behave as a switch that has learned where
// the askers are. Replies go to the load generator's sequence addresses,
// which the bridge never learns; flooded, every reply would also be
// delivered to the two responders' hosts, and that work would land on
// whoever sends the reply: inside the generator's own write for the
// kernel, on vip's thread for vip. With unknown-unicast flooding off on
// a's and b's ports, and their own addresses pinned there, replies reach
// the client alone, as on a switch that knows the asker. Broadcast and
// multicast still reach every port.
func (b *bench) quietSwitch(ctx context.Context) error {
	for _, h := range []*lab.Host{b.a, b.b} {
		link := h.Links[0]
		for _, args := range [][]string{
			{"link", "set", "dev", link.BridgePort, "flood", "off"},
			{"fdb", "replace", link.MAC.String(), "dev", link.BridgePort, "master", "static"},
		} {
			cmd := exec.CommandContext(ctx, "bridge", append([]string{"-n", b.lab.Switch}, args...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("bridge %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
			}
		}
	}
	return nil
}

func (b *bench) teardown() {
	if b.agent != nil {
		if err := b.agent.stop(); err != nil {
			b.logf("stop the agent: %v", err)
		}
	}
	if b.lab != nil {
		if err := b.lab.Down(); err != nil {
			b.logf("lab down: %v", err)
		}
	}
}

func netnsPath(h *lab.Host) string { return filepath.Join("/run/netns", h.Netns) }

// loadRun runs one load against target and keeps the result.
func (b *bench) loadRun(ctx context.Context, responder string, f family, rate int, target netip.Addr) error {
	if b.lab == nil {
		return fmt.Errorf("%w: no lab: %v", errSkipped, b.labErr)
	}
	b.runID++
	cfg := loadgen.Config{
		Netns: netnsPath(b.client), Interface: "eth0",
		Target: target, Sender: senderAddr[f],
		Rate: rate, Count: rate * int(b.duration(rate)/time.Second),
		Run: b.runID,
		// Kernel transmit timestamps for the latency runs. The loss runs
		// do without: taking and reading them costs the generator about a
		// sixth of its rate, which at 100,000/s it does not have to spare.
		TxTimestamps: rate < lossRate,
	}
	lr := &loadRow{Responder: responder, CaptureReceived: -1, CaptureDropped: -1, Busy: -1}
	var meter *cpuMeter
	var capt0 *api.CaptureStat
	if strings.HasPrefix(responder, "vip") {
		capt0 = b.agent.capture(ctx)
		m, err := startCPU(b.agent.pid)
		if err != nil {
			return err
		}
		meter = m
	}
	machine := startMachine()
	res, err := loadgen.Run(ctx, cfg)
	if busy, ok := machine.stop(); ok {
		lr.Busy = busy
	}
	if meter != nil {
		if use, err := meter.stop(); err == nil {
			lr.CPU = &use
		}
		if capt1 := b.agent.capture(ctx); capt0 != nil && capt1 != nil {
			lr.CaptureReceived = int64(capt1.Received - capt0.Received)
			lr.CaptureDropped = int64(capt1.Dropped - capt0.Dropped)
		}
	}
	if err != nil {
		return err
	}
	lr.Res = res
	b.loads[loadKey(responder, f, rate)] = lr
	b.rep.Loads = append(b.rep.Loads, *lr)
	b.logf("  %s %s %d/s: sent %d (%.0f/s), answered %d, lost %d, dup %d, median %v, p99 %v, gen drops %d",
		responder, f, rate, res.Sent, res.AchievedRate(), res.Answered, res.Lost, res.Duplicates,
		res.Median(), res.P99(), res.RecvDrops)
	return nil
}

// unheldRun floods the segment with requests for an address nobody holds
// and measures the agent's CPU meanwhile.
func (b *bench) unheldRun(ctx context.Context, f family) error {
	b.runID++
	n := lossRate * int(b.unheldFor()/time.Second)
	capt0 := b.agent.capture(ctx)
	meter, err := startCPU(b.agent.pid)
	if err != nil {
		return err
	}
	machine := startMachine()
	res, err := loadgen.Run(ctx, loadgen.Config{
		Netns: netnsPath(b.client), Interface: "eth0",
		Target: unheldAddr[f], Sender: senderAddr[f],
		Rate: lossRate, Count: n, Wait: 100 * time.Millisecond,
		Run: b.runID,
	})
	use, merr := meter.stop()
	busy, ok := machine.stop()
	if !ok {
		busy = -1
	}
	if err := errors.Join(err, merr); err != nil {
		return err
	}
	if res.Answered != 0 {
		return fmt.Errorf("%d requests for %s, which nobody holds, were answered by %s", res.Answered, unheldAddr[f], sortedResponders(res.Responders))
	}
	b.unheld[f] = &use
	b.unheldN[f] = res
	lr := loadRow{Responder: "vip", Res: res, CPU: &use, CaptureReceived: -1, Busy: busy}
	if capt1 := b.agent.capture(ctx); capt0 != nil && capt1 != nil {
		lr.CaptureReceived = int64(capt1.Received - capt0.Received)
		lr.CaptureDropped = int64(capt1.Dropped - capt0.Dropped)
	}
	b.rep.Loads = append(b.rep.Loads, lr)
	b.logf("  unheld %s: sent %d (%.0f/s), agent CPU %.2f%% of a core", f, res.Sent, res.AchievedRate(), use.Percent())
	return nil
}

// idleRun measures the agent holding one claim and nothing happening.
func (b *bench) idleRun(ctx context.Context, v vipResponder) error {
	// A fresh agent: the one before has answered over a million requests
	// from thousands of senders by now, which it keeps counts of, and is
	// measured as such in the load runs. Idle is an agent that holds a
	// claim and has done nothing else (after the load runs, the same
	// agent idled at 41.3 MB and 0.75% of a core, still sweeping them).
	if err := b.agent.stop(); err != nil {
		b.logf("stop the agent: %v", err)
	}
	if err := b.startAgentAs(ctx, v, v.step+" idle"); err != nil {
		return err
	}
	if _, err := b.vip(ctx, "release", vipAddr[v6].String()); err != nil {
		return err
	}
	// Let the release settle (the group leave, its MLD report).
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	meter, err := startCPU(b.agent.pid)
	if err != nil {
		return err
	}
	select {
	case <-time.After(b.idleFor()):
	case <-ctx.Done():
		return ctx.Err()
	}
	use, err := meter.stop()
	if err != nil {
		return err
	}
	rss, err := rssKiB(b.agent.pid)
	if err != nil {
		return err
	}
	b.idle, b.idleRSS = &use, rss
	if anon, file, err := rssParts(b.agent.pid); err == nil {
		b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("Idle RSS: %s, %s anonymous (the Go heap and stacks), "+
			"%s file-backed (the pages of the vip binary and its libraries, shared with the page cache).", fmtMB(rss), fmtMB(anon), fmtMB(file)))
	}
	b.logf("  idle: %.3f%% of a core over %v, RSS %s", use.Percent(), use.Wall.Round(time.Millisecond), fmtMB(rss))
	return nil
}
