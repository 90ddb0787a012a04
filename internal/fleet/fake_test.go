package fleet_test

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/event"
)

// fakeEngine is an engine of memory: it records when each address began
// and stopped being answered, so tests can tell that two nodes never
// answered at once.
type fakeEngine struct {
	mu      sync.Mutex
	held    map[netip.Addr]announce.Claim
	spans   map[netip.Addr][]span
	events  []announce.Event
	refuses map[netip.Addr]error
	// traffic, when it has an address, counts traffic for it.
	traffic map[netip.Addr]uint64
	// deadline is the member's answer deadline, which the engine's
	// ports would check where frames leave (see world.join).
	deadline *announce.Deadline
	// suspendWait, when not nil, holds every Revoke until it is closed:
	// an engine whose lock a slow claim holds.
	suspendWait chan struct{}
	// releaseWait, when not nil, holds every Release until it is
	// closed: an owner slow to let go of a moving address.
	releaseWait chan struct{}
	// claimWait, for an address, holds a claim of it in the engine until
	// it is closed: a claim whose port takes long to open.
	claimWait map[netip.Addr]chan struct{}
	// entered, when not nil, hears each address whose claim waits.
	entered chan netip.Addr
	// onRelease is what the member asked to be told of the engine's own
	// releases (OnRelease).
	onRelease func(addrs []netip.Addr, why string)
}

func (f *fakeEngine) OnRelease(fn func(addrs []netip.Addr, why string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onRelease = fn
}

// yield releases a as the engine does by itself when a claim yields to a
// competing claimer, and tells the member.
func (f *fakeEngine) yield(a netip.Addr) {
	f.drop([]netip.Addr{a})
	f.mu.Lock()
	fn := f.onRelease
	f.mu.Unlock()
	if fn != nil {
		fn([]netip.Addr{a}, "yielded to the competing claimer 02:00:00:00:00:99")
	}
}

type span struct{ from, to time.Time }

func newFakeEngine() *fakeEngine {
	return &fakeEngine{held: map[netip.Addr]announce.Claim{}, spans: map[netip.Addr][]span{}, refuses: map[netip.Addr]error{}}
}

func (f *fakeEngine) take(claims []announce.Claim) ([]announce.Status, error) {
	for _, c := range claims {
		f.mu.Lock()
		wait, entered := f.claimWait[c.Addr], f.entered
		f.mu.Unlock()
		if wait != nil {
			if entered != nil {
				entered <- c.Addr
			}
			<-wait
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var st []announce.Status
	var refused []announce.Refusal
	for _, c := range claims {
		if err := f.refuses[c.Addr]; err != nil {
			refused = append(refused, announce.Refusal{Addr: c.Addr, Err: err})
			continue
		}
		if _, ok := f.held[c.Addr]; !ok {
			f.spans[c.Addr] = append(f.spans[c.Addr], span{from: time.Now()})
		}
		f.held[c.Addr] = c
		st = append(st, announce.Status{Claim: c, State: api.StateAnnouncing, MAC: "02:00:00:00:00:01"})
	}
	if len(refused) > 0 {
		return st, &announce.RefusedError{Refused: refused}
	}
	return st, nil
}

func (f *fakeEngine) Claim(_ context.Context, reqs []announce.Request, opts announce.ClaimOptions) ([]announce.Status, error) {
	claims := make([]announce.Claim, len(reqs))
	for i, r := range reqs {
		claims[i] = announce.Claim{Addr: r.Addr, Interface: r.Interface, ClaimedAt: time.Now(), Options: opts}
	}
	return f.take(claims)
}

// Adopt and Resume tell of each claim as the engine does: in an event that
// says why it was taken.
func (f *fakeEngine) Adopt(ctx context.Context, claims []announce.Claim) ([]announce.Status, error) {
	return f.Resume(ctx, claims, "adopted from an earlier run")
}

func (f *fakeEngine) Resume(_ context.Context, claims []announce.Claim, why string) ([]announce.Status, error) {
	st, err := f.take(claims)
	for _, s := range st {
		f.Notify(announce.Event{Kind: event.Resume, Addr: s.Addr, Message: why})
	}
	return st, err
}

func (f *fakeEngine) Refresh(_ context.Context, addrs []netip.Addr) (refreshed, notHeld []netip.Addr, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range addrs {
		if _, ok := f.held[a]; ok {
			refreshed = append(refreshed, a)
		} else {
			notHeld = append(notHeld, a)
		}
	}
	return refreshed, notHeld, nil
}

func (f *fakeEngine) drop(addrs []netip.Addr) (done, notHeld []netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range addrs {
		if _, ok := f.held[a]; !ok {
			notHeld = append(notHeld, a)
			continue
		}
		delete(f.held, a)
		s := f.spans[a]
		s[len(s)-1].to = time.Now()
		done = append(done, a)
	}
	return done, notHeld
}

func (f *fakeEngine) Release(_ context.Context, addrs []netip.Addr) (released, notHeld []netip.Addr, err error) {
	f.mu.Lock()
	wait := f.releaseWait
	f.mu.Unlock()
	if wait != nil {
		<-wait
	}
	released, notHeld = f.drop(addrs)
	return released, notHeld, nil
}

func (f *fakeEngine) Suspend(addrs []netip.Addr, _ string) (suspended, notHeld []netip.Addr, err error) {
	if f.suspendWait != nil {
		<-f.suspendWait
	}
	suspended, notHeld = f.drop(addrs)
	return suspended, notHeld, nil
}

func (f *fakeEngine) Status(addrs ...netip.Addr) []announce.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	var st []announce.Status
	for a, c := range f.held {
		if len(addrs) == 0 || slices.Contains(addrs, a) {
			s := announce.Status{Claim: c, State: api.StateHolding}
			if n, ok := f.traffic[a]; ok {
				f.traffic[a] = n + 100
				s.Traffic = &announce.Traffic{Packets: n + 100, Bytes: 64 * (n + 100)}
			}
			st = append(st, s)
		}
	}
	return st
}

func (f *fakeEngine) Held() []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []netip.Addr
	for a := range f.held {
		out = append(out, a)
	}
	return out
}

func (f *fakeEngine) holds(a netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.held[a]
	return ok
}

// answered returns the spans in which a was answered.
func (f *fakeEngine) answered(a netip.Addr) []span {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.spans[a])
}

