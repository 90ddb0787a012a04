package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vipctl/vip/announce"
)

// The gratuitous scheduler with 10,000 VIPs, measured in this process on
// the real clock, two ways: the real announce.Scheduler with its defaults
// and a RoundSender that records when each round went out and how many
// frames it had; and a real announce.Engine with its defaults, claiming
// the 10,000 addresses in one request over a Port that records the same
// (so its probes, its lock and its callbacks are in the picture). No lab,
// no sockets: what is measured is the timing and the pace, not the cost
// of the sends.
const (
	schedStep = "gratuitous scheduler, 10,000 VIPs"
	schedVIPs = 10000
	// schedCost is the frames of one IPv4 round with the default frames
	// (ARP request and reply), the most any family sends by default.
	schedCost = 2
	// schedTarget is issue 7's bound on the lateness of a round.
	schedTarget = 5 * time.Millisecond
)

// schedWindows are the sliding windows the pace is checked over.
var schedWindows = []time.Duration{100 * time.Millisecond, time.Second}

// schedSend is one round as the sender saw it.
type schedSend struct {
	key    int32
	frames int32
	at     time.Duration // since the run's base, when SendRound was called
	// probe marks a probe rather than a gratuitous round: it counts
	// against the cap like any frame, and is no round of its key.
	probe bool
}

// schedRun is one run: 10,000 keys armed at once and every round of their
// windows.
type schedRun struct {
	cfg   announce.SchedulerConfig // defaults filled in
	arms  []time.Duration          // by key, since base: right before its Arm
	sends []schedSend              // in the order sent
	// late is the scheduler's own BurstEvent.Late of every round after
	// each key's first, a cross-check of the recorder's view.
	late []time.Duration
}

// schedRecorder is the RoundSender of a run. SendRound runs on the
// scheduler's single sender goroutine; the slice is read after Run returns.
type schedRecorder struct {
	base  time.Time
	sends []schedSend

	mu    sync.Mutex // events come from Arm's caller and the sender
	late  []time.Duration
	ends  int
	want  int
	ended chan struct{}
}

// schedKey is the i-th VIP: 198.18.0.0/15, the benchmarking range of RFC
// 2544, which never leaves this process.
func schedKey(i int) announce.Key {
	return announce.Key{Ifindex: 1, Addr: netip.AddrFrom4([4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)})}
}

func schedIndex(k announce.Key) int32 {
	a := k.Addr.As4()
	return int32(a[1]-18)<<16 | int32(a[2])<<8 | int32(a[3])
}

func (r *schedRecorder) SendRound(_ context.Context, k announce.Key) (int, error) {
	r.sends = append(r.sends, schedSend{key: schedIndex(k), frames: schedCost, at: time.Since(r.base)})
	return schedCost, nil
}

func (r *schedRecorder) event(ev announce.BurstEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case ev.Kind == announce.BurstRound && ev.Round > 1:
		r.late = append(r.late, ev.Late)
	case ev.Kind == announce.BurstEnd:
		r.ends++
		if r.ends == r.want {
			close(r.ended)
		}
	}
}

// runScheduler arms n keys at once on a fresh Scheduler with the defaults
// and records every round until every window has closed.
func runScheduler(ctx context.Context, n int) (*schedRun, error) {
	rec := &schedRecorder{sends: make([]schedSend, 0, 8*n), late: make([]time.Duration, 0, 8*n), want: n, ended: make(chan struct{})}
	s := announce.NewScheduler(announce.SchedulerConfig{OnEvent: rec.event}, rec)
	run := &schedRun{cfg: s.Config(), arms: make([]time.Duration, n)}
	keys := make([]announce.Key, n)
	for i := range keys {
		keys[i] = schedKey(i)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	rec.base = time.Now()
	go func() { done <- s.Run(rctx) }()
	for i, k := range keys {
		run.arms[i] = time.Since(rec.base)
		s.Arm(k, s.Burst(0, 0, false, schedCost))
	}
	var err error
	select {
	case <-rec.ended:
	case <-time.After(run.cfg.Window + 10*time.Second):
		err = fmt.Errorf("the windows of %d keys had not closed %v after they were armed", n-rec.endCount(), run.cfg.Window+10*time.Second)
	case <-ctx.Done():
		err = ctx.Err()
	}
	stop()
	<-done
	run.sends, run.late = rec.sends, rec.late
	return run, err
}

func (r *schedRecorder) endCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ends
}

