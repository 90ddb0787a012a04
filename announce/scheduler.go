package announce

import (
	"container/heap"
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"
)

// Defaults of the gratuitous burst, after MetalLB's layer-2 mode: rounds
// 1.1 s apart, just above Linux's 1 s neighbour locktime so that no round is
// ignored, for 5 s from the latest claim or refresh.
const (
	DefaultWindow   = 5 * time.Second
	DefaultInterval = 1100 * time.Millisecond
	// DefaultRate is the default cap on gratuitous frames per second, all
	// addresses together: the first rounds of 10,000 IPv4 claims (two
	// frames each) go out within 0.4 s, and the steady 18,000 frames/s of
	// their bursts fit, while staying a few percent of a gigabit link.
	DefaultRate = 50000
)

// Key names one address on one interface: the unit the scheduler announces.
// Probe keys carry the address's probes, which share the single sender and
// its rate cap with the gratuitous rounds.
type Key struct {
	Ifindex int
	Addr    netip.Addr
	Probe   bool
}

func (k Key) String() string {
	if k.Probe {
		return fmt.Sprintf("probe %s@%d", k.Addr, k.Ifindex)
	}
	return fmt.Sprintf("%s@%d", k.Addr, k.Ifindex)
}

// A RoundSender sends one round of gratuitous advertisements for a key and
// says how many frames went out. The scheduler calls it from a single
// goroutine, never concurrently.
type RoundSender interface {
	SendRound(ctx context.Context, k Key) (frames int, err error)
}

// SchedulerConfig sets the burst and the pace of a Scheduler.
type SchedulerConfig struct {
	// Window is how long rounds go on after the latest Arm of a key: it
	// holds the rounds that fall in it when each goes out on time, and a
	// late one still goes, up to an Interval after the window's end. A
	// window shorter than Interval sends a single round.
	Window time.Duration
	// Interval is the time between two rounds of one key.
	Interval time.Duration
	// Rate caps the frames per second sent for all keys together.
	Rate float64
	// Bucket is how many frames the cap lets out at once after a quiet
	// spell: the rounds charged in any stretch of time d hold at most
	// Rate·d + Bucket frames (a round is charged right before it is
	// sent). Zero means 20 ms worth of Rate (1,000 frames at
	// DefaultRate), and never less than one round's maxRoundCost.
	Bucket int
	// Clock is the time source; nil means the real clock.
	Clock clockwork.Clock
	// OnEvent, if set, is called from the sender goroutine for every burst
	// event. It must not block and must not call back into the Scheduler.
	OnEvent func(BurstEvent)
}

// BurstKind says what happened to a key's burst.
type BurstKind int

// The kinds of BurstEvent.
const (
	BurstStart    BurstKind = iota // a window opened: the first round is due now
	BurstExtended                  // a running window was re-armed
	BurstRound                     // a round was sent (Err set if it failed)
	BurstEnd                       // the window closed, or the key was cancelled
)

func (k BurstKind) String() string {
	switch k {
	case BurstStart:
		return "start"
	case BurstExtended:
		return "extended"
	case BurstRound:
		return "round"
	case BurstEnd:
		return "end"
	}
	return fmt.Sprintf("BurstKind(%d)", int(k))
}

// BurstEvent reports progress of one key's burst.
type BurstEvent struct {
	Kind BurstKind
	Key  Key
	// At is when the event happened; for a round, when it was sent.
	At time.Time
	// WindowEnd is when the window closes (start, extended, round).
	WindowEnd time.Time
	// Round counts the rounds of this burst so far, this one included.
	Round int
	// Frames counts the frames of this round (round) or of the burst (end).
	Frames int
	// Late is how long after its due time a round went out.
	Late time.Duration
	// Cancelled is set on an end caused by Cancel rather than the window.
	Cancelled bool
	Err       error
}

// BurstState describes a key's burst as Scheduler.State reports it.
type BurstState struct {
	Active    bool
	WindowEnd time.Time
	NextRound time.Time
	Rounds    int
	Frames    int
}

