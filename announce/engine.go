package announce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Assigner adds a claimed address to its interface and removes it again.
// Add reports added=false when the address was already there, in which case
// vip must never remove it.
type Assigner interface {
	Add(ifname string, a netip.Addr) (added bool, err error)
	Remove(ifname string, a netip.Addr) error
}

// EngineConfig configures an Engine. Zero fields take the defaults.
type EngineConfig struct {
	// Burst sets the default gratuitous window and interval, and the rate
	// cap for all claims together.
	Burst SchedulerConfig
	// Frames are the default gratuitous frame kinds.
	Frames Frames
	// Open opens a Port on the named interface. Nil means OpenInterface.
	Open func(ifname string) (Port, error)
	// Book keeps the record of claims. Nil means a MemBook.
	Book Book
	// Assigner adds and removes addresses for claims with Assign. Nil
	// refuses such claims.
	Assigner Assigner
	// Kernel returns the addresses the kernel has on the named interface,
	// and so answers for itself: their ports stay silent for those rather
	// than double every answer (see silence.go). Nil means none, unless
	// Open is nil too: then the interfaces' own addresses are read.
	Kernel func(ifname string) map[netip.Addr]bool
	Log    *slog.Logger
}

// Request asks for one address on one interface.
type Request struct {
	Addr      netip.Addr
	Interface string
}

// State of a claim as status reports it.
const (
	StateAnnouncing = "announcing" // a gratuitous window is running
	StateHolding    = "holding"    // answering; no window running
	StateWaiting    = "waiting"    // its interface is down or gone
)

// Status describes one held address.
type Status struct {
	Claim
	MAC   string `json:"mac"`
	State string `json:"state"`
	// WindowEnd is when the running gratuitous window closes; zero when
	// none runs.
	WindowEnd time.Time `json:"window_end,omitzero"`
	// Answered counts requests answered for the address.
	Answered uint64 `json:"answered"`
	// GratuitousFrames counts gratuitous frames sent for the address.
	GratuitousFrames uint64 `json:"gratuitous_frames"`
	// Claimers are the other MACs seen answering for the address.
	Claimers []Claimer `json:"claimers,omitempty"`
}

// InterfaceChange is what the engine is told when an interface changes.
type InterfaceChange struct {
	Name    string
	Index   int
	MAC     net.HardwareAddr
	Up      bool
	Deleted bool
	// Port, when set, says the interface became a port of a master that
	// receives its frames, such as "a port of bridge br0": its claims
	// then wait as if it were down, since nothing reaches it any more.
	Port string
}

// Engine holds claims: for each it has the interface's Port answer requests
// and the one Scheduler send the gratuitous rounds. It follows interface
// changes it is told about: a claim waits while its interface is down or
// gone, and its burst re-arms when the interface comes back or changes MAC.
// It is safe for concurrent use; Run must be running for claims to go live.
type Engine struct {
	cfg   EngineConfig
	clock clockwork.Clock
	sched *Scheduler
	log   *slog.Logger
	hub   *hub

	mu     sync.Mutex
	ports  map[string]*portRef
	claims map[netip.Addr]*claimState
	// byAddr is every claim ordered by address, for Status; nil once a
	// claim comes or goes, until Status sorts them again.
	byAddr []*claimState
	// answeredBefore keeps the answers counted by ports since closed.
	answeredBefore map[netip.Addr]uint64
	// probes are the claims' next probes, behind one timer (see probe.go).
	probes probeQueue
	// totals count what the engine did over its life (see totals.go).
	totals totals

	// sentMu guards sent. It is a leaf lock: burst events, which arrive
	// with the scheduler's lock held, only ever take this one (and the
	// hub's).
	sentMu sync.Mutex
	sent   map[netip.Addr]uint64

	// sendTo is what SendRound needs of each live claim (one on a port),
	// kept beside the claims so that the single sender never waits for
	// the engine's lock: a claim of 10,000 addresses holds it for tens of
	// milliseconds, and the first rounds would wait for all of it.
	// Written under mu; sendMu guards the map.
	sendMu sync.RWMutex
	sendTo map[netip.Addr]sendTarget
}

type portRef struct {
	Port
	refs int
	up   bool
}

type claimState struct {
	claim Claim
	port  *portRef // nil while the interface is gone
	// answering is set while the port answers for the address: not when
	// the kernel does (see silence.go).
	answering bool
	refresh   clockwork.Timer
	// probeAt is when the claim's next probe is due, and probeIndex its
	// place in the engine's probe queue (-1 when it is in none).
	probeAt    time.Time
	probeIndex int
	// claimers are the other MACs seen answering for the address, by MAC.
	claimers   map[string]*Claimer
	lastDefend time.Time
}