func (f *fakeEngine) Subscribe(int) (<-chan announce.Event, func()) {
	ch := make(chan announce.Event)
	return ch, func() {}
}

func (f *fakeEngine) SubscribeSince(n int, _ time.Time) (<-chan announce.Event, func()) {
	return f.Subscribe(n)
}

func (f *fakeEngine) Config() announce.EngineConfig { return announce.EngineConfig{} }

func (f *fakeEngine) Notify(ev announce.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
}

func (f *fakeEngine) sawEvent(kind announce.EventKind, substr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.events, func(ev announce.Event) bool {
		return ev.Kind == kind && (substr == "" || contains(ev.Message, substr))
	})
}

// seesEvent is sawEvent given up to 5 s of real time: a member tells of
// a transition after it acts on it (the engine's claim, the store's
// write), so a test that has seen the act must wait for the word.
func (f *fakeEngine) seesEvent(kind announce.EventKind, substr string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if f.sawEvent(kind, substr) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// eventsOf returns the messages of the events of kind.
func (f *fakeEngine) eventsOf(kind announce.EventKind) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ev := range f.events {
		if ev.Kind == kind {
			out = append(out, ev.Message)
		}
	}
	return out
}

// countTraffic makes the engine count traffic for a: each status reads
// 100 packets more than the one before.
func (f *fakeEngine) countTraffic(a netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.traffic == nil {
		f.traffic = map[netip.Addr]uint64{}
	}
	f.traffic[a] = 0
}

// holdReleases has eng's releases wait until the function it returns is
// called: an owner slow to let go of an address moving away.
func holdReleases(eng *fakeEngine) func() {
	wait := make(chan struct{})
	eng.mu.Lock()
	eng.releaseWait = wait
	eng.mu.Unlock()
	return func() { close(wait) }
}
