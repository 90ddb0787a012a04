package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// Engine is what a Member needs of the claim engine.
type Engine interface {
	Claim(ctx context.Context, reqs []announce.Request, opts announce.ClaimOptions) ([]announce.Status, error)
	Adopt(ctx context.Context, claims []announce.Claim) ([]announce.Status, error)
	Resume(ctx context.Context, claims []announce.Claim, why string) ([]announce.Status, error)
	Refresh(ctx context.Context, addrs []netip.Addr) (refreshed, notHeld []netip.Addr, err error)
	Release(ctx context.Context, addrs []netip.Addr) (released, notHeld []netip.Addr, err error)
	Suspend(addrs []netip.Addr, why string) (suspended, notHeld []netip.Addr, err error)
	Status(addrs ...netip.Addr) []announce.Status
	Held() []netip.Addr
	Subscribe(n int) (<-chan announce.Event, func())
	SubscribeSince(n int, since time.Time) (<-chan announce.Event, func())
	Config() announce.EngineConfig
	Notify(ev announce.Event)
}

// DefaultTTL is the lease's default time to live: the longest a dead
// owner's addresses stay unanswered before a standby takes them, and the
// time a cut-off agent has before it must stop answering (minus the
// margin). Two seconds is etcd's shortest lease with its default election
// timeout, and puts a failover after kill -9 ahead of keepalived's at its
// defaults (BENCHMARKS.md). An etcd leader election (one to two seconds)
// or a store outage no longer darkens anything at it: the failsafe answers
// through it, on the promises of the other nodes, or alone for an owner
// with no other node (failsafe_alone.go); see docs/fleet.md, "Why 2 s".
const DefaultTTL = 2 * time.Second

// MinTTL and MaxTTL bound --lease-ttl: etcd raises a shorter TTL to its own
// minimum (two seconds with its default timing), and a longer one than an
// hour would leave a dead owner's addresses dark for that long.
const (
	MinTTL = 2 * time.Second
	MaxTTL = time.Hour
)

// CheckTTL says whether ttl can be a lease's TTL: whole seconds, as etcd
// counts them, within MinTTL and MaxTTL.
func CheckTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL || ttl%time.Second != 0 {
		return fmt.Errorf("--lease-ttl %s must be whole seconds from %s to %s", ttl, MinTTL, MaxTTL)
	}
	return nil
}

// Timing is when a member renews its lease and when it fences.
type Timing struct {
	TTL, Renew, Margin time.Duration
}

// TimingFor returns the renewal period and fencing margin for ttl.
func TimingFor(ttl time.Duration) Timing {
	renew := max(ttl/6, 250*time.Millisecond)
	return Timing{TTL: ttl, Renew: renew, Margin: max(ttl/4, renew+500*time.Millisecond)}
}

// FenceAfter is how long after the last renewal sent the member fences.
func (t Timing) FenceAfter() time.Duration { return t.TTL - t.Margin }

// Config configures a Member.
type Config struct {
	// Store is the store the member is guarded by; Ledger, when set,
	// stands for it (tests), else it is the Ledger over Store.
	Store  *store.Client
	Ledger Ledger
	// Node names this agent in the store.
	Node string
	TTL  time.Duration
	// Interfaces lists this host's interfaces for its registration.
	Interfaces func() []store.Interface
	Version    string
	// Forget, if set, drops claims from the agent's state file: those
	// released while fenced, which the engine no longer holds.
	Forget func(ctx context.Context, addrs ...netip.Addr) error
	// Deadline, when set, is where every port checks its frames: the
	// member moves it to each acknowledged renewal's send time plus
	// FenceAfter, on the Deadline's clock (CLOCK_BOOTTIME), and closes it
	// when the store says the lease is gone. Nil leaves the fence to the
	// timer alone, which a frozen process cannot run (tests only).
	Deadline *announce.Deadline
	// Clock is the member's clock: its renewals' ticker, the fence's
	// timer and the times it records (nil: the wall clock). A test that
	// fakes it gives the Deadline a clock derived from it too.
	Clock clockwork.Clock
	// Own returns the addresses the kernel has on the named interface
	// (announce.InterfaceAddrs): a guarded claim of one that vip did not
	// add is refused. Nil refuses none.
	Own func(ifname string) map[netip.Addr]bool
	// Failsafe, when set, keeps this node's addresses answered through
	// a store outage that every other node sees too (FailsafeConfig).
	// Promises, without it, is where an earlier agent with it kept its
	// promises, which this one keeps too.
	Failsafe *FailsafeConfig
	Promises string
	Log      *slog.Logger
}