func newClaimState(c Claim, p *portRef) *claimState {
	return &claimState{claim: c, port: p, claimers: map[string]*Claimer{}, probeIndex: -1}
}

func (c *claimState) key() Key { return Key{Ifindex: c.port.Index(), Addr: c.claim.Addr} }

func (c *claimState) probeKey() Key {
	return Key{Ifindex: c.port.Index(), Addr: c.claim.Addr, Probe: true}
}

func (c *claimState) live() bool { return c.port != nil && c.port.up }

// NewEngine returns an Engine with cfg.
func NewEngine(cfg EngineConfig) *Engine {
	if cfg.Frames == 0 {
		cfg.Frames = DefaultFrames
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Book == nil {
		cfg.Book = NewMemBook()
	}
	if cfg.Burst.Clock == nil {
		cfg.Burst.Clock = clockwork.NewRealClock()
	}
	if cfg.Open == nil {
		log := cfg.Log
		cfg.Open = func(name string) (Port, error) { return OpenInterface(name, log) }
		if cfg.Kernel == nil {
			cfg.Kernel = interfaceAddrs
		}
	}
	e := &Engine{
		cfg:            cfg,
		clock:          cfg.Burst.Clock,
		log:            cfg.Log,
		hub:            newHub(),
		ports:          make(map[string]*portRef),
		claims:         make(map[netip.Addr]*claimState),
		answeredBefore: make(map[netip.Addr]uint64),
		sent:           make(map[netip.Addr]uint64),
		sendTo:         make(map[netip.Addr]sendTarget),
	}
	burst := cfg.Burst
	burst.OnEvent = e.onBurst
	e.sched = NewScheduler(burst, e)
	e.cfg.Burst = e.sched.Config()
	return e
}

// OpenInterface opens a packet-socket Link on the named interface.
func OpenInterface(name string, log *slog.Logger) (Port, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	return OpenLink(ifi, log)
}

// Config returns the engine's configuration with defaults filled in.
func (e *Engine) Config() EngineConfig { return e.cfg }

// Subscribe returns a channel of every event from now on, buffered for n,
// and a function that ends the subscription.
func (e *Engine) Subscribe(n int) (<-chan Event, func()) { return e.hub.subscribe(n) }

// Notify adds an event from a component beside the engine (such as the
// capture that follows other addresses' owners) to the engine's stream.
func (e *Engine) Notify(ev Event) { e.publish(ev) }

func (e *Engine) publish(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = e.clock.Now()
	}
	e.hub.publish(ev)
}

// Run sends gratuitous rounds until ctx is done, then releases every claim
// and returns.
func (e *Engine) Run(ctx context.Context) error {
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.sched.Run(sctx) // ends only when stopped
	}()
	<-ctx.Done()
	_, _, err := e.release(context.WithoutCancel(ctx), e.Held(), true)
	stop()
	<-done
	return err
}

