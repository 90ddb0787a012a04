package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

// The fleet at scale (issue 14): agents simulated in this process, each a
// real fleet.Member with a real etcd client of its own, over a real
// announce.Engine whose one port sends nothing (so the claim path is the
// agent's own: key transaction, then the engine's claim, bursts and
// probes), all on one real etcd (buildEtcd's), in a lab host of its own. The
// agents' connections leave from another lab host (labtest.DialIn): the
// driver never dials a lab address from the root namespace.
const fleetStep = "fleet"

// fleetConfig is the size of the fleet step.
type fleetConfig struct {
	// Short says the size is -short's; Fallback that a larger fleet
	// fenced itself before.
	Short, Fallback  bool
	Agents, PerAgent int
	// ClaimAtOnce is how many agents claim at the same time while the
	// fleet fills, each one Member.Claim of PerAgent addresses.
	ClaimAtOnce int
	Moves       int
	// Rest is how long etcd's traffic is measured with nothing happening.
	Rest time.Duration
	// TTL is the agents' lease TTL.
	TTL time.Duration
	// Failsafe runs each agent with the failsafe, as vip agent does by
	// default: a key, a UDP socket to answer on, and its set written.
	Failsafe bool
	// Profile, if set, is where the agents' CPU profile from the join
	// to the end of the rest (cpu.pprof) and their heap after it
	// (heap.pprof) go.
	Profile string
}

func (b *bench) fleetConfig() fleetConfig {
	c := fleetConfig{Agents: 1000, PerAgent: 100, ClaimAtOnce: 8, Moves: 200, Rest: 20 * time.Second, TTL: fleet.DefaultTTL}
	if b.o.short {
		c.Short, c.Agents, c.Moves = true, 100, 100
	}
	if b.o.fleetAgents > 0 {
		c.Agents = b.o.fleetAgents
	}
	if b.o.fleetMoves > 0 {
		c.Moves = b.o.fleetMoves
	}
	if b.o.fleetTTL > 0 {
		c.TTL = b.o.fleetTTL
	}
	c.Failsafe, c.Profile = b.o.fleetFailsafe, b.o.fleetProfile
	return c
}

// timeout bounds the step. Filling grows with the square of the agents:
// every claim's key goes to every agent's watch, and etcd sends some
// 100,000 of those a second here (the bound allows half that). Each move
// reads the whole fleet.
func (c fleetConfig) timeout() time.Duration {
	events := float64(c.Agents) * float64(c.Agents) * float64(c.PerAgent)
	return 3*time.Minute + c.Rest + time.Duration(events/50000*float64(time.Second)) + time.Duration(c.Moves)*3*time.Second
}

// The fleet lab: the store's host and the host the agents' connections
// leave from. Documentation prefixes only.
var fleetHosts = []lab.HostConfig{
	{Name: "store", IPv4: netip.MustParsePrefix("192.0.2.1/24")},
	{Name: "agents", IPv4: netip.MustParsePrefix("192.0.2.11/24")},
}

// fleetPrefixes are every agent's interface's own prefixes, for its
// registration: a move picks the target's interface by them.
var fleetPrefixes = []netip.Prefix{
	netip.MustParsePrefix("198.51.100.1/24"),
	netip.MustParsePrefix("203.0.113.1/24"),
	netip.MustParsePrefix("2001:db8::1/32"),
}

// fleetAddr is the k-th claimed address: 198.51.100.1–254, 203.0.113.1–254,
// then 2001:db8:f1::/64. They never reach a wire: the ports send nothing.
func fleetAddr(k int) netip.Addr {
	switch {
	case k < 254:
		return netip.AddrFrom4([4]byte{198, 51, 100, byte(k + 1)})
	case k < 508:
		return netip.AddrFrom4([4]byte{203, 0, 113, byte(k - 253)})
	}
	a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0x00, 0xf1}
	a[12], a[13], a[14], a[15] = byte(k>>24), byte(k>>16), byte(k>>8), byte(k)
	return netip.AddrFrom16(a)
}

