package announce

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type sent struct {
	key Key
	at  time.Duration // since t0
}

// recorder is a RoundSender that records each round and the most rounds it
// ever saw in flight at once.
type recorder struct {
	clock    clockwork.Clock
	frames   int
	mu       sync.Mutex
	sends    []sent
	inflight atomic.Int32
	maxIn    atomic.Int32
	// afterSend, if set, is called at the end of the n-th SendRound
	// (from 1), on the sender goroutine.
	afterSend func(n int)
}

func (r *recorder) SendRound(_ context.Context, k Key) (int, error) {
	n := r.inflight.Add(1)
	defer r.inflight.Add(-1)
	if n > r.maxIn.Load() {
		r.maxIn.Store(n)
	}
	r.mu.Lock()
	r.sends = append(r.sends, sent{k, r.clock.Now().Sub(t0)})
	nth := len(r.sends)
	r.mu.Unlock()
	if r.afterSend != nil {
		r.afterSend(nth)
	}
	return r.frames, nil
}

func (r *recorder) got() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.sends...)
}

func (r *recorder) times(k Key) []time.Duration {
	var out []time.Duration
	for _, s := range r.got() {
		if s.key == k {
			out = append(out, s.at)
		}
	}
	return out
}

type harness struct {
	t    *testing.T
	fc   *clockwork.FakeClock
	s    *Scheduler
	rec  *recorder
	done chan error

	mu   sync.Mutex
	cond *sync.Cond
	evs  []BurstEvent
	gen  int           // how many times the sender parked
	wait time.Duration // how long it parked for the last time (negative: until woken)
	at   time.Time     // when it parked the last time
}

func newHarness(t *testing.T, cfg SchedulerConfig, frames int) *harness {
	t.Helper()
	fc := clockwork.NewFakeClockAt(t0)
	h := &harness{t: t, fc: fc, rec: &recorder{clock: fc, frames: frames}, done: make(chan error, 1)}
	h.cond = sync.NewCond(&h.mu)
	cfg.Clock = fc
	cfg.OnEvent = func(ev BurstEvent) {
		h.mu.Lock()
		h.evs = append(h.evs, ev)
		h.mu.Unlock()
	}
	h.s = NewScheduler(cfg, h.rec)
	h.s.onPark = func(wait time.Duration) {
		h.mu.Lock()
		h.gen++
		h.wait, h.at = wait, fc.Now()
		h.cond.Broadcast()
		h.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { h.done <- h.s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(5 * time.Second):
			t.Error("scheduler did not stop after its context was cancelled")
		}
	})
	h.waitPark(0)
	return h
}

// waitPark waits until the sender has parked more than g times, and returns
// how many times it has.
func (h *harness) waitPark(g int) int {
	h.t.Helper()
	timer := time.AfterFunc(5*time.Second, func() {
		h.mu.Lock()
		h.gen = -1 << 30 // flag the timeout to the waiter
		h.cond.Broadcast()
		h.mu.Unlock()
	})
	defer timer.Stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.gen <= g && h.gen >= 0 {
		h.cond.Wait()
	}
	if h.gen < 0 {
		h.t.Fatal("the sender goroutine never parked")
	}
	return h.gen
}

// do runs an action that wakes the sender (Arm of a new key, Cancel) and
// waits until the sender has dealt with it and parked again.
func (h *harness) do(f func()) {
	h.t.Helper()
	h.mu.Lock()
	g := h.gen
	h.mu.Unlock()
	f()
	h.waitPark(g)
}

func (h *harness) arm(k Key, cost int) <-chan struct{} {
	var live <-chan struct{}
	h.do(func() { live = h.s.Arm(k, h.s.Burst(0, 0, false, cost)) })
	return live
}

// advance moves the fake clock forward by d, stopping at each moment the
// sender's timer falls due and waiting until it has sent and parked again, so
// every round goes out exactly when it is due.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	end := h.fc.Now().Add(d)
	for {
		h.mu.Lock()
		g, wait, due := h.gen, h.wait, h.at.Add(h.wait)
		h.mu.Unlock()
		now := h.fc.Now()
		if wait < 0 || due.After(end) {
			h.fc.Advance(end.Sub(now))
			return
		}
		h.fc.Advance(due.Sub(now))
		h.waitPark(g)
	}
}

func (h *harness) events(kind BurstKind) []BurstEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []BurstEvent
	for _, e := range h.evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func waitLive(t *testing.T, live <-chan struct{}) {
	t.Helper()
	select {
	case <-live:
	case <-time.After(5 * time.Second):
		t.Fatal("first round was never sent")
	}
}

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var (
	k1 = Key{Ifindex: 2, Addr: netip.MustParseAddr("192.0.2.10")}
	k2 = Key{Ifindex: 2, Addr: netip.MustParseAddr("2001:db8::10")}
)

