package announce

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/internal/api"
)

// fakePort is a Port that records what the engine asks of it.
type fakePort struct {
	name    string
	index   int
	holdErr error

	mu        sync.Mutex
	held      map[netip.Addr]bool
	announced []netip.Addr
	probed    []netip.Addr
	closed    bool
}

func (p *fakePort) Probe(a netip.Addr) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probed = append(p.probed, a)
	return 1, nil
}

func (p *fakePort) probes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.probed)
}

func (p *fakePort) Hold(addrs ...netip.Addr) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holdErr != nil {
		return p.holdErr
	}
	for _, a := range addrs {
		p.held[a] = true
	}
	return nil
}

func (p *fakePort) LetGo(addrs ...netip.Addr) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		delete(p.held, a)
	}
	return nil
}

// Answered counts 7 answers for an address while it is held and, like a
// Link, forgets them once it is dropped.
func (p *fakePort) Answered(a netip.Addr) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[a] {
		return 7
	}
	return 0
}

func (p *fakePort) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}

func (p *fakePort) Announce(a netip.Addr, f FrameKinds) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.announced = append(p.announced, a)
	return f.PerRound(a.Is4()), nil
}

func (p *fakePort) Name() string          { return p.name }
func (p *fakePort) Index() int            { return p.index }
func (p *fakePort) MAC() net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, byte(p.index)} }

// The rest of the Port contract: a fakePort names no responder and counts
// nothing.
func (p *fakePort) Kind() string                            { return "" }
func (p *fakePort) Hook() string                            { return "" }
func (p *fakePort) Guard(*Deadline) error                   { return nil }
func (p *fakePort) Traffic(netip.Addr) (Traffic, bool)      { return Traffic{}, false }
func (p *fakePort) Count(...netip.Addr) error               { return nil }
func (p *fakePort) CanSnapshot() bool                       { return false }
func (p *fakePort) Snapshot() (map[netip.Addr]Counts, bool) { return nil, false }
func (p *fakePort) RecordsAskers() bool                     { return false }
func (p *fakePort) Askers(func(AskerCount)) error           { return nil }

func (p *fakePort) isHeld(a netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[a]
}

func (p *fakePort) rounds() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.announced)
}

func (p *fakePort) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

type engineHarness struct {
	e     *Engine
	fc    *clockwork.FakeClock
	book  *MemBook
	ports map[string]*fakePort
	opens []string
	stop  func()
}

func newEngineHarness(t *testing.T, openErr map[string]error) *engineHarness {
	t.Helper()
	h := &engineHarness{fc: clockwork.NewFakeClockAt(t0), book: NewMemBook(), ports: map[string]*fakePort{}}
	var mu sync.Mutex
	index := map[string]int{"eth0": 2, "eth1": 3}
	h.e = NewEngine(EngineConfig{
		Burst: SchedulerConfig{Clock: h.fc},
		Book:  h.book,
		Open: func(name string) (Port, error) {
			mu.Lock()
			defer mu.Unlock()
			h.opens = append(h.opens, name)
			if err := openErr[name]; err != nil {
				return nil, err
			}
			p := &fakePort{name: name, index: index[name], held: map[netip.Addr]bool{}}
			h.ports[name] = p
			return p, nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.e.Run(ctx) }()
	h.stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("engine Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("engine did not stop")
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			h.stop()
		}
	})
	return h
}

func (h *engineHarness) claim(t *testing.T, reqs ...Request) ([]Status, error) {
	t.Helper()
	return h.claimWith(t, ClaimOptions{}, reqs...)
}

func (h *engineHarness) claimWith(t *testing.T, opts ClaimOptions, reqs ...Request) ([]Status, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return h.e.Claim(ctx, reqs, opts)
}

var (
	a4 = netip.MustParseAddr("192.0.2.10")
	b4 = netip.MustParseAddr("192.0.2.11")
	a6 = netip.MustParseAddr("2001:db8::10")
)