// owned is a guarded claim: the key is this node's.
type owned struct {
	claim announce.Claim
	mac   string
}

// Member is an agent's place in the fleet; it wraps the engine so that every
// claim is guarded by the store (see the package comment).
type Member struct {
	cfg   Config
	eng   Engine
	l     Ledger
	clock clockwork.Clock
	// mover asks for the moves this member makes (TakeOver, Move).
	mover  *Mover
	timing Timing
	log    *slog.Logger
	host   string
	boot   string
	start  time.Time

	// locks serialise what changes an address's key and claim together
	// (claims, releases, moves, takeovers, resumption), address by
	// address, across the store's round trips and the engine's I/O; two
	// operations on different addresses never wait for each other.
	// Fencing takes none.
	locks addrLocks
	// leaseOps is held for reading by every operation that takes keys
	// under the lease and then claims in the engine (claimOp, a move's
	// arrival, a standby's takeover), and for writing while a
	// resumption changes the lease: a claim in flight when the lease
	// was lost finishes first (its commit finds the member fenced), and
	// none commits under a lease its keys were not made with. Taken
	// after the address locks, never before.
	leaseOps sync.RWMutex

	mu      sync.Mutex
	lease   LeaseID
	renewed time.Time // when the last renewal that succeeded was sent
	// goneLease is a lease the store said is gone: an acknowledgement of
	// it that comes after counts for nothing.
	goneLease LeaseID
	// inFlight counts the renewals waiting for the store's answer;
	// unanswered those given up since the last acknowledgement, and
	// answeredIn the round trips of the last acknowledged ones (answers
	// of them in all), for the fence's sentence.
	inFlight, unanswered int
	answeredIn           [8]time.Duration
	answers              int
	// ackMu orders the acknowledgements' moves of the deadline.
	ackMu    sync.Mutex
	fencedAt time.Time // zero unless fenced
	// guard is the last guard a read of the failsafe sets gave (valid
	// set), which takes carry until one fails on it (guardNow).
	guard      Guard
	guardValid bool
	// guardRead lets one read of the failsafe sets for the takes run at
	// a time (sharedRead).
	guardRead sync.Mutex
	// stalled is how long the renewals stopped for with the process
	// itself (frozen, starved), past the deadline: reported once the
	// resumption after it is known (see reportStall). withheldSeen is
	// the Deadline's count of frames withheld as last reported.
	stalled      time.Duration
	withheldSeen uint64
	// passed is the last deadline replaced after it had passed (closedAt:
	// closed), which reportWithheld names once a renewal moved it.
	passed time.Duration
	// revoking is closed once the last fence's revocation returned: a
	// resumption waits for it, so that no new lease opens the deadline
	// while the engine still holds a claim whose key may be another's.
	revoking chan struct{}
	fence    clockwork.Timer
	// claims keeps, by address, a guarded claim's place (owner: its key
	// is this node's and the engine holds it; fenced: revoked by a
	// fence, waiting for the store; lost: another node took it
	// meanwhile), this node's standby for the address, the takes a
	// standby put off while cordoned or fenced, a move here awaited, and
	// the watch of the address's key (claimBook).
	claims *claimBook
	// cordon is this node's cordon as last read (nil: none), cordoned
	// whether it held when last looked at; cordonEnd fires at its Until
	// (see setCordon).
	cordon    *store.Cordon
	cordoned  bool
	cordonEnd clockwork.Timer
	// runCtx is what the watches of claim keys run under (watchGone).
	runCtx context.Context
	// registered are the interfaces as the registration under the lease
	// has them; refreshing is set while a write of them is under way
	// (or waits to be tried again), refreshAgain when they changed since
	// it read them (see InterfacesChanged).
	registered   []store.Interface
	refreshing   bool
	refreshAgain bool
	// closed is set, under mu, once the member stops: nothing starts a
	// goroutine of its own from outside it then.
	closed bool

	// fs is the failsafe (nil: off); kept, with it off, the promises an
	// earlier agent of this node made with it on (Config.Promises).
	fs   *failsafeState
	kept map[string]time.Time
	// aloneSeen is, by owner, when this node first found a lapsed
	// owner alone's failsafe set (aloneHolds).
	aloneSeen map[string]aloneSighting
	// lapsedSeen says the last read of the failsafe sets found a lapsed
	// owner's set (readPeers reads them again).
	lapsedSeen atomic.Bool

	stop     context.CancelFunc
	wg       sync.WaitGroup
	resuming atomic.Bool
}