func TestSchedulerBurst(t *testing.T) {
	tests := []struct {
		name     string
		window   time.Duration
		interval time.Duration
		want     []time.Duration
	}{
		{"defaults: 5 rounds 1.1 s apart", DefaultWindow, DefaultInterval, ms(0, 1100, 2200, 3300, 4400)},
		{"round due exactly at window end is sent", 2 * time.Second, 500 * time.Millisecond, ms(0, 500, 1000, 1500, 2000)},
		{"window shorter than interval: one round", 500 * time.Millisecond, time.Second, ms(0)},
		{"zero window takes the default", 0, DefaultInterval, ms(0, 1100, 2200, 3300, 4400)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, SchedulerConfig{Window: tt.window, Interval: tt.interval}, 2)
			live := h.arm(k1, 2)
			waitLive(t, live)
			if got := h.rec.times(k1); !equalDurations(got, ms(0)) {
				t.Fatalf("first round: got sends at %v, want one at once", got)
			}
			h.advance(h.s.Config().Window + 3*tt.interval)
			if got := h.rec.times(k1); !equalDurations(got, tt.want) {
				t.Errorf("got rounds at %v, want %v", got, tt.want)
			}
			ends := h.events(BurstEnd)
			if len(ends) != 1 || ends[0].Round != len(tt.want) || ends[0].Frames != 2*len(tt.want) || ends[0].Cancelled {
				t.Errorf("got end events %+v, want one with %d rounds, %d frames", ends, len(tt.want), 2*len(tt.want))
			}
			if st := h.s.State(k1); st.Active {
				t.Errorf("got state %+v after the window, want inactive", st)
			}
		})
	}
}

// TestSchedulerLateRoundKeepsTheRest stalls the sender inside its second
// round, as a busy machine or a blocked RoundSender does: the rounds after
// it move, each Interval after the one before, and the window still gets
// all of them unless the stall pushes one more than an Interval past its
// end.
func TestSchedulerLateRoundKeepsTheRest(t *testing.T) {
	tests := []struct {
		name  string
		stall time.Duration
		want  []time.Duration
	}{
		{"no stall", 0, ms(0, 1100, 2200, 3300, 4400)},
		{"a late round costs no round", 700 * time.Millisecond, ms(0, 1100, 2900, 4000, 5100)},
		{"a stall past the window by more than an interval ends it", 2 * time.Second, ms(0, 1100, 4200, 5300)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, SchedulerConfig{}, 2)
			h.rec.afterSend = func(n int) {
				if n == 2 {
					h.fc.Advance(tt.stall)
				}
			}
			waitLive(t, h.arm(k1, 2))
			h.advance(10 * time.Second)
			if got := h.rec.times(k1); !equalDurations(got, tt.want) {
				t.Errorf("got rounds at %v, want %v", got, tt.want)
			}
			if st := h.s.State(k1); st.Active {
				t.Errorf("got state %+v, want the window closed", st)
			}
		})
	}
}

func TestSchedulerRearmExtendsFromLatestCall(t *testing.T) {
	h := newHarness(t, SchedulerConfig{}, 2)
	waitLive(t, h.arm(k1, 2))
	h.advance(3400 * time.Millisecond)             // rounds at 0, 1.1, 2.2, 3.3
	live := h.s.Arm(k1, h.s.Burst(0, 0, false, 2)) // refresh at 3.4 s: window now ends at 8.4 s
	select {
	case <-live:
	default:
		t.Fatal("refresh of a running window: want the live channel already closed")
	}
	if st := h.s.State(k1); !st.WindowEnd.Equal(t0.Add(8400 * time.Millisecond)) {
		t.Fatalf("got window end %v, want 8.4 s (5 s from the refresh)", st.WindowEnd.Sub(t0))
	}
	h.advance(10 * time.Second)
	want := ms(0, 1100, 2200, 3300, 4400, 5500, 6600, 7700)
	if got := h.rec.times(k1); !equalDurations(got, want) {
		t.Errorf("got rounds at %v, want %v (no extra round at the refresh, spacing kept)", got, want)
	}
	if n := len(h.events(BurstExtended)); n != 1 {
		t.Errorf("got %d extended events, want 1", n)
	}
}