func TestEngineClaimIsLiveAndRecorded(t *testing.T) {
	h := newEngineHarness(t, nil)
	st, err := h.claim(t, Request{a4, "eth0"}, Request{a6, "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0].Addr != a4 || st[1].Addr != a6 {
		t.Fatalf("got status %+v, want a4 and a6", st)
	}
	for _, s := range st {
		if s.State != api.StateAnnouncing || s.Interface != "eth0" || s.MAC != "02:00:00:00:00:02" || s.GratuitousFrames == 0 {
			t.Errorf("got %+v, want announcing on eth0 with our MAC and the first round counted", s)
		}
	}
	p := h.ports["eth0"]
	if !p.isHeld(a4) || !p.isHeld(a6) {
		t.Error("want both addresses held by the port")
	}
	if got := slices.Compact(h.opens); len(got) != 1 {
		t.Errorf("got opens %v, want eth0 opened once for both addresses", h.opens)
	}
	claims, _ := h.book.List(context.Background())
	if len(claims) != 2 || !claims[0].ClaimedAt.Equal(t0) {
		t.Errorf("got book %+v, want both claims recorded at %v", claims, t0)
	}
	// Run's end releases everything and closes the port.
	h.stop()
	if p.isHeld(a4) || p.isHeld(a6) || !p.isClosed() {
		t.Error("after Run ends: want nothing held and the port closed")
	}
	if claims, _ := h.book.List(context.Background()); len(claims) != 0 {
		t.Errorf("after Run ends: got book %+v, want empty", claims)
	}
}

// refusedAddrs returns the addresses a claim's error refused, and fails
// the test unless the error is a *RefusedError.
func refusedAddrs(t *testing.T, err error) []netip.Addr {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a *RefusedError", err)
	}
	var out []netip.Addr
	for _, r := range re.Refused {
		out = append(out, r.Addr)
	}
	return out
}

// TestEngineClaimRefusesPerAddress: an address that cannot be claimed is
// refused alone, with what was done for it undone; the others are claimed.
// Errors of the whole request claim nothing.
func TestEngineClaimRefusesPerAddress(t *testing.T) {
	t.Run("an interface fails to open", func(t *testing.T) {
		h := newEngineHarness(t, map[string]error{"eth1": errors.New("boom")})
		st, err := h.claim(t, Request{a4, "eth0"}, Request{b4, "eth1"}, Request{a6, "eth1"})
		if got := refusedAddrs(t, err); !slices.Equal(got, []netip.Addr{b4, a6}) {
			t.Errorf("refused %v, want b4 and a6, both on eth1", got)
		}
		if len(st) != 1 || st[0].Addr != a4 || !h.ports["eth0"].isHeld(a4) {
			t.Errorf("got status %+v, want a4 claimed on eth0 all the same", st)
		}
		if n := slices.Index(h.opens, "eth1"); n < 0 || slices.Index(h.opens[n+1:], "eth1") >= 0 {
			t.Errorf("opens %v: want eth1 tried once for both its addresses", h.opens)
		}
	})
	t.Run("a hold fails", func(t *testing.T) {
		h := newEngineHarness(t, nil)
		if _, err := h.claim(t, Request{a4, "eth0"}); err != nil {
			t.Fatal(err)
		}
		h.ports["eth0"].holdErr = errors.New("no group")
		if got := refusedAddrs(t, func() error { _, err := h.claim(t, Request{b4, "eth0"}, Request{a6, "eth0"}); return err }()); len(got) != 2 {
			t.Errorf("refused %v, want both", got)
		}
		st := h.e.Status()
		if len(st) != 1 || st[0].Addr != a4 {
			t.Errorf("got status %+v, want only the earlier claim of a4", st)
		}
		if claims, _ := h.book.List(context.Background()); len(claims) != 1 {
			t.Errorf("got book %+v, want only a4", claims)
		}
	})
	t.Run("an address held on another interface", func(t *testing.T) {
		h := newEngineHarness(t, nil)
		if _, err := h.claim(t, Request{a4, "eth0"}); err != nil {
			t.Fatal(err)
		}
		st, err := h.claim(t, Request{b4, "eth1"}, Request{a4, "eth1"})
		if !errors.Is(err, ErrHeldElsewhere) {
			t.Fatalf("got %v, want ErrHeldElsewhere among the refusals", err)
		}
		if got := refusedAddrs(t, err); !slices.Equal(got, []netip.Addr{a4}) {
			t.Errorf("refused %v, want a4 alone", got)
		}
		if len(st) != 1 || st[0].Addr != b4 || len(h.e.Status()) != 2 {
			t.Errorf("got %+v, want b4 claimed on eth1 beside a4 on eth0", st)
		}
	})
	t.Run("the same address twice", func(t *testing.T) {
		h := newEngineHarness(t, nil)
		st, err := h.claim(t, Request{a4, "eth0"}, Request{a4, "eth0"})
		var re *RefusedError
		if err == nil || errors.As(err, &re) || len(st) != 0 || len(h.e.Status()) != 0 {
			t.Fatalf("got %v, %v; want the whole request refused", st, err)
		}
	})
}