// fleetResult is what the step measured.
type fleetResult struct {
	Cfg fleetConfig
	// Join is how long the agents took to join, all of them, JoinAtOnce
	// at a time; Fill how long the claims took, all of them.
	Join, Fill time.Duration
	// Claims are the Member.Claim calls of PerAgent addresses that
	// succeeded, sorted; Claimed counts them.
	Claims  []time.Duration
	Claimed int
	// Fenced counts the agents fenced by the end of the fill, FirstFence
	// is when the first was, since the fill began.
	Fenced     int
	FirstFence time.Duration
	// Filling is etcd's traffic while the fleet filled.
	Filling etcdRates
	// Settle is how long after the last claim etcd still had watchers to
	// catch up.
	Settle time.Duration
	Rest   etcdRates
	// RestCPU is this process's share of one core at rest (every agent).
	RestCPU float64
	// Heap and RSS are the live heap after a GC and the resident set
	// after memory was returned to the system, before the agents joined
	// and with them at rest; Goroutines likewise.
	Heap, RSS, Goroutines [2]int64
	EtcdRSS, Keys         float64
	// MoveCmd is each fleet.Mover.Move call, MoveLive its own timeline from the
	// move asked to live on the target; both sorted.
	MoveCmd, MoveLive []time.Duration
	MoveWaited        int
	// MoveSteps is where each move's time went, step by step in the
	// order of moveSteps; each list sorted.
	MoveSteps [][]time.Duration
	// Moving is etcd's traffic while the moves ran, one after another.
	Moving etcdRates
	// History is what the history of ownership cost.
	History *fleetHistory
}

// joinAtOnce bounds the agents joining at the same time.
const joinAtOnce = 16

// fleetAgent is one simulated agent.
type fleetAgent struct {
	node string
	c    *store.Client
	eng  *announce.Engine
	m    *fleet.Member
	stop context.CancelFunc
	done chan struct{}
	// udp is the failsafe's socket, if it runs.
	udp net.PacketConn
}

// fleetRun is the step. When the fleet fences itself while it fills (the
// store too slow for the renewals), that is a result, not a failed
// measurement: the step keeps it and measures again with fallbackShare of
// the agents, down to fallbackLeast.
func (b *bench) fleetRun(ctx context.Context) error {
	cfg := b.fleetConfig()
	for {
		res, err := runFleet(ctx, cfg, b.logf)
		next := cfg.Agents * fallbackShare / 100
		if !errors.Is(err, errFenced) || next < fallbackLeast {
			b.fleet = res
			return err
		}
		b.fleetBroke = append(b.fleetBroke, brokenFleet{res, err})
		b.logf("  %v; again with %d agents", err, next)
		cfg.Agents, cfg.Fallback = next, true
	}
}

// fallbackShare is the percentage of the agents the step measures again
// with when a size fenced, and fallbackLeast the fewest it tries.
const (
	fallbackShare = 30
	fallbackLeast = 20
)

// brokenFleet is a size of the fleet that fenced itself while it filled.
type brokenFleet struct {
	res *fleetResult
	err error
}

// errFenced marks a fleet that fenced itself while it filled.
var errFenced = errors.New("agents fenced themselves while the fleet filled")

// runFleet runs the whole step: lab, etcd, agents, claims, rest, moves. It
// returns what it measured up to a failure, and the failure.
func runFleet(ctx context.Context, cfg fleetConfig, logf func(string, ...any)) (*fleetResult, error) {
	prefix := "vf" + strconv.FormatInt(int64(os.Getpid()), 36)
	if err := lab.Clean(prefix); err != nil {
		return nil, err
	}
	l, err := lab.Up(ctx, lab.Config{Prefix: prefix, Hosts: fleetHosts})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := l.Down(); err != nil {
			logf("fleet lab down: %v", err)
		}
	}()
	tb := newLabTB(logf)
	defer tb.Close()
	var etcd *etcdlab.Etcd
	if err := tb.Do(func() { etcd = etcdlab.StartEtcd(tb, l.Host("store")) }); err != nil {
		return nil, fmt.Errorf("start etcd in the lab: %w", err)
	}
	dial := labtest.DialIn(l.Host("agents"))
	url := "etcd://" + strings.TrimPrefix(etcd.Endpoint(), "http://")
	scr := newEtcdScraper(etcd.Endpoint(), dial)
	defer scr.close()

	res := &fleetResult{Cfg: cfg}
	res.Heap[0], res.RSS[0], res.Goroutines[0] = memNow()
	stopProfile := profileFleet(cfg.Profile, logf)
	defer stopProfile()
	agents, err := joinFleet(ctx, cfg, url, dial, res, logf)
	defer func() {
		// etcd goes first: each lease revoked with it running deletes its
		// agent's claims, and every other agent's watch would hear each
		// deletion (and look for a move of it) while the fleet winds down.
		if err := tb.Do(func() { etcd.Kill(tb) }); err != nil {
			logf("stop etcd: %v", err)
		}
		closeFleet(agents)
	}()
	if err != nil {
		return res, err
	}
	if err := fillFleet(ctx, cfg, agents, scr, res, logf); err != nil {
		return res, err
	}
	if err := restFleet(ctx, cfg, scr, res, logf); err != nil {
		return res, err
	}
	res.Heap[1], res.RSS[1], res.Goroutines[1] = memNow()
	stopProfile()
	logf("  memory: heap %s, RSS %s (before the agents: %s, %s), %d goroutines",
		fmtMB(res.Heap[1]/1024), fmtMB(res.RSS[1]), fmtMB(res.Heap[0]/1024), fmtMB(res.RSS[0]), res.Goroutines[1])

	mover, err := store.Open(ctx, store.Config{URL: url, Dial: dial})
	if err != nil {
		return res, fmt.Errorf("open the store for the moves: %w", err)
	}
	defer mover.Close()
	if res.History, err = measureHistory(ctx, mover, agents, cfg, logf); err != nil {
		return res, err
	}
	m := fleet.NewMover(mover)
	defer m.Close()
	if err := moveFleet(ctx, cfg, m, agents, scr, res, logf); err != nil {
		return res, err
	}
	return res, boundHistory(ctx, mover, m, agents, res.History, logf)
}