func TestSchedulerRearmAfterWindowSendsAtOnce(t *testing.T) {
	h := newHarness(t, SchedulerConfig{Window: time.Second, Interval: 500 * time.Millisecond}, 1)
	waitLive(t, h.arm(k1, 1))
	h.advance(3 * time.Second) // window over after rounds at 0, 0.5, 1.0
	waitLive(t, h.arm(k1, 1))
	h.advance(3 * time.Second)
	want := ms(0, 500, 1000, 3000, 3500, 4000)
	if got := h.rec.times(k1); !equalDurations(got, want) {
		t.Errorf("got rounds at %v, want %v", got, want)
	}
	if n := len(h.events(BurstStart)); n != 2 {
		t.Errorf("got %d start events, want 2", n)
	}
}

func TestSchedulerCancelStopsRounds(t *testing.T) {
	h := newHarness(t, SchedulerConfig{}, 2)
	waitLive(t, h.arm(k1, 2))
	waitLive(t, h.arm(k2, 1))
	h.advance(1200 * time.Millisecond)
	h.do(func() { h.s.Cancel(k1) })
	h.advance(5 * time.Second)
	if got := h.rec.times(k1); !equalDurations(got, ms(0, 1100)) {
		t.Errorf("cancelled key: got rounds at %v, want only 0 and 1.1 s", got)
	}
	if got := h.rec.times(k2); len(got) != 5 {
		t.Errorf("other key: got rounds at %v, want 5 rounds", got)
	}
	var cancelled int
	for _, e := range h.events(BurstEnd) {
		if e.Cancelled {
			cancelled++
		}
	}
	if cancelled != 1 {
		t.Errorf("got %d cancelled end events, want 1", cancelled)
	}
	h.s.Cancel(k1) // a second cancel is harmless
}

func TestSchedulerManyKeysOneSender(t *testing.T) {
	h := newHarness(t, SchedulerConfig{Rate: 1e6}, 2)
	const n = 1000
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{Ifindex: 2 + i%3, Addr: netip.AddrFrom4([4]byte{203, 0, 113, byte(i % 250)})}
		if i >= 250 {
			keys[i].Addr = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i), 14: byte(i >> 8)})
		}
		h.arm(keys[i], 2)
	}
	h.advance(6 * time.Second)
	if m := h.rec.maxIn.Load(); m != 1 {
		t.Errorf("got %d rounds in flight at once, want 1 (a single sender)", m)
	}
	for _, k := range keys {
		if got := h.rec.times(k); !equalDurations(got, ms(0, 1100, 2200, 3300, 4400)) {
			t.Fatalf("%v: got rounds at %v, want 5 rounds 1.1 s apart", k, got)
		}
	}
}

func TestSchedulerPacesFrames(t *testing.T) {
	const rate = 100 // frames per second; burst is then 8 frames
	h := newHarness(t, SchedulerConfig{Rate: rate, Window: time.Nanosecond}, 2)
	const n = 40
	for i := range n {
		h.arm(Key{Ifindex: 2, Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)})}, 2)
	}
	h.advance(2 * time.Second)
	got := h.rec.got()
	if len(got) != n {
		t.Fatalf("got %d rounds, want %d", len(got), n)
	}
	burst := h.s.limiter.Burst()
	for i, s := range got {
		frames := 2 * (i + 1)
		allowed := float64(burst) + rate*s.at.Seconds()
		if float64(frames) > allowed+1e-9 {
			t.Fatalf("by %v: got %d frames sent, want at most %.0f (burst %d + %d/s)", s.at, frames, allowed, burst, rate)
		}
	}
	// Paced, not starved: the last round goes out when the budget allows.
	wantLast := time.Duration(float64(2*n-burst) / rate * float64(time.Second))
	if last := got[n-1].at; last > wantLast+20*time.Millisecond {
		t.Errorf("got last round at %v, want by %v", last, wantLast)
	}
}

func TestSchedulerCancelledBeforeFirstRoundUnblocksLive(t *testing.T) {
	fc := clockwork.NewFakeClockAt(t0)
	s := NewScheduler(SchedulerConfig{Clock: fc}, &recorder{clock: fc})
	live := s.Arm(k1, s.Burst(0, 0, false, 2)) // Run is not running: no round can go out
	s.Cancel(k1)
	select {
	case <-live:
	default:
		t.Fatal("cancel before the first round: want the live channel closed so waiters do not hang")
	}
}

