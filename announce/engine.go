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
	"sync/atomic"
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
	Frames FrameKinds
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
	// Window (zero for a single round), Interval and Frames are the
	// claim's bursts, the engine's defaults filled in.
	Window   time.Duration `json:"window"`
	Interval time.Duration `json:"interval"`
	Frames   FrameKinds    `json:"frames"`
	// Claimers are the other MACs seen answering for the address.
	Claimers []Claimer `json:"claimers,omitempty"`
	// Responder says what answers for the address: KindSocket, an
	// in-kernel responder's kind ("ebpf", with its Hook), or
	// KindKernel; empty while the claim waits for its interface.
	Responder string `json:"responder,omitempty"`
	Hook      string `json:"hook,omitempty"`
	// AskersRecorded says that the responder remembers who asks for the
	// address (KernelResponder.Askers), so that Engine.Askers reports them.
	AskersRecorded bool `json:"-"`
	// Traffic is what arrived for the address, when the responder counts
	// it; nil when it is unknown (the socket responder, the kernel).
	Traffic *Traffic `json:"traffic,omitempty"`
}

// InterfaceChange is what the engine is told when an interface changes.
type InterfaceChange struct {
	Name    string
	Index   int
	MAC     net.HardwareAddr
	Up      bool
	Deleted bool
	// Master, when set, says the interface now has a master that
	// receives its frames (it became a bridge's port, a bond's member),
	// such as "a port of bridge br0": its claims then wait as if it were
	// down, since nothing reaches it any more.
	Master string
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

	// op serialises the changes of the claims (claim, refresh, release,
	// interface changes), which do I/O: opening sockets, adding addresses
	// over netlink, joining groups, writing the book. mu guards the
	// memory that status, the sender and the detector read, and is never
	// held across I/O: a change plans under mu, does its I/O under op
	// alone, and commits under mu again. op comes first when both are
	// taken.
	op sync.Mutex
	// ports and each portRef's refs are the changes' own: guarded by op.
	ports map[string]*portRef

	mu     sync.Mutex
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

	// released is told of the releases the engine decides by itself
	// (OnRelease).
	released atomic.Pointer[func(addrs []netip.Addr, why string)]
}

// OnRelease has fn told of every release the engine decides by itself,
// after it stopped answering: a claim that yields to a competing claimer
// (--on-conflict yield). A guarded agent's member deletes the keys, so that
// the store never names this node for an address it gave up, and no
// fence and resume takes the address back. Releases asked for (Release,
// Suspend) are not told: their caller knows. fn must not call the engine
// back on the same goroutine for long: it runs on the detector's.
func (e *Engine) OnRelease(fn func(addrs []netip.Addr, why string)) {
	e.released.Store(&fn)
}

// selfReleased tells OnRelease's function of addrs.
func (e *Engine) selfReleased(addrs []netip.Addr, why string) {
	if fn := e.released.Load(); fn != nil && *fn != nil && len(addrs) > 0 {
		(*fn)(addrs, why)
	}
}

type portRef struct {
	Port
	refs int  // guarded by op
	up   bool // written under op and mu
}

type claimState struct {
	claim Claim
	port  *portRef // nil while the interface is gone
	// answering is set while the port answers for the address: not when
	// the kernel does (see silence.go). Written under op and mu.
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
		cfg.Frames = DefaultFrameKinds
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
			cfg.Kernel = InterfaceAddrs
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

// SubscribeSince is Subscribe, with the channel starting with the events
// later than since that the engine still keeps (the latest 4096), and a
// missed event first when some later than since are no longer kept. A
// zero since is Subscribe.
func (e *Engine) SubscribeSince(n int, since time.Time) (<-chan Event, func()) {
	return e.hub.subscribeSince(n, since)
}

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
	_, _, err := e.release(context.WithoutCancel(ctx), e.Held(), releaseHow{force: true})
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