// memNow returns the live heap after a collection, the resident set after
// the freed memory went back to the system (KiB), and the goroutines.
func memNow() (heap, rssK, goroutines int64) {
	debug.FreeOSMemory() // collects first
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rssK, _ = rssKiB(os.Getpid())
	return int64(ms.HeapAlloc), rssK, int64(runtime.NumGoroutine())
}

// joinFleet starts the agents, joinAtOnce at a time. On a failure it returns
// the agents that joined, for the caller to close, and the first error.
func joinFleet(ctx context.Context, cfg fleetConfig, url string, dial func(context.Context, string) (net.Conn, error), res *fleetResult, logf func(string, ...any)) ([]*fleetAgent, error) {
	start := time.Now()
	agents := make([]*fleetAgent, cfg.Agents)
	errs := make([]error, cfg.Agents)
	var wg sync.WaitGroup
	sem := make(chan struct{}, joinAtOnce)
	var failed atomic.Bool
	for i := range agents {
		if failed.Load() || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			agents[i], errs[i] = joinAgent(ctx, i, url, cfg, dial)
			if errs[i] != nil {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	res.Join = time.Since(start)
	joined := slices.DeleteFunc(agents, func(a *fleetAgent) bool { return a == nil })
	if err := errors.Join(firstErrors(cfg.Agents, "joins", errs), ctx.Err()); err != nil {
		return joined, fmt.Errorf("%d of %d agents joined the fleet: %w", len(joined), cfg.Agents, err)
	}
	logf("  %d agents joined in %v", len(joined), res.Join.Round(time.Millisecond))
	return joined, nil
}

// fillFleet has every agent claim its PerAgent addresses in one
// Member.Claim, ClaimAtOnce agents at a time, and times each call: the
// keys created in etcd, then the engine's claim (answering, a burst
// armed) before it returns.
func fillFleet(ctx context.Context, cfg fleetConfig, agents []*fleetAgent, scr *etcdScraper, res *fleetResult, logf func(string, ...any)) error {
	s0, err := scr.sample(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	took := make([]time.Duration, len(agents))
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	var claimed atomic.Int64
	sem := make(chan struct{}, cfg.ClaimAtOnce)
	for i, a := range agents {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			reqs := make([]announce.Request, cfg.PerAgent)
			for j := range reqs {
				reqs[j] = announce.Request{Addr: fleetAddr(i*cfg.PerAgent + j), Interface: fleetPortName}
			}
			t0 := time.Now()
			st, err := a.m.Claim(ctx, reqs, announce.ClaimOptions{})
			took[i] = time.Since(t0)
			if n := claimed.Add(1); n%int64(max(len(agents)/10, 1)) == 0 {
				logf("  %d of %d agents have claimed (%v)", n, len(agents), time.Since(start).Round(time.Second))
			}
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("%s: claim %d addresses: %w", a.node, len(reqs), err)
			case len(st) != len(reqs):
				errs[i] = fmt.Errorf("%s: claimed %d addresses, %d live", a.node, len(reqs), len(st))
			}
		})
	}
	wg.Wait()
	res.Fill = time.Since(start)
	if s1, err := scr.sample(ctx); err == nil {
		res.Filling = ratesBetween(s0, s1)
	}
	for i, a := range agents {
		if errs[i] == nil && took[i] > 0 {
			res.Claims = append(res.Claims, took[i])
		}
		if _, _, fencedAt := a.m.Lease(); !fencedAt.IsZero() {
			since := fencedAt.Sub(start)
			if res.Fenced == 0 || since < res.FirstFence {
				res.FirstFence = since
			}
			res.Fenced++
		}
	}
	slices.Sort(res.Claims)
	res.Claimed = len(res.Claims)
	logf("  etcd while the fleet filled: %s", res.Filling.summary())
	if res.Fenced > 0 {
		err := fmt.Errorf("%d of %d %w, the first %v after the claims began: their lease renewals did not reach etcd in time; %d agents had claimed",
			res.Fenced, len(agents), errFenced, res.FirstFence.Round(time.Millisecond), res.Claimed)
		if cerr := firstErrors(len(agents), "agents' claims", errs); cerr != nil {
			err = fmt.Errorf("%w; %w", err, cerr)
		}
		return err
	}
	if err := firstErrors(len(agents), "agents' claims", errs); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	logf("  %s claims in %v (%.0f/s): one Member.Claim of %d p50 %s, p99 %s, max %s",
		fmtCount(len(agents)*cfg.PerAgent), res.Fill.Round(time.Millisecond), float64(len(agents)*cfg.PerAgent)/res.Fill.Seconds(),
		cfg.PerAgent, fmtDur(pctl(res.Claims, 0.5)), fmtDur(pctl(res.Claims, 0.99)), fmtDur(pctl(res.Claims, 1)))
	return nil
}