// Held returns the held addresses in order.
func (e *Engine) Held() []netip.Addr {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]netip.Addr, 0, len(e.claims))
	for a := range e.claims {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// ErrHeldElsewhere is returned for an address already held on another
// interface.
var ErrHeldElsewhere = errors.New("already held on another interface")

// ErrNoAssigner is returned for a claim with Assign when the engine has no
// Assigner.
var ErrNoAssigner = errors.New("adding addresses to interfaces is not available here")

// Claim makes this host the owner of each requested address: it answers
// for it from now on and a gratuitous window opens (or, for an address
// already held, re-opens from now: a refresh, which also takes the new
// options). Either every request takes effect or none does. Claim returns
// once each address's first round has been sent.
func (e *Engine) Claim(ctx context.Context, reqs []Request, opts ClaimOptions) ([]Status, error) {
	now := e.clock.Now()
	items := make([]Claim, len(reqs))
	for i, r := range reqs {
		items[i] = Claim{Addr: r.Addr, Interface: r.Interface, ClaimedAt: now, RefreshedAt: now, Options: opts}
	}
	return e.take(ctx, items, false)
}

// Adopt takes over claims recorded by an earlier run (after a crash): each
// keeps its options, its ClaimedAt and whether vip added its address, and
// gets a fresh burst. A claim whose interface is gone waits for it.
func (e *Engine) Adopt(ctx context.Context, claims []Claim) ([]Status, error) {
	now := e.clock.Now()
	items := slices.Clone(claims)
	for i := range items {
		items[i].RefreshedAt = now
	}
	return e.take(ctx, items, true)
}

func (e *Engine) take(ctx context.Context, items []Claim, adopt bool) ([]Status, error) {
	lives, fresh, err := e.claim(ctx, items, adopt)
	if err != nil {
		return nil, err
	}
	for _, live := range lives {
		select {
		case <-live:
		case <-ctx.Done():
			// All or nothing: the new claims of an interrupted request
			// are undone (refreshes of held ones stand).
			if _, _, rerr := e.Release(context.WithoutCancel(ctx), fresh); rerr != nil {
				return nil, fmt.Errorf("interrupted before the first gratuitous round, and undoing the claims failed: %w", errors.Join(ctx.Err(), rerr))
			}
			return nil, fmt.Errorf("interrupted before the first gratuitous round, so nothing new is held: %w", ctx.Err())
		}
	}
	addrs := make([]netip.Addr, len(items))
	for i, c := range items {
		addrs[i] = c.Addr
	}
	return e.Status(addrs...), nil
}

// maxClaimLogLines is the most claims of one request logged a line each at
// the info level; a larger request logs one line for all (a claim of
// 10,000 addresses would otherwise write 10,000 lines under the engine's
// lock).
const maxClaimLogLines = 16

func claimLogLevel(n int) slog.Level {
	if n > maxClaimLogLines {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

func (e *Engine) claim(ctx context.Context, items []Claim, adopt bool) (lives []<-chan struct{}, freshAddrs []netip.Addr, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := make(map[netip.Addr]bool, len(items))
	for _, c := range items {
		if seen[c.Addr] {
			return nil, nil, fmt.Errorf("claim %s: address given twice", c.Addr)
		}
		seen[c.Addr] = true
		if h, ok := e.claims[c.Addr]; ok && h.claim.Interface != c.Interface {
			return nil, nil, fmt.Errorf("claim %s on %s: %w (%s); release it first", c.Addr, c.Interface, ErrHeldElsewhere, h.claim.Interface)
		}
		if c.Options.Assign && e.cfg.Assigner == nil {
			return nil, nil, fmt.Errorf("claim %s with assign: %w", c.Addr, ErrNoAssigner)
		}
	}

	// Everything below is undone if any step fails.
	var (
		opened   []string
		assigned []Claim
		fresh    []*claimState
		holding  = map[*portRef]bool{} // ports whose batch Hold succeeded
	)
	undo := func() {
		for _, cs := range fresh {
			if cs.port != nil && holding[cs.port] {
				if cs.answering {
					_ = cs.port.Drop(cs.claim.Addr)
					cs.answering = false
				}
				cs.port.refs--
			}
		}
		for _, c := range assigned {
			_ = e.cfg.Assigner.Remove(c.Interface, c.Addr)
		}
		for _, name := range opened {
			if p := e.ports[name]; p != nil && p.refs == 0 {
				_ = p.Close()
				delete(e.ports, name)
			}
		}
	}

	var (
		refreshed    []*claimState
		refreshedOpt []ClaimOptions
	)
	byPort := map[*portRef][]*claimState{}
	for _, c := range items {
		if cs, ok := e.claims[c.Addr]; ok {
			refreshed = append(refreshed, cs)
			refreshedOpt = append(refreshedOpt, c.Options)
			continue
		}
		p, err := e.portLocked(c.Interface, adopt, &opened)
		if err != nil {
			undo()
			return nil, nil, fmt.Errorf("claim %s on %s: %w", c.Addr, c.Interface, err)
		}
		if c.Options.Assign && p != nil {
			added, err := e.cfg.Assigner.Add(c.Interface, c.Addr)
			if err != nil {
				undo()
				return nil, nil, fmt.Errorf("claim %s on %s: add the address: %w", c.Addr, c.Interface, err)
			}
			if added {
				assigned = append(assigned, c)
			} else if !c.AddedAddress {
				e.log.Info("address was already on the interface: vip will leave it there at release", "addr", c.Addr, "interface", c.Interface)
			}
			c.AddedAddress = c.AddedAddress || added
		}
		cs := newClaimState(c, p)
		fresh = append(fresh, cs)
		if p != nil {
			byPort[p] = append(byPort[p], cs)
		}
	}
	for p, css := range byPort {
		if err := e.holdLocked(p, css); err != nil {
			undo()
			return nil, nil, fmt.Errorf("claim on %s: %w", p.Name(), err)
		}
		p.refs += len(css)
		holding[p] = true
	}

	now := e.clock.Now()
	records := make([]Claim, 0, len(fresh)+len(refreshed))
	for _, cs := range fresh {
		records = append(records, cs.claim)
	}
	for i, cs := range refreshed {
		c := cs.claim
		c.RefreshedAt = now
		if !adopt {
			// A re-claim takes the new burst options; whether the
			// address is assigned stays as it was.
			c.Options = refreshedOpt[i]
			c.Options.Assign = cs.claim.Options.Assign
		}
		records = append(records, c)
	}
	if err := e.cfg.Book.Put(ctx, records...); err != nil {
		undo()
		return nil, nil, fmt.Errorf("record the claims: %w", err)
	}

	if len(fresh) > maxClaimLogLines {
		// One line for a large request, not one per address (each
		// claim's own line goes to the debug level).
		first, last := fresh[0].claim, fresh[len(fresh)-1].claim
		var ifaces []string
		for _, cs := range fresh {
			if !slices.Contains(ifaces, cs.claim.Interface) {
				ifaces = append(ifaces, cs.claim.Interface)
			}
		}
		e.log.Info("claim", "addresses", len(fresh), "first", first.Addr, "last", last.Addr, "interface", strings.Join(ifaces, ","),
			"window", e.window(fresh[0]), "interval", e.interval(fresh[0]), "frames", e.frames(fresh[0]).String(), "adopted", adopt)
	}
	lives = make([]<-chan struct{}, 0, len(items))
	for i, cs := range fresh {
		cs.claim = records[i]
		e.claims[cs.claim.Addr] = cs
		e.byAddr = nil
		e.syncSendLocked(cs)
		e.armRefreshLocked(cs)
		mac := ""
		if cs.port != nil {
			mac = cs.port.MAC().String()
		}
		msg := "claimed"
		if adopt {
			msg = "adopted from an earlier run"
		}
		if level := claimLogLevel(len(fresh)); e.log.Enabled(ctx, level) {
			e.log.Log(ctx, level, "claim", "addr", cs.claim.Addr, "interface", cs.claim.Interface, "mac", mac,
				"window", e.window(cs), "interval", e.interval(cs), "frames", e.frames(cs).String(), "adopted", adopt)
		}
		e.publish(Event{Kind: EventClaim, Addr: cs.claim.Addr, Interface: cs.claim.Interface, MAC: mac, State: e.stateLocked(cs), Message: msg})
		if cs.live() {
			lives = append(lives, e.armWithProbe(cs))
		} else {
			e.probeLocked(cs, FirstProbeDelay) // probes go out once it is live
			e.log.Warn("claim is waiting for its interface", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
		}
	}
	for i, cs := range refreshed {
		cs.claim = records[len(fresh)+i]
		e.syncSendLocked(cs)
		e.armRefreshLocked(cs)
		e.log.Info("refresh", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
		e.publish(Event{Kind: EventRefresh, Addr: cs.claim.Addr, Interface: cs.claim.Interface})
		if cs.live() {
			lives = append(lives, e.armWithProbe(cs))
		}
	}
	for _, name := range opened {
		e.attachWaitingLocked(name)
	}
	for _, cs := range fresh {
		freshAddrs = append(freshAddrs, cs.claim.Addr)
	}
	return lives, freshAddrs, nil
}

// portLocked returns the open port of an interface, opening it if needed.
// While adopting, an interface that cannot be opened is not an error: the
// claim waits for it (nil port).
func (e *Engine) portLocked(name string, adopt bool, opened *[]string) (*portRef, error) {
	if p, ok := e.ports[name]; ok {
		return p, nil
	}
	p, err := e.cfg.Open(name)
	if err != nil {
		if adopt {
			e.log.Warn("interface not available: the adopted claim waits for it", "interface", name, "err", err)
			return nil, nil
		}
		return nil, err
	}
	ref := &portRef{Port: p, up: true}
	e.ports[name] = ref
	*opened = append(*opened, name)
	return ref, nil
}

func (e *Engine) window(cs *claimState) time.Duration {
	if w := cs.claim.Options.Window; w > 0 {
		return w
	}
	return e.cfg.Burst.Window
}

func (e *Engine) interval(cs *claimState) time.Duration {
	if i := cs.claim.Options.Interval; i > 0 {
		return i
	}
	return e.cfg.Burst.Interval
}

func (e *Engine) frames(cs *claimState) Frames {
	if f := cs.claim.Options.Frames; f != 0 {
		return f
	}
	return e.cfg.Frames
}

// arm opens or extends the claim's window; its port must be up.
func (e *Engine) arm(cs *claimState) <-chan struct{} {
	return e.sched.Arm(cs.key(), Burst{
		Window:   e.window(cs),
		Interval: e.interval(cs),
		Cost:     e.frames(cs).PerRound(cs.claim.Addr.Is4()),
	})
}

// armWithProbe arms the claim's window and probes for competing claimers
// shortly after, then every ProbeEvery: a stale owner that sends nothing is
// only found by asking.
func (e *Engine) armWithProbe(cs *claimState) <-chan struct{} {
	live := e.arm(cs)
	e.probeLocked(cs, FirstProbeDelay)
	return live
}

// FirstProbeDelay separates a claim (or a refresh) from its first probe,
// within RFC 5227's PROBE_WAIT of up to 1 s, so that the capture that hears
// the answers is listening on the claim's interface by then.
const FirstProbeDelay = 500 * time.Millisecond

func (e *Engine) probeEvery(cs *claimState) time.Duration {
	switch p := cs.claim.Options.ProbeEvery; {
	case p < 0:
		return 0
	case p == 0:
		return DefaultProbeEvery
	default:
		return p
	}
}

// armRefreshLocked (re)starts the claim's periodic refresh, if it has one.
func (e *Engine) armRefreshLocked(cs *claimState) {
	if cs.refresh != nil {
		cs.refresh.Stop()
		cs.refresh = nil
	}
	every := cs.claim.Options.RefreshEvery
	if every <= 0 {
		return
	}
	addr := cs.claim.Addr
	cs.refresh = e.clock.AfterFunc(every, func() { e.autoRefresh(addr) })
}

// autoRefresh is a periodic refresh. It re-arms the window like Refresh but
// leaves the book alone: recording it would rewrite a state file once per
// claim and period, and an agent that re-adopts claims re-arms them anyway.
func (e *Engine) autoRefresh(addr netip.Addr) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cs, ok := e.claims[addr]
	if !ok {
		return
	}
	cs.claim.RefreshedAt = e.clock.Now()
	e.armRefreshLocked(cs)
	e.log.Info("refresh", "addr", addr, "interface", cs.claim.Interface, "periodic", true)
	e.publish(Event{Kind: EventRefresh, Addr: addr, Interface: cs.claim.Interface, State: e.stateLocked(cs), Message: "periodic"})
	if cs.live() {
		e.armWithProbe(cs)
	}
}

// Refresh re-opens the gratuitous window of each held address from now. It
// returns the refreshed addresses and those not held, which it leaves alone.
func (e *Engine) Refresh(ctx context.Context, addrs []netip.Addr) (refreshed, notHeld []netip.Addr, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	var records []Claim
	var states []*claimState
	for _, a := range addrs {
		cs, ok := e.claims[a]
		if !ok {
			notHeld = append(notHeld, a)
			continue
		}
		c := cs.claim
		c.RefreshedAt = now
		records = append(records, c)
		states = append(states, cs)
	}
	if len(records) == 0 {
		return nil, notHeld, nil
	}
	if err := e.cfg.Book.Put(ctx, records...); err != nil {
		return nil, notHeld, fmt.Errorf("record the refresh: %w", err)
	}
	for i, cs := range states {
		cs.claim = records[i]
		e.syncSendLocked(cs)
		e.armRefreshLocked(cs)
		e.log.Info("refresh", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
		e.publish(Event{Kind: EventRefresh, Addr: cs.claim.Addr, Interface: cs.claim.Interface, State: e.stateLocked(cs)})
		if cs.live() {
			e.armWithProbe(cs)
		}
		refreshed = append(refreshed, cs.claim.Addr)
	}
	return refreshed, notHeld, nil
}

// Release stops answering for each address at once, ends its window and
// removes the address from its interface if vip added it. It returns the
// released addresses and those that were not held.
//
// The book is where a release takes effect: the claims are forgotten there
// first, and when that fails (ctx done, the state file cannot be written)
// nothing is released, as a claim that cannot be recorded is not made.
// Releasing anyway would leave the book holding claims that nothing answers
// for, which the next agent would re-adopt, and which any later write of the
// book would keep.
func (e *Engine) Release(ctx context.Context, addrs []netip.Addr) (released, notHeld []netip.Addr, err error) {
	return e.release(ctx, addrs, false)
}

// release is Release; with force (the engine stopping) it releases even
// when the book cannot forget the claims, and reports that.
func (e *Engine) release(ctx context.Context, addrs []netip.Addr, force bool) (released, notHeld []netip.Addr, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var gone []*claimState
	// An address named twice is released once: releasing its claim twice
	// would drop its port's reference twice and close the port under the
	// claims still on it.
	seen := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		cs, ok := e.claims[a]
		if !ok {
			notHeld = append(notHeld, a)
			continue
		}
		gone = append(gone, cs)
		released = append(released, a)
	}
	var errs []error
	if len(released) > 0 {
		if err := e.cfg.Book.Delete(ctx, released...); err != nil {
			if !force {
				return nil, notHeld, fmt.Errorf("release: forget the claims: %w (nothing was released)", err)
			}
			errs = append(errs, fmt.Errorf("forget the released claims: %w", err))
		}
	}
	byPort := map[*portRef][]netip.Addr{}
	// A port forgets what it answered for an address once it drops it:
	// count the answers first.
	answered := make(map[*claimState]uint64, len(gone))
	for _, cs := range gone {
		answered[cs] = e.answeredLocked(cs)
		if cs.port != nil {
			e.sched.Cancel(cs.key())
			e.sched.Cancel(cs.probeKey())
			if cs.answering {
				byPort[cs.port] = append(byPort[cs.port], cs.claim.Addr)
				cs.answering = false
			}
		}
		if cs.refresh != nil {
			cs.refresh.Stop()
		}
		e.unprobeLocked(cs)
	}
	for p, as := range byPort {
		if err := p.Drop(as...); err != nil {
			errs = append(errs, fmt.Errorf("release on %s: %w", p.Name(), err))
		}
	}
	for _, cs := range gone {
		c := cs.claim
		if c.AddedAddress {
			if err := e.cfg.Assigner.Remove(c.Interface, c.Addr); err != nil {
				errs = append(errs, fmt.Errorf("release %s: remove it from %s: %w", c.Addr, c.Interface, err))
			}
		}
	}
	for _, cs := range gone {
		a := cs.claim.Addr
		e.totals.answeredReleased += answered[cs]
		delete(e.claims, a)
		e.byAddr = nil
		e.syncSendLocked(cs)
		delete(e.answeredBefore, a)
		e.sentMu.Lock()
		frames := e.sent[a]
		delete(e.sent, a)
		e.sentMu.Unlock()
		e.log.Info("release", "addr", a, "interface", cs.claim.Interface, "answered", answered[cs], "gratuitous_frames", frames)
		e.publish(Event{Kind: EventRelease, Addr: a, Interface: cs.claim.Interface, Message: fmt.Sprintf("answered %d requests, sent %d gratuitous frames", answered[cs], frames)})
		if p := cs.port; p != nil {
			if p.refs--; p.refs == 0 {
				if err := p.Close(); err != nil {
					errs = append(errs, fmt.Errorf("close %s: %w", p.Name(), err))
				}
				delete(e.ports, p.Name())
			}
		}
	}
	return released, notHeld, errors.Join(errs...)
}

func (e *Engine) answeredLocked(cs *claimState) uint64 {
	n := e.answeredBefore[cs.claim.Addr]
	if cs.port != nil {
		n += cs.port.Answered(cs.claim.Addr)
	}
	return n
}

func (e *Engine) stateLocked(cs *claimState) string {
	if !cs.live() {
		return StateWaiting
	}
	if _, recent := e.claimersLocked(cs); recent {
		return StateConflict
	}
	if e.sched.State(cs.key()).Active {
		return StateAnnouncing
	}
	return StateHolding
}

// Status reports the given addresses that are held, or every claim when
// none are given, ordered by address.
func (e *Engine) Status(addrs ...netip.Addr) []Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	var held []*claimState
	if len(addrs) == 0 {
		held = e.sortedLocked()
	} else {
		for _, a := range addrs {
			if cs, ok := e.claims[a]; ok {
				held = append(held, cs)
			}
		}
		slices.SortStableFunc(held, func(x, y *claimState) int { return x.claim.Addr.Compare(y.claim.Addr) })
	}
	out := make([]Status, len(held))
	// Claims share a few ports: format each port's MAC once, not once per
	// claim.
	var macPort *portRef
	var mac string
	for i, cs := range held {
		st := &out[i]
		*st = Status{Claim: cs.claim, State: StateWaiting, Answered: e.answeredLocked(cs)}
		if cs.port != nil {
			if cs.port != macPort {
				macPort, mac = cs.port, cs.port.MAC().String()
			}
			st.MAC = mac
		}
		if cs.live() {
			st.State = StateHolding
			if b := e.sched.State(cs.key()); b.Active {
				st.State, st.WindowEnd = StateAnnouncing, b.WindowEnd
			}
		}
		var recent bool
		st.Claimers, recent = e.claimersLocked(cs)
		if recent && cs.live() {
			st.State = StateConflict
		}
	}
	// One hold of sentMu for every claim, but not around sched.State: the
	// scheduler takes sentMu within its own lock.
	e.sentMu.Lock()
	for i := range out {
		out[i].GratuitousFrames = e.sent[out[i].Addr]
	}
	e.sentMu.Unlock()
	return out
}

// sortedLocked returns every claim ordered by address. The order is kept
// until a claim comes or goes: with 10,000 claims, sorting took a third of
// a status.
func (e *Engine) sortedLocked() []*claimState {
	if e.byAddr == nil {
		e.byAddr = make([]*claimState, 0, len(e.claims))
		for _, cs := range e.claims {
			e.byAddr = append(e.byAddr, cs)
		}
		slices.SortFunc(e.byAddr, func(x, y *claimState) int { return x.claim.Addr.Compare(y.claim.Addr) })
	}
	return e.byAddr
}

// InterfaceChanged tells the engine that an interface changed. Claims on an
// interface that goes down or away wait; when it comes back up, or changes
// MAC address, their bursts re-arm so the segment learns where they are.
func (e *Engine) InterfaceChanged(c InterfaceChange) {
	if c.Port != "" {
		c.Up = false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var claims []*claimState
	for _, cs := range e.claims {
		if cs.claim.Interface == c.Name {
			claims = append(claims, cs)
		}
	}
	if len(claims) == 0 {
		return
	}
	slices.SortFunc(claims, func(x, y *claimState) int { return x.claim.Addr.Compare(y.claim.Addr) })
	p := e.ports[c.Name]
	level := slog.LevelInfo
	if c.Port != "" {
		level = slog.LevelWarn // nothing answers for these claims now
	}
	event := func(msg string) {
		e.log.Log(context.Background(), level, "interface change", "interface", c.Name, "change", msg, "claims", len(claims))
		e.publish(Event{Kind: EventInterface, Interface: c.Name, MAC: c.MAC.String(), Message: msg})
	}
	switch {
	case c.Deleted:
		if p != nil {
			e.closePortLocked(p, claims)
		}
		event("deleted: its claims wait for an interface of that name")
	case p != nil && (p.Index() != c.Index || (len(c.MAC) > 0 && !sameMAC(p.MAC(), c.MAC))):
		e.closePortLocked(p, claims)
		event("changed (new MAC address or new interface): claims re-armed with the new MAC")
		e.reopenLocked(c, claims)
	case p == nil:
		event("returned")
		e.reopenLocked(c, claims)
	case p.up != c.Up:
		p.up = c.Up
		if c.Up {
			event("up: bursts re-armed")
			if added := e.reassignLocked(claims); len(added) > 0 {
				// The port answered for these while they were not
				// assigned (the kernel drops IPv6 addresses with the
				// link); now the kernel answers for them again.
				e.silenceLocked(p, claims, added)
			}
			for _, cs := range claims {
				if cs.port == p {
					e.armWithProbe(cs)
				}
			}
		} else {
			msg := "down: claims wait for it"
			if c.Port != "" {
				msg = "became " + c.Port + ", which receives its frames: its claims wait until it leaves it (claim on the master instead)"
			}
			event(msg)
			for _, cs := range claims {
				if cs.port == p {
					e.sched.Cancel(cs.key())
					e.sched.Cancel(cs.probeKey())
				}
			}
		}
	}
	e.attachWaitingLocked(c.Name)
}

// attachWaitingLocked puts claims that wait on an interface (adopted while
// it could not be opened) on its port once the port is open.
func (e *Engine) attachWaitingLocked(name string) {
	p := e.ports[name]
	if p == nil {
		return
	}
	var waiting []*claimState
	for _, cs := range e.claims {
		if cs.claim.Interface == name && cs.port == nil {
			waiting = append(waiting, cs)
		}
	}
	if len(waiting) == 0 {
		return
	}
	if err := e.holdLocked(p, waiting); err != nil {
		e.log.Warn("cannot answer for waiting claims", "interface", name, "err", err)
		return
	}
	p.refs += len(waiting)
	for _, cs := range waiting {
		cs.port = p
		e.syncSendLocked(cs)
		if p.up {
			e.armWithProbe(cs)
		}
	}
}

// closePortLocked ends the bursts of claims on p and closes it; the claims
// keep their answer counts and wait.
func (e *Engine) closePortLocked(p *portRef, claims []*claimState) {
	for _, cs := range claims {
		if cs.port != p {
			continue
		}
		e.sched.Cancel(cs.key())
		e.sched.Cancel(cs.probeKey())
		e.answeredBefore[cs.claim.Addr] += p.Answered(cs.claim.Addr)
		cs.port, cs.answering = nil, false
		e.syncSendLocked(cs)
	}
	if err := p.Close(); err != nil {
		e.log.Warn("close interface", "interface", p.Name(), "err", err)
	}
	delete(e.ports, p.Name())
}

// reopenLocked opens the interface again for waiting claims and, if it is
// up, re-arms their bursts.
func (e *Engine) reopenLocked(c InterfaceChange, claims []*claimState) {
	p, err := e.cfg.Open(c.Name)
	if err != nil {
		e.log.Warn("interface is back but cannot be opened: its claims keep waiting", "interface", c.Name, "err", err)
		return
	}
	// The addresses go back first, so that they count as the kernel's,
	// which answers for them: one answer per request.
	if c.Up {
		e.reassignLocked(claims)
	}
	if err := e.holdLocked(p, claims); err != nil {
		_ = p.Close()
		e.log.Warn("interface is back but vip cannot answer on it: its claims keep waiting", "interface", c.Name, "err", err)
		return
	}
	ref := &portRef{Port: p, refs: len(claims), up: c.Up}
	e.ports[c.Name] = ref
	for _, cs := range claims {
		cs.port = ref
		e.syncSendLocked(cs)
		if c.Up {
			e.armWithProbe(cs)
		}
	}
}

// reassignLocked puts back the addresses of assigned claims: the kernel
// drops IPv6 addresses when a link goes down, and every address when its
// interface is deleted. It returns the addresses it added.
func (e *Engine) reassignLocked(claims []*claimState) (added []netip.Addr) {
	if e.cfg.Assigner == nil {
		return nil
	}
	var changed []Claim
	for _, cs := range claims {
		if !cs.claim.Options.Assign {
			continue
		}
		ok, err := e.cfg.Assigner.Add(cs.claim.Interface, cs.claim.Addr)
		if err != nil {
			e.log.Warn("cannot add the address back to its interface", "addr", cs.claim.Addr, "interface", cs.claim.Interface, "err", err)
			continue
		}
		if ok && !cs.claim.AddedAddress {
			cs.claim.AddedAddress = true
			changed = append(changed, cs.claim)
		}
		if ok {
			e.log.Info("added the address back to its interface", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
			added = append(added, cs.claim.Addr)
		}
	}
	if len(changed) > 0 {
		if err := e.cfg.Book.Put(context.Background(), changed...); err != nil {
			e.log.Warn("record re-added addresses", "err", err)
		}
	}
	return added
}

// SendRound sends one gratuitous round for k through its interface's Port;
// the Scheduler calls it.
func (e *Engine) SendRound(_ context.Context, k Key) (int, error) {
	e.sendMu.RLock()
	t, ok := e.sendTo[k.Addr]
	e.sendMu.RUnlock()
	if !ok || t.port.Index() != k.Ifindex {
		return 0, nil // released, waiting or moved while the round was due
	}
	if k.Probe {
		return t.port.Probe(k.Addr)
	}
	return t.port.Announce(k.Addr, t.frames)
}

// sendTarget is where and what SendRound sends for a claim.
type sendTarget struct {
	port   *portRef
	frames Frames
}

// syncSendLocked brings the claim's sendTarget up to date after its port
// or its options changed.
func (e *Engine) syncSendLocked(cs *claimState) {
	e.sendMu.Lock()
	defer e.sendMu.Unlock()
	if cur, ok := e.claims[cs.claim.Addr]; !ok || cur != cs || cs.port == nil {
		delete(e.sendTo, cs.claim.Addr)
		return
	}
	e.sendTo[cs.claim.Addr] = sendTarget{port: cs.port, frames: e.frames(cs)}
}

func (e *Engine) onBurst(ev BurstEvent) {
	if ev.Key.Probe {
		if ev.Kind == BurstRound {
			e.totals.probeFrames.Add(uint64(ev.Frames))
			if ev.Err != nil {
				e.log.Warn("probe failed", "addr", ev.Key.Addr, "err", ev.Err)
			}
		}
		return
	}
	switch ev.Kind {
	case BurstStart:
		e.log.Info("burst start", "addr", ev.Key.Addr, "window_end", ev.WindowEnd.Format(time.RFC3339Nano))
		e.publish(Event{Time: ev.At, Kind: EventBurstStart, Addr: ev.Key.Addr})
	case BurstExtended:
		e.log.Debug("burst extended", "addr", ev.Key.Addr, "window_end", ev.WindowEnd.Format(time.RFC3339Nano))
	case BurstRound:
		e.totals.gratuitousFrames.Add(uint64(ev.Frames))
		e.sentMu.Lock()
		e.sent[ev.Key.Addr] += uint64(ev.Frames)
		e.sentMu.Unlock()
		if ev.Err != nil {
			e.log.Warn("gratuitous round failed", "addr", ev.Key.Addr, "round", ev.Round, "frames", ev.Frames, "err", ev.Err)
		} else {
			e.log.Debug("gratuitous round", "addr", ev.Key.Addr, "round", ev.Round, "frames", ev.Frames, "late", ev.Late)
		}
	case BurstEnd:
		e.log.Info("burst end", "addr", ev.Key.Addr, "rounds", ev.Round, "frames", ev.Frames, "cancelled", ev.Cancelled)
		e.publish(Event{Time: ev.At, Kind: EventBurstEnd, Addr: ev.Key.Addr, Rounds: ev.Round, Frames: ev.Frames})
	}
}
