package announce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// EngineConfig configures an Engine. Zero fields take the defaults.
type EngineConfig struct {
	// Burst sets the gratuitous window, interval and rate cap.
	Burst SchedulerConfig
	// Frames are the gratuitous frame kinds each round sends.
	Frames Frames
	// RefreshEvery, when positive, re-arms every claim's window on that
	// period, for switches whose tables age out faster than hosts' caches.
	RefreshEvery time.Duration
	// Open opens a Port on the named interface. Nil means OpenInterface.
	Open func(ifname string) (Port, error)
	// Book keeps the record of claims. Nil means a MemBook.
	Book Book
	Log  *slog.Logger
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
}

// Engine holds claims: for each it has the interface's Port answer requests
// and the one Scheduler send the gratuitous rounds. It is safe for
// concurrent use; Run must be running for claims to go live.
type Engine struct {
	cfg   EngineConfig
	clock clockwork.Clock
	sched *Scheduler
	log   *slog.Logger

	mu     sync.Mutex
	ports  map[string]*portRef
	claims map[netip.Addr]*held4Engine

	// sentMu guards sent. It is a leaf lock: burst events, which arrive
	// with the scheduler's lock held, only ever take this one.
	sentMu sync.Mutex
	sent   map[Key]uint64
}

type portRef struct {
	Port
	refs int
}

type held4Engine struct {
	claim Claim
	port  *portRef
}

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
	}
	e := &Engine{
		cfg:    cfg,
		clock:  cfg.Burst.Clock,
		log:    cfg.Log,
		ports:  make(map[string]*portRef),
		claims: make(map[netip.Addr]*held4Engine),
		sent:   make(map[Key]uint64),
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

// Run sends gratuitous rounds (and periodic refreshes) until ctx is done,
// then releases every claim and returns.
func (e *Engine) Run(ctx context.Context) error {
	var tick <-chan time.Time
	if e.cfg.RefreshEvery > 0 {
		t := e.clock.NewTicker(e.cfg.RefreshEvery)
		defer t.Stop()
		tick = t.Chan()
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.sched.Run(sctx) // ends only when stopped
	}()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick:
			e.Refresh(ctx, e.held())
		}
	}
	_, _, err := e.Release(context.WithoutCancel(ctx), e.held())
	stop()
	<-done
	return err
}