type lostClaim struct {
	claim announce.Claim
	to    string
	// at is when this node found it lost; taken when the taker's claim
	// says it took it (zero when unknown).
	at, taken time.Time
}

// Join registers this agent in the store under a new lease and starts
// renewing it and watching the fleet. A node name already alive in the
// store is refused, unless it is this host's own agent that died (same
// host and boot, its process gone): then its records are taken over.
func Join(ctx context.Context, cfg Config, eng Engine) (*Member, error) {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if err := CheckTTL(cfg.TTL); err != nil {
		return nil, err
	}
	if err := store.CheckNode(cfg.Node); err != nil {
		return nil, fmt.Errorf("--node: %w", err)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Ledger == nil {
		if cfg.Store == nil {
			return nil, errors.New("join the fleet: no store")
		}
		cfg.Ledger = store.NewLedger(cfg.Store, cfg.Log.With("node", cfg.Node))
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	m := &Member{
		cfg: cfg, eng: eng, l: cfg.Ledger, clock: cfg.Clock, timing: TimingFor(cfg.TTL),
		log: cfg.Log.With("node", cfg.Node), host: host, boot: strings.TrimSpace(string(boot)), start: cfg.Clock.Now(),
		claims: newClaimBook(), aloneSeen: map[string]aloneSighting{},
	}
	m.mover = &Mover{l: m.l, clock: m.clock}
	if cfg.Failsafe != nil {
		m.startFailsafe()
	} else if kept, err := loadPromises(cfg.Promises); err != nil {
		return nil, fmt.Errorf("read the failsafe promises an earlier agent of this node made: %w: remove the file once they have ended (a TTL at most)", err)
	} else {
		m.kept = kept
	}
	if err := m.register(ctx); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	m.mu.Lock()
	m.runCtx, m.stop = runCtx, stop
	m.mu.Unlock()
	rev, err := m.loadStandbys(ctx)
	if err != nil {
		stop()
		m.wg.Wait()
		m.revokeLease()
		return nil, err
	}
	if r, ok := eng.(selfReleaser); ok {
		r.OnRelease(m.engineReleased)
	}
	m.wg.Add(3)
	go func() { defer m.wg.Done(); m.renewLoop(runCtx) }()
	go func() { defer m.wg.Done(); m.watchLoop(runCtx, rev) }()
	go func() { defer m.wg.Done(); m.cordonLoop(runCtx) }()
	if m.fs != nil {
		m.runFailsafe(runCtx)
	}
	endpoints, _ := m.l.Where()
	m.log.Info("joined the fleet", "store", strings.Join(endpoints, ","), "lease_ttl", cfg.TTL,
		"fence_after", m.timing.FenceAfter(), "renew_every", m.timing.Renew)
	return m, nil
}

// selfReleaser is an engine that tells of the releases it decides by
// itself (announce.Engine.OnRelease).
type selfReleaser interface {
	OnRelease(fn func(addrs []netip.Addr, why string))
}

// engineReleased takes a release the engine decided by itself (a yield) to
// the store: the claims are no longer owned, and their keys are deleted in
// the background, on the member's own goroutine, not the engine's caller.
func (m *Member) engineReleased(addrs []netip.Addr, why string) {
	m.mu.Lock()
	var gone []netip.Addr
	for _, a := range addrs {
		if m.claims.releaseOwner(a) {
			gone = append(gone, a)
		}
	}
	ctx := m.runCtx
	m.mu.Unlock()
	if len(gone) == 0 || ctx == nil || ctx.Err() != nil {
		return // stopping: the lease's revocation deletes the keys
	}
	m.log.Warn("the engine released guarded claims by itself: their keys go too", "why", why, "claims", len(gone))
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		unlock, err := m.locks.lock(ctx, gone)
		if err != nil {
			return // stopping: the lease's revocation deletes the keys
		}
		defer unlock()
		// A claim of the same address since (its lock now ours) keeps
		// its key.
		m.mu.Lock()
		drop := slices.DeleteFunc(gone, func(a netip.Addr) bool { return m.claims.place(a) == event.StateOwner })
		m.mu.Unlock()
		m.dropKeys(ctx, drop)
		for _, a := range drop {
			m.notify(event.Release, a, "", "released in the store too: "+why)
		}
	}()
}

// Node returns this agent's node name.
func (m *Member) Node() string { return m.cfg.Node }

// Timing returns the member's lease timing.
func (m *Member) Timing() Timing { return m.timing }

// Lease returns the member's lease, the last renewal sent that succeeded,
// and since when it is fenced (zero if it is not).
func (m *Member) Lease() (id int64, renewed, fencedAt time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(m.lease), m.renewed, m.fencedAt
}

// fenceWhy silences every guarded claim at once, then revokes them from the
// engine and keeps them as fenced. The silence is the answer deadline's
// closing, which every port checks where its frames leave: it takes no
// lock that I/O holds, so neither a store that hangs nor an engine busy
// with a slow claim (its Revoke waits for the claim's book write and
// program loads) delays it. The revocation is the bookkeeping after.
func (m *Member) fenceWhy(why string) {
	if err := m.cfg.Deadline.Close(); err != nil {
		m.log.Error("fence: close the answer deadline", "err", err)
	}
	m.mu.Lock()
	if !m.fencedAt.IsZero() {
		m.mu.Unlock()
		return
	}
	m.fencedAt = m.clock.Now()
	addrs := m.claims.fenceAll()
	revoked := make(chan struct{})
	m.revoking = revoked
	m.mu.Unlock()
	if len(addrs) > 0 {
		if _, _, err := m.eng.Suspend(addrs, "fenced"); err != nil {
			m.log.Error("fence: stop answering", "err", err)
		}
	}
	close(revoked)
	m.log.Warn("fenced: stopped answering and sending for every guarded claim", "why", why, "claims", len(addrs))
	m.eng.Notify(announce.Event{Kind: event.Fence, State: api.StateFenced,
		Message: fmt.Sprintf("fenced: %s; stopped answering for %d claims until the store is back", why, len(addrs))})
}

// isFenced reports since when the member is fenced.
func (m *Member) isFenced() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fencedAt, !m.fencedAt.IsZero()
}