// schedStats is what a run shows.
type schedStats struct {
	// Frames counts every frame, probes too.
	Keys, Rounds, Probes, Frames int
	// WantRounds is how many rounds a window holds when they are on time:
	// the first at once, then one every Interval up to Window.
	WantRounds           int
	MinRounds, MaxRounds int
	// Short counts keys that got fewer than WantRounds.
	Short int
	// Late is the lateness of every round after a key's first, sorted: how
	// long after its due time it went out, where it is due Interval after
	// that key's previous round went out (both as the sender saw them).
	Late []time.Duration
	// OverTarget counts rounds in Late later than schedTarget.
	OverTarget int
	// MinGap is the least time between two rounds of one key.
	MinGap time.Duration
	// Drift is the most a round went out after the time its key's first
	// round and whole Intervals make: lateness added up over a burst.
	Drift time.Duration
	// CapLate is the most lateness of a later round that an ideal sender
	// would have had too: one that sends the rounds in the same order,
	// each as soon as it is due and the bucket holds its frames. It is
	// what the cap forced (and the order, which the scheduler chooses by
	// due time); the rest of Late is the sender's own.
	CapLate time.Duration
	// FirstDelay is each key's first round after its Arm, sorted.
	FirstDelay []time.Duration
	// FirstSpread is from the first Arm to the last first round; CapSpread
	// is the least the cap allows for that many frames.
	FirstSpread, CapSpread time.Duration
	// FirstExcess is how long after the earliest time the cap allowed each
	// first round went out, in the order they went out, sorted.
	FirstExcess []time.Duration
	// SchedLate is the scheduler's own report (BurstEvent.Late) for the
	// same rounds as Late, sorted.
	SchedLate []time.Duration
	Pace      []paceStat
	// FirstArm is the first Arm, from the start of the run (the request,
	// through the engine); ArmTook is from the first Arm to the last.
	FirstArm, ArmTook time.Duration
}

// paceStat is the most frames in any stretch of Window.
type paceStat struct {
	Window time.Duration
	Max    int
	// Limit is what the cap allows in Window, as seen where SendRound is
	// called: Rate·Window + Bucket, and one round more. The scheduler
	// charges a round when it takes it and sends it right after, so the
	// frames counted in a window are those charged within it and at most
	// the one round charged just before it opened.
	Limit int
}

// lateOK reports whether the later rounds meet issue 7's target: every
// round sent (none missing, none closer than Interval to the one before),
// p99 lateness under schedTarget.
func (st *schedStats) lateOK(interval time.Duration) bool {
	return st.Short == 0 && st.MinGap >= interval && pctl(st.Late, 0.99) < schedTarget
}

// firstOK reports whether the first rounds went out, at the 99th
// percentile, within schedTarget of the earliest the cap allowed.
func (st *schedStats) firstOK() bool { return pctl(st.FirstExcess, 0.99) < schedTarget }

// paceOK reports whether no window held more frames than the cap allows.
func (st *schedStats) paceOK() bool {
	for _, p := range st.Pace {
		if p.Max > p.Limit {
			return false
		}
	}
	return true
}