func TestSchedulerPerKeyBurst(t *testing.T) {
	h := newHarness(t, SchedulerConfig{}, 1)
	h.do(func() { h.s.Arm(k1, h.s.Burst(2*time.Second, 500*time.Millisecond, false, 1)) })
	h.do(func() { h.s.Arm(k2, h.s.Burst(0, 0, false, 1)) })
	h.advance(8 * time.Second)
	if got, want := h.rec.times(k1), ms(0, 500, 1000, 1500, 2000); !equalDurations(got, want) {
		t.Errorf("key with its own burst: got rounds at %v, want %v", got, want)
	}
	if got, want := h.rec.times(k2), ms(0, 1100, 2200, 3300, 4400); !equalDurations(got, want) {
		t.Errorf("key with the defaults: got rounds at %v, want %v", got, want)
	}
}

// TestSchedulerSingleRound: a burst with no window (a probe, --window 0) or
// no interval is one round, never a stream of rounds at the same instant,
// and Burst's single says the same of any window asked for.
func TestSchedulerSingleRound(t *testing.T) {
	h := newHarness(t, SchedulerConfig{}, 1)
	h.do(func() { h.s.Arm(k1, Burst{Cost: 1}) })
	h.do(func() { h.s.Arm(k2, h.s.Burst(3*time.Second, 0, true, 1)) })
	h.advance(6 * time.Second)
	for _, k := range []Key{k1, k2} {
		if got, want := h.rec.times(k), ms(0); !equalDurations(got, want) {
			t.Errorf("%v: got rounds at %v, want one at once", k, got)
		}
	}
	if b := h.s.Burst(0, 0, false, 2); b.Window != DefaultWindow || b.Interval != DefaultInterval || b.Cost != 2 {
		t.Errorf("Burst with nothing asked: got %+v, want the defaults", b)
	}
}

// TestSchedulerManyKeysAtTheCap arms thousands of keys at once, so that the
// rate cap spreads their first rounds, and checks what vipbench measures on
// the real clock, here exactly: the first rounds go out as fast as the
// bucket and the rate allow and no faster, every later round goes out
// Interval after its key's previous one (the cap, having spaced the first
// rounds, never delays the later ones), and no stretch of time sees more
// than Rate·d + Bucket frames.
func TestSchedulerManyKeysAtTheCap(t *testing.T) {
	const (
		n    = 2000
		cost = 2
		rate = 10000 // frames/s: the first rounds take (2·2000 − 200)/10,000 = 0.38 s, as 10,000 keys do at DefaultRate
	)
	h := newHarness(t, SchedulerConfig{Rate: rate}, cost)
	bucket := h.s.Config().Bucket
	if bucket != rate/50 {
		t.Fatalf("got a bucket of %d frames, want %d (20 ms of the rate)", bucket, rate/50)
	}
	for i := range n {
		h.arm(Key{Ifindex: 2, Addr: netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})}, cost)
	}
	h.advance(DefaultWindow + time.Second)

	// Float rounding in the token bucket may cost a microsecond here and
	// there.
	const slack = 2 * time.Microsecond
	got := h.rec.got()
	if len(got) != 5*n {
		t.Fatalf("got %d rounds, want %d (5 for each of %d keys)", len(got), 5*n, n)
	}
	prev := make(map[Key]time.Duration, n)
	firsts := 0
	for _, s := range got {
		if p, ok := prev[s.key]; ok {
			if gap := s.at - p; gap < DefaultInterval || gap > DefaultInterval+slack {
				t.Fatalf("%v: got a round %v after the one before, want %v", s.key, gap, DefaultInterval)
			}
			prev[s.key] = s.at
			continue
		}
		prev[s.key] = s.at
		firsts++
		// The earliest the budget allows the frames of this many rounds.
		earliest := time.Duration(max(0, float64(cost*firsts-bucket)/rate*float64(time.Second)))
		if s.at < earliest-slack || s.at > earliest+slack {
			t.Fatalf("first round %d: got it at %v, want it at %v, as soon as the budget allows", firsts, s.at, earliest)
		}
	}
	for _, ev := range h.events(BurstRound) {
		if ev.Round > 1 && ev.Late > slack {
			t.Fatalf("%v round %d: got BurstEvent.Late %v, want 0", ev.Key, ev.Round, ev.Late)
		}
	}
	for _, w := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second} {
		limit := rate*w.Seconds() + float64(bucket)
		lo, frames := 0, 0
		for _, s := range got {
			frames += cost
			for got[lo].at <= s.at-w {
				frames -= cost
				lo++
			}
			if float64(frames) > limit {
				t.Fatalf("got %d frames in the %v up to %v, want at most %.0f", frames, w, s.at, limit)
			}
		}
	}
	if m := h.rec.maxIn.Load(); m != 1 {
		t.Errorf("got %d rounds in flight at once, want 1", m)
	}
}