// PublishLingering writes rec, this node's counts after its releases,
// under the member's lease, so that it goes with the agent.
func (m *Member) PublishLingering(ctx context.Context, rec store.Lingering) error {
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	rec.Node = m.cfg.Node
	return m.l.PutLingering(ctx, lease, rec)
}

// Close stops renewing and watching and revokes the lease, which deletes
// this node's records bound to it (claims, registration, counts after
// release) at once; its standby records, bound to no lease, stay. The
// agent releases its claims in the engine first, so no answer outlives its
// key.
func (m *Member) Close() {
	m.halt()
	m.dropSet()
	m.l.Close()
	m.revokeLease()
}

// Leave stops renewing and watching without revoking the lease, for an
// agent that stops to be started again (agent.OnStopKeep): the lease and
// every key bound to it (claims, registration) stay until the
// lease expires, one TTL after the last renewal, and an agent of this node
// started again on this host before then takes them over. The agent has
// closed the answer deadline first, so nothing answers meanwhile. The
// registration says the agent stopped (markStopped). Its failsafe set
// goes too, unless it answered on failsafe until now: it answers nothing
// more, and the addresses it added lose their lifetimes at the deadline
// of its last renewal, before the lease can expire; a set left to lapse
// would hold a newcomer's takes (a set that names nobody: for half a
// minute) for nothing.
func (m *Member) Leave() {
	m.halt()
	m.markStopped()
	if since, _, _, _ := m.FailsafeInfo(); since.IsZero() {
		m.dropSet()
	}
	m.l.Close()
}