func (r *schedRun) stats() *schedStats {
	cfg := r.cfg
	n := len(r.arms)
	st := &schedStats{Keys: n, WantRounds: 1 + int(cfg.Window/cfg.Interval), MinGap: time.Duration(math.MaxInt64)}
	if n > 0 {
		st.FirstArm, st.ArmTook = r.arms[0], r.arms[n-1]-r.arms[0]
	}
	rate := cfg.Rate / float64(time.Second) // frames per nanosecond

	first := make([]time.Duration, n) // when each key's first round went out
	prev := make([]time.Duration, n)  // when its latest round went out
	rounds := make([]int, n)
	// An ideal sender, in the same order: it sends each round at its due
	// time or as soon as the bucket holds its frames, whichever is later.
	var ideal time.Duration
	tokens, filled := float64(cfg.Bucket), time.Duration(0)
	var firstFrames, maxCost int
	for _, s := range r.sends {
		maxCost = max(maxCost, int(s.frames))
		k := s.key
		st.Frames += int(s.frames)
		due := s.at // a probe: when it went out
		if !s.probe {
			rounds[k]++
			due = r.arms[k]
			if rounds[k] > 1 {
				due = prev[k] + cfg.Interval
			}
		}
		ideal = max(ideal, due)
		tokens = min(float64(cfg.Bucket), tokens+float64(ideal-filled)*rate)
		filled = ideal
		if need := float64(s.frames) - tokens; need > 0 {
			ideal += time.Duration(math.Ceil(need / rate))
			tokens, filled = float64(s.frames), ideal
		}
		tokens -= float64(s.frames)
		if s.probe {
			st.Probes++
			continue
		}
		st.Rounds++
		if rounds[k] == 1 {
			first[k] = s.at
			firstFrames += int(s.frames)
			st.FirstDelay = append(st.FirstDelay, s.at-r.arms[k])
			st.FirstExcess = append(st.FirstExcess, max(s.at-ideal, 0))
			st.FirstSpread = max(st.FirstSpread, s.at-r.arms[0])
		} else {
			gap := s.at - prev[k]
			st.MinGap = min(st.MinGap, gap)
			st.Late = append(st.Late, gap-cfg.Interval)
			st.Drift = max(st.Drift, s.at-first[k]-time.Duration(rounds[k]-1)*cfg.Interval)
			st.CapLate = max(st.CapLate, ideal-due)
		}
		prev[k] = s.at
	}
	if st.MinGap == time.Duration(math.MaxInt64) {
		st.MinGap = 0
	}
	st.MinRounds, st.MaxRounds = math.MaxInt, 0
	for _, c := range rounds {
		st.MinRounds, st.MaxRounds = min(st.MinRounds, c), max(st.MaxRounds, c)
		if c < st.WantRounds {
			st.Short++
		}
	}
	st.CapSpread = time.Duration(max(0, float64(firstFrames-cfg.Bucket)/rate))
	for _, l := range st.Late {
		if l > schedTarget {
			st.OverTarget++
		}
	}
	slices.Sort(st.Late)
	slices.Sort(st.FirstDelay)
	slices.Sort(st.FirstExcess)
	st.SchedLate = slices.Sorted(slices.Values(r.late))
	for _, w := range schedWindows {
		st.Pace = append(st.Pace, paceStat{Window: w, Max: maxInWindow(r.sends, w), Limit: int(cfg.Rate*w.Seconds()) + cfg.Bucket + maxCost})
	}
	return st
}

// maxInWindow returns the most frames sent within any stretch of w: sends
// at times t with end−w < t ≤ end, for every end.
func maxInWindow(sends []schedSend, w time.Duration) int {
	best, sum, lo := 0, 0, 0
	for _, s := range sends {
		sum += int(s.frames)
		for sends[lo].at <= s.at-w {
			sum -= int(sends[lo].frames)
			lo++
		}
		best = max(best, sum)
	}
	return best
}