// settleTimeout bounds the wait for etcd's watchers to catch up after the
// fill: every claim's key is an event for every agent's watch.
const settleTimeout = 5 * time.Minute

// restFleet waits until etcd has no watcher behind and the history's trims
// are done (they count each subject written, behind the claims, and nothing
// else reads the store then), then measures its traffic over cfg.Rest with
// nothing asked of the fleet.
func restFleet(ctx context.Context, cfg fleetConfig, scr *etcdScraper, res *fleetResult, logf func(string, ...any)) error {
	start := time.Now()
	ranges := -1.0
	for {
		s, err := scr.sample(ctx)
		if err != nil {
			return err
		}
		trimmed := s.Received[rangeMethod] == ranges
		ranges = s.Received[rangeMethod]
		if s.SlowWatchers == 0 && trimmed {
			break
		}
		if time.Since(start) > settleTimeout {
			return fmt.Errorf("etcd still had %.0f watchers behind, or the history's trims running, %v after the claims: the fleet does not keep up", s.SlowWatchers, settleTimeout)
		}
		if err := waitCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	res.Settle = time.Since(start)
	s0, err := scr.sample(ctx)
	if err != nil {
		return err
	}
	cpu0, err := cpuTicks(os.Getpid())
	if err != nil {
		return err
	}
	if err := waitCtx(ctx, cfg.Rest); err != nil {
		return err
	}
	s1, err := scr.sample(ctx)
	if err != nil {
		return err
	}
	cpu1, err := cpuTicks(os.Getpid())
	if err != nil {
		return err
	}
	res.Rest = ratesBetween(s0, s1)
	res.RestCPU = float64(cpu1-cpu0) / userHZ / res.Rest.Wall.Seconds()
	res.EtcdRSS, res.Keys = s1.RSS, s1.Keys
	logf("  at rest over %v (after %v of watchers and trims catching up): %s; etcd %.1f%% of a core, the agents %.1f%%",
		res.Rest.Wall.Round(time.Millisecond), res.Settle.Round(time.Millisecond), res.Rest.summary(), 100*res.Rest.CPU, 100*res.RestCPU)
	return nil
}

func waitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// summary lists the methods and their rates, for the log.
func (r etcdRates) summary() string {
	var parts []string
	for _, m := range r.Methods {
		p := fmt.Sprintf("%s %.1f/s", m.Method, m.Received)
		if m.Sent > m.Received {
			p += fmt.Sprintf(" (%.0f/s sent)", m.Sent)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		parts = append(parts, "no gRPC requests")
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; %.1f proposals/s, %.1f leases renewed/s", r.Proposals, r.Renewed)
}

// moveFleet moves cfg.Moves addresses, one after another, each from its
// owner to another agent picked at random, and checks that the target's
// engine holds it and the owner's no longer does.
func moveFleet(ctx context.Context, cfg fleetConfig, mover *fleet.Mover, agents []*fleetAgent, scr *etcdScraper, res *fleetResult, logf func(string, ...any)) error {
	owner := make([]int, len(agents)*cfg.PerAgent)
	for k := range owner {
		owner[k] = k / cfg.PerAgent
	}
	rng := rand.New(rand.NewPCG(14, uint64(len(agents))))
	s0, err := scr.sample(ctx)
	if err != nil {
		return err
	}
	// The moves done count even when a later one fails.
	defer func() {
		slices.Sort(res.MoveCmd)
		slices.Sort(res.MoveLive)
		for _, d := range res.MoveSteps {
			slices.Sort(d)
		}
	}()
	marks := map[fleet.MovePhase]time.Time{}
	mover.OnPhase(func(p fleet.MovePhase) { marks[p] = time.Now() })
	defer mover.OnPhase(nil)
	res.MoveSteps = make([][]time.Duration, len(moveSteps))
	for range cfg.Moves {
		k := rng.IntN(len(owner))
		from, to := owner[k], rng.IntN(len(agents)-1)
		if to >= from {
			to++
		}
		a := fleetAddr(k)
		clear(marks)
		t0 := time.Now()
		rs, err := mover.Move(ctx, store.MoveRequest{Addrs: []netip.Addr{a}, To: agents[to].node})
		took := time.Since(t0)
		if err != nil {
			return fmt.Errorf("move %s from %s to %s: %w", a, agents[from].node, agents[to].node, err)
		}
		if len(rs) != 1 || !rs[0].Done() {
			return fmt.Errorf("move %s from %s to %s: not live on the target: %+v", a, agents[from].node, agents[to].node, rs)
		}
		if err := checkMoved(a, agents[from], agents[to]); err != nil {
			return err
		}
		owner[k] = to
		res.MoveCmd = append(res.MoveCmd, took)
		res.MoveLive = append(res.MoveLive, rs[0].Live.Sub(rs[0].Asked))
		for i, d := range stepsOf(t0, marks, rs[0]) {
			res.MoveSteps[i] = append(res.MoveSteps[i], d)
		}
		if rs[0].Waited {
			res.MoveWaited++
		}
	}
	s1, err := scr.sample(ctx)
	if err != nil {
		return err
	}
	res.Moving = ratesBetween(s0, s1)
	slices.Sort(res.MoveCmd)
	slices.Sort(res.MoveLive)
	logf("  %d moves: Mover.Move p50 %s, p99 %s, max %s; asked → live p50 %s, p99 %s; etcd meanwhile: %s",
		len(res.MoveCmd), fmtDur(pctl(res.MoveCmd, 0.5)), fmtDur(pctl(res.MoveCmd, 0.99)), fmtDur(pctl(res.MoveCmd, 1)),
		fmtDur(pctl(res.MoveLive, 0.5)), fmtDur(pctl(res.MoveLive, 0.99)), res.Moving.summary())
	return nil
}

// moveSteps name the steps of a move, in order, as stepsOf times them: the
// mover's own (fleet.MovePhase) and, between its records written and its
// end, the owner's and the target's, from the times in the move's record.
// All clocks are this process's.
var moveSteps = []string{
	"read what the move needs",
	"plan",
	"grant the mover's lease and make its watch",
	"write the move record",
	"the owner lets go (record written → owner's release)",
	"the target takes the key (release → taken)",
	"the target answers (taken → live)",
	"the mover hears of it (live → the mover's watch)",
	"revoke the mover's lease",
}

// stepsOf times the steps of one move, begun at t0, from the mover's marks
// and the move's result.
func stepsOf(t0 time.Time, marks map[fleet.MovePhase]time.Time, r store.MoveResult) []time.Duration {
	at := []time.Time{t0, marks[fleet.PhaseRead], marks[fleet.PhasePlanned], marks[fleet.PhaseLeased], marks[fleet.PhaseAsked],
		r.Released, r.Taken, r.Live, marks[fleet.PhaseEnded], marks[fleet.PhaseRevoked]}
	out := make([]time.Duration, len(at)-1)
	for i := range out {
		if !at[i].IsZero() && !at[i+1].IsZero() {
			out[i] = at[i+1].Sub(at[i])
		}
	}
	return out
}

// checkMoved says whether a moved: the target's engine answers for it and
// the owner's does not.
func checkMoved(a netip.Addr, from, to *fleetAgent) error {
	if st := to.eng.Status(a); len(st) != 1 {
		return fmt.Errorf("move %s to %s: Mover.Move said live, but its engine does not hold it", a, to.node)
	}
	if st := from.eng.Status(a); len(st) != 0 {
		return fmt.Errorf("move %s from %s: its engine still holds it (%s) after the move", a, from.node, st[0].State)
	}
	return nil
}