// halt stops the member's goroutines and waits for them.
func (m *Member) halt() {
	m.mu.Lock()
	m.closed = true
	if m.cordonEnd != nil {
		m.cordonEnd.Stop()
	}
	m.mu.Unlock()
	m.stop()
	m.wg.Wait()
}

func (m *Member) revokeLease() {
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.l.Revoke(ctx, lease); err != nil {
		m.log.Warn("revoke the lease at exit: the store expires it within its TTL", "err", err)
	}
}

// Info describes the member for the agent's status.
func (m *Member) Info() api.Store {
	id, renewed, fencedAt := m.Lease()
	endpoints, prefix := m.l.Where()
	st := api.Store{
		Endpoints: endpoints, Prefix: prefix, Node: m.cfg.Node, Lease: strconv.FormatInt(id, 16),
		LeaseTTL: api.Duration(m.timing.TTL), FenceAfter: api.Duration(m.timing.FenceAfter()),
		Renewed: renewed, Fenced: fencedAt,
	}
	if c, ok := m.Cordon(); ok {
		st.Cordon = c.API(m.clock.Now())
	}
	st.Unreachable = !renewed.IsZero() && m.clock.Since(renewed) >= m.timing.unreachedAfter()
	if m.fs != nil {
		st.FailsafeEnabled = true
		_, _, st.FailsafeUnready = m.roundTargets()
		// Once fenced, it no longer answers on failsafe (the history
		// has the span once the store is back).
		if since, by, at, alone := m.FailsafeInfo(); !since.IsZero() && fencedAt.IsZero() {
			st.Failsafe = &api.Failsafe{Since: since, AckedBy: by, AckedAt: at, AloneUntil: alone}
		}
	}
	if until, owner := m.promisedUntil(); until.After(m.clock.Now()) {
		st.Promised = &api.Promise{Owner: owner, Until: until}
	}
	if d := m.cfg.Deadline; d != nil {
		st.Withheld = d.Withheld()
		if d.Closed() {
			st.DeadlineClosed = true
		} else {
			left := m.DeadlineLeft()
			st.Deadline = m.clock.Now().Add(left)
			st.DeadlineLeft = api.Duration(left)
		}
	}
	return st
}

// DeadlineLeft is how long until the answer deadline passes (negative once
// it has): the frames still allowed without another renewal.
func (m *Member) DeadlineLeft() time.Duration {
	at, now := m.cfg.Deadline.At()
	return at - now
}

// Withheld counts the frames withheld for a past answer deadline.
func (m *Member) Withheld() uint64 { return m.cfg.Deadline.Withheld() }