// Scheduler sends the gratuitous advertisements of every claimed address
// from one goroutine (Run), so each address has exactly one sender and the
// total rate stays under the configured cap however many addresses are held.
//
// Each Arm of a key (a claim or a refresh) opens or extends that key's window
// to Window from now. A new window sends its first round at once, then one
// round every Interval while the window lasts. Re-arming a running window
// only moves its end, so rounds never come closer than Interval, which keeps
// them above the neighbour locktime of the hosts that hear them. A late
// round moves the ones after it, each still Interval after the one before,
// but costs none of them.
type Scheduler struct {
	cfg     SchedulerConfig
	clock   clockwork.Clock
	sender  RoundSender
	limiter *rate.Limiter

	mu      sync.Mutex
	entries map[Key]*entry
	queue   dueHeap[*entry]
	wake    chan struct{}

	// onPark, set only by tests, is called each time Run parks with nothing
	// to do before wait has passed (negative: until woken).
	onPark func(wait time.Duration)
}

type entry struct {
	key   Key
	burst Burst
	due   time.Time
	// slot is when the next round would be due had every round of the
	// window gone out on time: the window holds the rounds whose slot is
	// in it, so a late round delays the ones after it but never drops one.
	slot   time.Time
	end    time.Time
	rounds int
	frames int
	// live is closed after the first round of the current window.
	live  chan struct{}
	index int // in the queue; -1 while the entry is being sent
}

// NewScheduler returns a Scheduler that sends rounds through s. Zero fields
// of cfg take the defaults.
func NewScheduler(cfg SchedulerConfig, s RoundSender) *Scheduler {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	// A bucket of 20 ms worth of frames lets a round go out whole without
	// ever letting a line-rate burst through.
	if cfg.Bucket <= 0 {
		cfg.Bucket = int(cfg.Rate / 50)
	}
	cfg.Bucket = max(cfg.Bucket, maxRoundCost)
	return &Scheduler{
		cfg:     cfg,
		clock:   cfg.Clock,
		sender:  s,
		limiter: rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Bucket),
		entries: make(map[Key]*entry),
		wake:    make(chan struct{}, 1),
	}
}

// maxRoundCost bounds the frames one round may count against the rate.
const maxRoundCost = 8

// Config returns the scheduler's configuration with defaults filled in.
func (s *Scheduler) Config() SchedulerConfig { return s.cfg }

// Burst shapes one key's gratuitous burst: a round every Interval until
// Window after the latest Arm. A zero Window (or a zero Interval) is a
// single round, and no window: a probe, or a claim with --window 0. Make
// one with Scheduler.Burst, which fills in the defaults.
type Burst struct {
	Window, Interval time.Duration
	// Cost is the number of frames one round sends, charged against the
	// rate cap.
	Cost int
}

// Burst is the burst a claim asks for, costing cost frames a round: its
// window and interval where positive, else the scheduler's; single sends
// one round and opens no window. It is the one place where a burst's
// defaults are decided: the command line sends only what the user gave,
// and the agent's plan passes on only what the request holds.
func (s *Scheduler) Burst(window, interval time.Duration, single bool, cost int) Burst {
	if window <= 0 {
		window = s.cfg.Window
	}
	if interval <= 0 {
		interval = s.cfg.Interval
	}
	if single {
		window = 0
	}
	return Burst{Window: window, Interval: interval, Cost: cost}
}