func TestEngineReclaimIsRefresh(t *testing.T) {
	h := newEngineHarness(t, nil)
	if _, err := h.claim(t, Request{a4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	// Let the window run out: the sender parks on its next round's timer,
	// the clock jumps a minute, the late round goes and the window closes.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.fc.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	h.fc.Advance(time.Minute)
	k := Key{Ifindex: 2, Addr: a4}
	for h.e.sched.State(k).Active {
		if ctx.Err() != nil {
			t.Fatal("the window never closed")
		}
		time.Sleep(time.Millisecond)
	}
	before := h.ports["eth0"].rounds()
	st, err := h.claim(t, Request{a4, "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	if got := st[0]; !got.ClaimedAt.Equal(t0) || !got.RefreshedAt.Equal(t0.Add(time.Minute)) || got.State != api.StateAnnouncing {
		t.Errorf("got %+v, want claimed at t0, refreshed a minute later, announcing again", got)
	}
	if n := h.ports["eth0"].rounds(); n != before+1 {
		t.Errorf("got %d rounds, want %d: a re-claim after the window sends a round at once", n, before+1)
	}
}

func TestEngineRefreshAndRelease(t *testing.T) {
	h := newEngineHarness(t, nil)
	if _, err := h.claim(t, Request{a4, "eth0"}, Request{a6, "eth1"}); err != nil {
		t.Fatal(err)
	}
	_, notHeld, err := h.e.Refresh(context.Background(), []netip.Addr{a4, b4})
	if err != nil || len(notHeld) != 1 || notHeld[0] != b4 {
		t.Errorf("refresh: got not held %v, err %v; want [b4]", notHeld, err)
	}
	released, notHeld, err := h.e.Release(context.Background(), []netip.Addr{a6, b4})
	if err != nil || !slices.Equal(released, []netip.Addr{a6}) || !slices.Equal(notHeld, []netip.Addr{b4}) {
		t.Errorf("release: got released %v, not held %v, err %v", released, notHeld, err)
	}
	if p := h.ports["eth1"]; p.isHeld(a6) || !p.isClosed() {
		t.Error("eth1: want a6 dropped and the port closed (no claim left on it)")
	}
	if p := h.ports["eth0"]; !p.isHeld(a4) || p.isClosed() {
		t.Error("eth0: want a4 still held")
	}
	st := h.e.Status()
	if len(st) != 1 || st[0].Addr != a4 || st[0].Answered != 7 {
		t.Errorf("got status %+v, want a4 alone with its answer count", st)
	}
}

func TestEnginePeriodicRefresh(t *testing.T) {
	h := newEngineHarness(t, nil)
	if _, err := h.claimWith(t, ClaimOptions{RefreshEvery: 10 * time.Second}, Request{a4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	h.fc.Advance(10 * time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := h.e.Status()
		if len(st) == 1 && st[0].RefreshedAt.Equal(t0.Add(10*time.Second)) && st[0].State == api.StateAnnouncing &&
			st[0].WindowEnd.Equal(t0.Add(15*time.Second)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("got status %+v, want refreshed at 10 s with a window to 15 s", st)
		}
		time.Sleep(time.Millisecond)
	}
	// A periodic refresh is not written to the book: with thousands of
	// claims it would rewrite the state file once per claim and period.
	claims, _ := h.book.List(context.Background())
	if !claims[0].RefreshedAt.Equal(t0) {
		t.Errorf("got book %+v, want the claim's own RefreshedAt, untouched by the periodic refresh", claims)
	}
}

// TestEngineInterruptedClaimIsUndone: a claim whose caller gives up before
// its first round went out takes no effect (all or nothing).
func TestEngineInterruptedClaimIsUndone(t *testing.T) {
	book := NewMemBook()
	ports := map[string]*fakePort{}
	e := NewEngine(EngineConfig{
		Burst: SchedulerConfig{Clock: clockwork.NewFakeClockAt(t0)},
		Book:  book,
		Open: func(name string) (Port, error) {
			p := &fakePort{name: name, index: 2, held: map[netip.Addr]bool{}}
			ports[name] = p
			return p, nil
		},
	}) // Run is not running: no round can go out
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.Claim(ctx, []Request{{a4, "eth0"}}, ClaimOptions{}); err == nil || !strings.Contains(err.Error(), "nothing new is held") {
		t.Fatalf("got %v, want an interrupted claim", err)
	}
	if st := e.Status(); len(st) != 0 {
		t.Errorf("got status %+v, want nothing held", st)
	}
	if claims, _ := book.List(context.Background()); len(claims) != 0 {
		t.Errorf("got book %+v, want empty", claims)
	}
	if p := ports["eth0"]; p.isHeld(a4) || !p.isClosed() {
		t.Error("want the address dropped and the port closed")
	}
}