func (e *Engine) held() []netip.Addr {
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

// Claim makes this host the owner of each requested address: it answers
// for it from now on and a gratuitous window opens (or, for an address
// already held, re-opens from now: a refresh). Either every request takes
// effect or none does. Claim returns once each address's first round has
// been sent.
func (e *Engine) Claim(ctx context.Context, reqs []Request) ([]Status, error) {
	lives, err := e.claim(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for _, live := range lives {
		select {
		case <-live:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the first gratuitous round: %w", ctx.Err())
		}
	}
	addrs := make([]netip.Addr, len(reqs))
	for i, r := range reqs {
		addrs[i] = r.Addr
	}
	return e.Status(addrs...), nil
}

func (e *Engine) claim(ctx context.Context, reqs []Request) ([]<-chan struct{}, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := make(map[netip.Addr]bool, len(reqs))
	for _, r := range reqs {
		if seen[r.Addr] {
			return nil, fmt.Errorf("claim %s: address given twice", r.Addr)
		}
		seen[r.Addr] = true
		if h, ok := e.claims[r.Addr]; ok && h.claim.Interface != r.Interface {
			return nil, fmt.Errorf("claim %s on %s: %w (%s); release it first", r.Addr, r.Interface, ErrHeldElsewhere, h.claim.Interface)
		}
	}

	// Everything below is undone if any step fails.
	var (
		opened []string
		added  []netip.Addr
	)
	undo := func() {
		for _, a := range added {
			h := e.claims[a]
			_ = h.port.Drop(a)
			_ = e.cfg.Book.Delete(ctx, a)
			h.port.refs--
			delete(e.claims, a)
		}
		for _, name := range opened {
			if p := e.ports[name]; p.refs == 0 {
				_ = p.Close()
				delete(e.ports, name)
			}
		}
	}
	for _, r := range reqs {
		if _, ok := e.ports[r.Interface]; ok {
			continue
		}
		p, err := e.cfg.Open(r.Interface)
		if err != nil {
			undo()
			return nil, fmt.Errorf("claim %s on %s: %w", r.Addr, r.Interface, err)
		}
		e.ports[r.Interface] = &portRef{Port: p}
		opened = append(opened, r.Interface)
	}

	now := e.clock.Now()
	var refreshed []netip.Addr
	for _, r := range reqs {
		if _, ok := e.claims[r.Addr]; ok {
			refreshed = append(refreshed, r.Addr)
			continue
		}
		p := e.ports[r.Interface]
		c := Claim{Addr: r.Addr, Interface: r.Interface, ClaimedAt: now, RefreshedAt: now}
		if err := e.cfg.Book.Put(ctx, c); err != nil {
			undo()
			return nil, fmt.Errorf("claim %s on %s: record the claim: %w", r.Addr, r.Interface, err)
		}
		if err := p.Hold(r.Addr); err != nil {
			_ = e.cfg.Book.Delete(ctx, r.Addr)
			undo()
			return nil, fmt.Errorf("claim %s on %s: %w", r.Addr, r.Interface, err)
		}
		p.refs++
		e.claims[r.Addr] = &held4Engine{claim: c, port: p}
		added = append(added, r.Addr)
	}
	for _, a := range refreshed {
		if err := e.refreshLocked(ctx, a, now); err != nil {
			undo()
			return nil, err
		}
	}

	lives := make([]<-chan struct{}, 0, len(reqs))
	for _, a := range added {
		h := e.claims[a]
		e.log.Info("claim", "addr", a, "interface", h.claim.Interface, "mac", h.port.MAC().String(),
			"window", e.cfg.Burst.Window, "interval", e.cfg.Burst.Interval, "frames", e.cfg.Frames.String())
		lives = append(lives, e.arm(h))
	}
	for _, a := range refreshed {
		lives = append(lives, e.arm(e.claims[a]))
	}
	return lives, nil
}

func (e *Engine) arm(h *held4Engine) <-chan struct{} {
	k := Key{Ifindex: h.port.Index(), Addr: h.claim.Addr}
	return e.sched.Arm(k, e.cfg.Frames.PerRound(k.Addr.Is4()))
}

func (e *Engine) refreshLocked(ctx context.Context, a netip.Addr, now time.Time) error {
	h := e.claims[a]
	c := h.claim
	c.RefreshedAt = now
	if err := e.cfg.Book.Put(ctx, c); err != nil {
		return fmt.Errorf("refresh %s: record the refresh: %w", a, err)
	}
	h.claim = c
	e.log.Info("refresh", "addr", a, "interface", c.Interface)
	return nil
}

// Refresh re-opens the gratuitous window of each held address from now. It
// returns the addresses that are not held, which it leaves alone.
func (e *Engine) Refresh(ctx context.Context, addrs []netip.Addr) (notHeld []netip.Addr, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	var errs []error
	for _, a := range addrs {
		if _, ok := e.claims[a]; !ok {
			notHeld = append(notHeld, a)
			continue
		}
		if err := e.refreshLocked(ctx, a, now); err != nil {
			errs = append(errs, err)
			continue
		}
		e.arm(e.claims[a])
	}
	return notHeld, errors.Join(errs...)
}

// Release stops answering for each address at once and ends its window. It
// returns the released addresses and those that were not held.
func (e *Engine) Release(ctx context.Context, addrs []netip.Addr) (released, notHeld []netip.Addr, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, a := range addrs {
		h, ok := e.claims[a]
		if !ok {
			notHeld = append(notHeld, a)
			continue
		}
		k := Key{Ifindex: h.port.Index(), Addr: a}
		e.sched.Cancel(k)
		if err := h.port.Drop(a); err != nil {
			errs = append(errs, fmt.Errorf("release %s on %s: %w", a, h.claim.Interface, err))
		}
		answered := h.port.Answered(a)
		if err := e.cfg.Book.Delete(ctx, a); err != nil {
			errs = append(errs, fmt.Errorf("release %s: forget the claim: %w", a, err))
		}
		delete(e.claims, a)
		e.sentMu.Lock()
		frames := e.sent[k]
		delete(e.sent, k)
		e.sentMu.Unlock()
		e.log.Info("release", "addr", a, "interface", h.claim.Interface, "answered", answered, "gratuitous_frames", frames)
		released = append(released, a)
		if h.port.refs--; h.port.refs == 0 {
			if err := h.port.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", h.claim.Interface, err))
			}
			delete(e.ports, h.claim.Interface)
		}
	}
	return released, notHeld, errors.Join(errs...)
}

// Status reports the given addresses that are held, or every claim when
// none are given, ordered by address.
func (e *Engine) Status(addrs ...netip.Addr) []Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(addrs) == 0 {
		for a := range e.claims {
			addrs = append(addrs, a)
		}
	}
	out := make([]Status, 0, len(addrs))
	for _, a := range addrs {
		h, ok := e.claims[a]
		if !ok {
			continue
		}
		k := Key{Ifindex: h.port.Index(), Addr: a}
		st := Status{Claim: h.claim, MAC: h.port.MAC().String(), State: StateHolding, Answered: h.port.Answered(a)}
		if b := e.sched.State(k); b.Active {
			st.State, st.WindowEnd = StateAnnouncing, b.WindowEnd
		}
		e.sentMu.Lock()
		st.GratuitousFrames = e.sent[k]
		e.sentMu.Unlock()
		out = append(out, st)
	}
	slices.SortFunc(out, func(x, y Status) int { return x.Addr.Compare(y.Addr) })
	return out
}

// SendRound sends one gratuitous round for k through its interface's Port;
// the Scheduler calls it.
func (e *Engine) SendRound(_ context.Context, k Key) (int, error) {
	e.mu.Lock()
	h, ok := e.claims[k.Addr]
	e.mu.Unlock()
	if !ok || h.port.Index() != k.Ifindex {
		return 0, nil // released while the round was due
	}
	return h.port.Announce(k.Addr, e.cfg.Frames)
}

func (e *Engine) onBurst(ev BurstEvent) {
	switch ev.Kind {
	case BurstStart:
		e.log.Info("burst start", "addr", ev.Key.Addr, "window_end", ev.WindowEnd.Format(time.RFC3339Nano))
	case BurstExtended:
		e.log.Debug("burst extended", "addr", ev.Key.Addr, "window_end", ev.WindowEnd.Format(time.RFC3339Nano))
	case BurstRound:
		e.sentMu.Lock()
		e.sent[ev.Key] += uint64(ev.Frames)
		e.sentMu.Unlock()
		if ev.Err != nil {
			e.log.Warn("gratuitous round failed", "addr", ev.Key.Addr, "round", ev.Round, "frames", ev.Frames, "err", ev.Err)
		} else {
			e.log.Debug("gratuitous round", "addr", ev.Key.Addr, "round", ev.Round, "frames", ev.Frames, "late", ev.Late)
		}
	case BurstEnd:
		e.log.Info("burst end", "addr", ev.Key.Addr, "rounds", ev.Round, "frames", ev.Frames, "cancelled", ev.Cancelled)
	}
}