// pctl returns the nearest-rank p-quantile of sorted ds, 0 if empty.
func pctl(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// schedVariant is one way of driving the scheduler, and its runs.
type schedVariant struct {
	// name heads the variant's rows, step is the step that measures it
	// and from says where its first rounds are counted from.
	name, step, from string
	run              func(context.Context, int) (*schedRun, error)
	cfg              announce.SchedulerConfig
	// stats and busy (how busy all cores were, 0 to 1; -1 unknown) are
	// by run.
	stats []*schedStats
	busy  []float64
	// invalid, when set, says why the measurement is in doubt.
	invalid string
}

func schedVariants() []*schedVariant {
	return []*schedVariant{
		{name: fmt.Sprintf("gratuitous scheduler, %s IPv4 VIPs armed at once", fmtCount(schedVIPs)), step: schedStep, from: "the first claim", run: runScheduler},
		{name: fmt.Sprintf("gratuitous scheduler through the engine, %s IPv4 claims in one request (probes too)", fmtCount(schedVIPs)), step: schedStep, from: "the first claim", run: runEngine},
	}
}

// schedRuns is how many times the step runs each variant.
func (b *bench) schedRuns() int {
	if b.o.short {
		return 1
	}
	return 3
}

// schedulerRun is the step: each variant, schedRuns times, one after
// another.
func (b *bench) schedulerRun(ctx context.Context) error {
	vs := schedVariants()
	b.sched = vs
	for i := range b.schedRuns() {
		for _, v := range vs {
			machine := startMachine()
			run, err := v.run(ctx, schedVIPs)
			busy, ok := machine.stop()
			if !ok {
				busy = -1
			}
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			st := run.stats()
			v.cfg = run.cfg
			v.stats = append(v.stats, st)
			v.busy = append(v.busy, busy)
			b.logf("  %s, run %d: %s", v.name, i+1, st.summary())
		}
	}
	return nil
}

// summary is a run in one line, for the log and the notes.
func (st *schedStats) summary() string {
	pace := ""
	for _, p := range st.Pace {
		pace += fmt.Sprintf(", most in %v %s (limit %s)", p.Window, fmtCount(p.Max), fmtCount(p.Limit))
	}
	own := ""
	if len(st.SchedLate) > 0 {
		own = fmt.Sprintf("; the scheduler's own BurstEvent.Late p99 %s", fmtDur(pctl(st.SchedLate, 0.99)))
	}
	probes := ""
	if st.Probes > 0 {
		probes = fmt.Sprintf(" and %s probes", fmtCount(st.Probes))
	}
	armed := "first rounds counted from the first frame"
	if st.FirstArm > 0 || st.ArmTook > 0 {
		armed = fmt.Sprintf("armed from %s to %s", fmtDur(st.FirstArm), fmtDur(st.FirstArm+st.ArmTook))
	}
	return fmt.Sprintf("%s; %s rounds%s, %s frames; %d–%d rounds per VIP (%s short of %d); "+
		"later rounds late p50 %s, p99 %s, max %s (%s over %v%s), least gap %s, drift over a burst %s, an ideal sender in the same order late by at most %s; "+
		"first rounds spread %s (the cap allows %s), delay p50 %s, max %s, beyond the cap p99 %s, max %s%s",
		armed, fmtCount(st.Rounds), probes, fmtCount(st.Frames),
		st.MinRounds, st.MaxRounds, fmtCount(st.Short), st.WantRounds,
		fmtDur(pctl(st.Late, 0.5)), fmtDur(pctl(st.Late, 0.99)), fmtDur(pctl(st.Late, 1)), fmtCount(st.OverTarget), schedTarget, own,
		fmtDur(st.MinGap), fmtDur(st.Drift), fmtDur(st.CapLate),
		fmtDur(st.FirstSpread), fmtDur(st.CapSpread), fmtDur(pctl(st.FirstDelay, 0.5)), fmtDur(pctl(st.FirstDelay, 1)),
		fmtDur(pctl(st.FirstExcess, 0.99)), fmtDur(pctl(st.FirstExcess, 1)), pace)
}

// schedRows adds three rows a variant to the main table (lateness of later
// rounds, the first round, the pace), each the worst of the runs, and
// every run to the notes.
func (b *bench) schedRows() {
	if _, ok := b.ran[schedStep]; ok {
		vs := b.sched
		if vs == nil {
			vs = schedVariants()
		}
		for _, v := range vs {
			b.schedVariantRows(v)
		}
	}
	if _, ok := b.ran[tenKStep]; ok {
		v := b.wire
		if v == nil {
			v = wireVariant(announce.SchedulerConfig{})
		}
		b.schedVariantRows(v)
	}
}

func (b *bench) schedVariantRows(v *schedVariant) {
	r := b.rep
	late := row{Scenario: v.name + ": lateness of every later round, p99 (max)", Kernel: "—", Ratio: "—",
		Target: fmt.Sprintf("every round sent, p99 < %v", schedTarget)}
	first := row{Scenario: v.name + ": first round of all, from " + v.from + " to the last round sent", Kernel: "—", Ratio: "—",
		Target: fmt.Sprintf("p99 within %v of what the cap allows", schedTarget)}
	pace := row{Scenario: v.name + ": most frames in any 100 ms / 1 s", Kernel: "—", Ratio: "—", Target: "within the rate cap"}
	if len(v.stats) == 0 {
		late.Vip, late.Met, _ = b.missing(v.step)
		first.Vip, first.Met = late.Vip, late.Met
		pace.Vip, pace.Met = late.Vip, late.Met
		r.Rows = append(r.Rows, late, first, pace)
		return
	}
	cfg := v.cfg
	var (
		p99, worst, excess, spread, capSpread time.Duration
		short, rounds, over                   int
		lateOK, firstOK, paceOK               = true, true, true
		most                                  = make([]int, len(schedWindows))
		limits                                = make([]int, len(schedWindows))
	)
	for i, st := range v.stats {
		p99, worst = max(p99, pctl(st.Late, 0.99)), max(worst, pctl(st.Late, 1))
		excess = max(excess, pctl(st.FirstExcess, 0.99))
		spread, capSpread = max(spread, st.FirstSpread), max(capSpread, st.CapSpread)
		short += st.Short
		rounds += len(st.Late)
		over += st.OverTarget
		lateOK = lateOK && st.lateOK(cfg.Interval)
		firstOK = firstOK && st.firstOK()
		paceOK = paceOK && st.paceOK()
		for j, p := range st.Pace {
			most[j], limits[j] = max(most[j], p.Max), p.Limit
		}
		busy := ""
		if v.busy[i] >= 0 {
			busy = fmt.Sprintf(" All cores together were %.0f%% busy over the run.", 100*v.busy[i])
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%s, run %d of %d: %s.%s", strings.ToUpper(v.name[:1])+v.name[1:], i+1, len(v.stats), st.summary(), busy))
	}
	runs := fmt.Sprintf("%d runs", len(v.stats))
	if len(v.stats) == 1 {
		runs = "1 run"
	}
	late.Vip = fmt.Sprintf("%s (%s) over %s rounds in %s; %s later than %v; %s VIPs short of %d rounds",
		fmtDur(p99), fmtDur(worst), fmtCount(rounds), runs, fmtCount(over), schedTarget, fmtCount(short), v.stats[0].WantRounds)
	late.Met = verdictOf(lateOK)
	first.Vip = fmt.Sprintf("%s (the cap allows %s at best); p99 beyond the cap %s", fmtDur(spread), fmtDur(capSpread), fmtDur(excess))
	first.Met = verdictOf(firstOK)
	pace.Vip = fmt.Sprintf("%s / %s", fmtCount(most[0]), fmtCount(most[1]))
	pace.Target = fmt.Sprintf("≤ %s / %s", fmtCount(limits[0]), fmtCount(limits[1]))
	pace.Met = verdictOf(paceOK)
	if v.invalid != "" {
		late.Met, first.Met, pace.Met = invalid, invalid, invalid
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %s.", strings.ToUpper(v.name[:1])+v.name[1:], v.invalid))
	}
	r.Rows = append(r.Rows, late, first, pace)
}

// benchPort is an announce.Port that sends nothing and records when the
// engine's rounds and probes went out. The engine calls Announce and Probe
// from the scheduler's single sender goroutine only.
type benchPort struct {
	uncounted
	base  time.Time
	sends []schedSend
}

func (p *benchPort) Hold(...netip.Addr) error        { return nil }
func (p *benchPort) LetGo(...netip.Addr) error       { return nil }
func (p *benchPort) Answered(netip.Addr) uint64      { return 0 }
func (p *benchPort) Close() error                    { return nil }
func (p *benchPort) Name() string                    { return "bench0" }
func (p *benchPort) Index() int                      { return 1 }
func (p *benchPort) MAC() net.HardwareAddr           { return net.HardwareAddr{0x02, 0, 0, 0, 0, 1} }
func (p *benchPort) Probe(a netip.Addr) (int, error) { return p.record(a, 1, true), nil }

func (p *benchPort) Announce(a netip.Addr, f announce.FrameKinds) (int, error) {
	return p.record(a, f.PerRound(a.Is4()), false), nil
}

func (p *benchPort) record(a netip.Addr, frames int, probe bool) int {
	p.sends = append(p.sends, schedSend{key: schedIndex(announce.Key{Addr: a}), frames: int32(frames), at: time.Since(p.base), probe: probe})
	return frames
}

// runEngine claims n addresses in one request on an announce.Engine with
// its defaults over a benchPort, as the agent does for `vip claim -f`, and
// records every round and probe until the windows have closed. Each key's
// first round is due when the engine armed it, as its burst-start event
// says; the request starts at the run's base.
func runEngine(ctx context.Context, n int) (run *schedRun, err error) {
	port := &benchPort{sends: make([]schedSend, 0, 8*n)}
	e := announce.NewEngine(announce.EngineConfig{Open: func(string) (announce.Port, error) { return port, nil }})
	run = &schedRun{cfg: e.Config().Burst, arms: make([]time.Duration, n)}
	reqs := make([]announce.Request, n)
	for i := range reqs {
		reqs[i] = announce.Request{Addr: schedKey(i).Addr, Interface: port.Name()}
	}
	// Room for every claim and burst-start event of the request, read
	// after it returns.
	evs, unsubscribe := e.Subscribe(2*n + 64)
	defer unsubscribe()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	port.base = time.Now()
	go func() { done <- e.Run(rctx) }()
	_, err = e.Claim(ctx, reqs, announce.ClaimOptions{})
	armed := 0
	for drained := false; !drained; {
		select {
		case ev := <-evs:
			if ev.Kind == announce.EventBurstStart && ev.Addr.Is4() {
				run.arms[schedIndex(announce.Key{Addr: ev.Addr})] = ev.Time.Sub(port.base)
				armed++
			}
		default:
			drained = true
		}
	}
	unsubscribe()
	if err == nil && armed != n {
		err = fmt.Errorf("saw %d burst-start events for %d claims", armed, n)
	}
	if err == nil {
		// Every window closes Window after its arm; a late last round
		// goes up to an Interval after that.
		select {
		case <-time.After(run.cfg.Window + run.cfg.Interval + 200*time.Millisecond - time.Since(port.base)):
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	stop()
	<-done // released everything: no more rounds
	run.sends = port.sends
	return run, err
}

// schedHowMeasured is the step's bullet under How measured.
func schedHowMeasured() string {
	cfg := announce.NewScheduler(announce.SchedulerConfig{}, nil).Config()
	frames := schedVIPs * schedCost
	return fmt.Sprintf("**Gratuitous scheduler, %s VIPs**, in the driver's own process before the lab, on the real clock: "+
		"the real `announce.Scheduler` with its defaults (rounds %v apart for %v, a cap of %s frames/s for all VIPs "+
		"together, a bucket of %s frames) arms %s IPv4 keys (198.18.0.0/15, %d frames a round) one after another, and a "+
		"RoundSender that sends nothing records the time (monotonic clock, as SendRound is called) and the frames of every round "+
		"until every window has closed. Then the same through a real `announce.Engine` with its defaults: %s claims in one "+
		"`Claim` request over a Port that records the same, so the engine's lock, its callbacks and its probes (one per claim, "+
		"through the same sender and cap) are in the picture; a first round is due when the engine armed it (its burst-start event). "+
		"*Lateness* of a later round is how long after its due time it went out, a round being due Interval after its VIP's "+
		"previous round went out (rounds are never sent closer than Interval, so a late round moves the ones after it: the notes "+
		"give the *drift*, lateness added up over a burst). *Every round sent*: each VIP got all the rounds its window holds, "+
		"none closer than Interval to the one before. The first round is reported apart: %s of them are %s frames, which "+
		"the cap spreads over (%s − %s)/%s = %v at best, so it is measured from the first Arm to the last first "+
		"round, against that least spread, and each first round against the earliest an ideal sender (same order, each round as "+
		"soon as it is armed and the bucket holds its frames) could have sent it. *Pace*: the most frames within any 100 ms and "+
		"1 s, probes included, against Rate × window + the bucket + the one round the sender charges before it goes out. Worst of "+
		"the runs in the table, every run in the notes. *On the wire*: in the lab's 10,000-claims step, a packet socket on the "+
		"client host keeps every ARP frame, neighbor solicitation and advertisement from b's MAC with its kernel receive timestamp, "+
		"from before `vip claim -f` until the windows have closed (%v after the command returned; the release comes after); an "+
		"address's frames less than %v apart are one round. The agent's Arm times are not seen from outside, so the first "+
		"frame stands for all of them; the limits take the scheduler's defaults, which the agent runs with.",
		fmtCount(schedVIPs), cfg.Interval, cfg.Window, fmtCount(int64(cfg.Rate)), fmtCount(cfg.Bucket), fmtCount(schedVIPs), schedCost,
		fmtCount(schedVIPs), fmtCount(schedVIPs), fmtCount(frames),
		fmtCount(frames), fmtCount(cfg.Bucket), fmtCount(int64(cfg.Rate)),
		time.Duration(float64(frames-cfg.Bucket)/cfg.Rate*float64(time.Second)).Round(time.Millisecond),
		wireWait(cfg), roundGap)
}