// Arm opens a window for k, or extends its running window, to the burst's
// window from now. The returned channel is closed once k's first round of a
// new window has been sent, or at once when a window was already running.
func (s *Scheduler) Arm(k Key, b Burst) <-chan struct{} {
	b.Cost = min(max(b.Cost, 1), maxRoundCost)
	if b.Window < 0 || b.Interval <= 0 {
		// A single round: the first round's slot is the window's end,
		// and any interval puts the next one past it.
		b.Window, b.Interval = 0, max(b.Interval, time.Second)
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[k]; ok {
		e.end = now.Add(b.Window)
		e.burst = b
		s.emit(BurstEvent{Kind: BurstExtended, Key: k, At: now, WindowEnd: e.end, Round: e.rounds})
		return e.live
	}
	e := &entry{key: k, burst: b, due: now, slot: now, end: now.Add(b.Window), live: make(chan struct{})}
	s.entries[k] = e
	heap.Push(&s.queue, e)
	s.emit(BurstEvent{Kind: BurstStart, Key: k, At: now, WindowEnd: e.end})
	s.poke()
	return e.live
}

// Cancel ends k's window at once, if one is running.
func (s *Scheduler) Cancel(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[k]
	if !ok {
		return
	}
	s.finish(e, true)
	s.poke()
}

// State reports k's burst.
func (s *Scheduler) State(k Key) BurstState {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[k]
	if !ok {
		return BurstState{}
	}
	return BurstState{Active: true, WindowEnd: e.end, NextRound: e.due, Rounds: e.rounds, Frames: e.frames}
}

// Run sends rounds until ctx is done. Exactly one Run may be active.
func (s *Scheduler) Run(ctx context.Context) error {
	for {
		wait, e := s.next()
		if e != nil {
			s.send(ctx, e)
			continue
		}
		if err := s.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// next returns the entry to send now, having taken it off the queue and its
// frames out of the rate budget, or how long to wait before looking again
// (negative: until woken).
func (s *Scheduler) next() (time.Duration, *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return -1, nil
	}
	e := s.queue[0]
	now := s.clock.Now()
	if d := e.due.Sub(now); d > 0 {
		return d, nil
	}
	if tokens := s.limiter.TokensAt(now); tokens < float64(e.burst.Cost) {
		d := time.Duration((float64(e.burst.Cost) - tokens) / s.cfg.Rate * float64(time.Second))
		return max(d, time.Microsecond), nil
	}
	s.limiter.AllowN(now, e.burst.Cost)
	heap.Pop(&s.queue)
	return 0, e
}

func (s *Scheduler) send(ctx context.Context, e *entry) {
	frames, err := s.sender.SendRound(ctx, e.key)
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries[e.key] != e {
		return // cancelled while sending
	}
	e.rounds++
	e.frames += frames
	s.emit(BurstEvent{Kind: BurstRound, Key: e.key, At: now, WindowEnd: e.end, Round: e.rounds, Frames: frames, Late: now.Sub(e.due), Err: err})
	if e.rounds == 1 {
		close(e.live)
	}
	// The next round is due Interval after this one went out, never
	// sooner, however late this one was. Whether the window holds it is
	// a matter of its slot, not of its due time: a sender held up for
	// longer than the rate cap's bucket can make up for (a busy machine,
	// a RoundSender that blocked) leaves the rest of a train of rounds
	// late, and judging by due times cut the last round of thousands of
	// keys short of their window. After a stall so long that the round
	// would come more than an Interval after the window's end, the
	// window is over all the same.
	e.slot = e.slot.Add(e.burst.Interval)
	next := now.Add(e.burst.Interval)
	if e.slot.After(e.end) || next.After(e.end.Add(e.burst.Interval)) {
		s.finish(e, false)
		return
	}
	e.due = next
	heap.Push(&s.queue, e)
}

// finish removes e; s.mu must be held.
func (s *Scheduler) finish(e *entry, cancelled bool) {
	delete(s.entries, e.key)
	if e.index >= 0 {
		heap.Remove(&s.queue, e.index)
	}
	select {
	case <-e.live:
	default:
		close(e.live)
	}
	s.emit(BurstEvent{Kind: BurstEnd, Key: e.key, At: s.clock.Now(), Round: e.rounds, Frames: e.frames, Cancelled: cancelled})
}

func (s *Scheduler) emit(ev BurstEvent) {
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(ev)
	}
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-s.wake:
		return nil // woken while busy: look again before parking
	default:
	}
	if d < 0 {
		if s.onPark != nil {
			s.onPark(d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
			return nil
		}
	}
	t := s.clock.NewTimer(d)
	defer t.Stop()
	if s.onPark != nil {
		s.onPark(d)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.wake:
	case <-t.Chan():
	}
	return nil
}

// dueTime and setHeapIndex put entries in the scheduler's dueHeap.
func (e *entry) dueTime() time.Time { return e.due }
func (e *entry) setHeapIndex(i int) { e.index = i }
