package announce

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestTrafficMeter: a rate spans at least TrafficInterval, readings
// closer together keep the previous one, and counters that start again
// start the rate again.
func TestTrafficMeter(t *testing.T) {
	type reading struct {
		after          time.Duration // since the previous reading
		packets, bytes uint64
		want           Traffic
	}
	tests := []struct {
		name     string
		readings []reading
	}{
		{"first reading has no rate", []reading{{0, 5, 500, Traffic{Packets: 5, Bytes: 500}}}},
		{"a second later", []reading{
			{0, 5, 500, Traffic{Packets: 5, Bytes: 500}},
			{time.Second, 15, 1500, Traffic{Packets: 15, Bytes: 1500, PacketsPerSecond: 10, BytesPerSecond: 1000}},
		}},
		{"too soon keeps the rate", []reading{
			{0, 0, 0, Traffic{}},
			{2 * time.Second, 40, 4000, Traffic{Packets: 40, Bytes: 4000, PacketsPerSecond: 20, BytesPerSecond: 2000}},
			{100 * time.Millisecond, 41, 4100, Traffic{Packets: 41, Bytes: 4100, PacketsPerSecond: 20, BytesPerSecond: 2000}},
			// A rate from the reading it kept, a second before.
			{900 * time.Millisecond, 51, 5100, Traffic{Packets: 51, Bytes: 5100, PacketsPerSecond: 11, BytesPerSecond: 1100}},
		}},
		{"counters started again", []reading{
			{0, 100, 9000, Traffic{Packets: 100, Bytes: 9000}},
			{time.Second, 3, 300, Traffic{Packets: 3, Bytes: 300}},
		}},
	}
	addr := netip.MustParseAddr("192.0.2.10")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
			m := newTrafficMeter(func() time.Time { return now })
			for i, r := range tt.readings {
				now = now.Add(r.after)
				if got := m.read(addr, r.packets, r.bytes); got != r.want {
					t.Errorf("reading %d: got %+v, want %+v", i, got, r.want)
				}
			}
		})
	}
}

// countingResponder is an in-kernel responder as the Link sees it: it
// answers elsewhere (it records what it is asked to hold, and counts 7
// answers for each), names its kind and hook, counts the traffic of the
// addresses it holds or counts, and says how its counts were read.
type countingResponder struct {
	mu                 sync.Mutex
	held, counted      map[netip.Addr]bool
	packets            map[netip.Addr]uint64
	closed             bool
	snapshots, lookups int
}

var _ KernelResponder = (*countingResponder)(nil)

func newCountingResponder() *countingResponder {
	return &countingResponder{held: map[netip.Addr]bool{}, counted: map[netip.Addr]bool{}, packets: map[netip.Addr]uint64{}}
}

func (r *countingResponder) Hold(addrs ...netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range addrs {
		r.held[a] = true
	}
	return nil
}

func (r *countingResponder) Count(addrs ...netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range addrs {
		r.counted[a] = true
	}
	return nil
}

func (r *countingResponder) LetGo(addrs ...netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range addrs {
		delete(r.held, a)
		delete(r.counted, a)
	}
	return nil
}

func (r *countingResponder) Answered(netip.Addr) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups++
	return 7
}

func (r *countingResponder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

func (r *countingResponder) Kind() string { return "ebpf" }
func (r *countingResponder) Hook() string { return "tcx" }

func (r *countingResponder) Traffic(a netip.Addr) (packets, bytes uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.packets[a], 100 * r.packets[a]
}

func (r *countingResponder) Snapshot(fn func(a netip.Addr, answered, packets, bytes uint64)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snapshots++
	for a := range r.held {
		fn(a, 7, r.packets[a], 100*r.packets[a])
	}
	for a := range r.counted {
		fn(a, 0, r.packets[a], 100*r.packets[a])
	}
	return nil
}

func (r *countingResponder) Askers(func(AskerCount)) error   { return nil }
func (r *countingResponder) SetDeadline(time.Duration) error { return nil }
func (r *countingResponder) Withheld() uint64                { return 0 }

func (r *countingResponder) arrive(a netip.Addr, n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.packets[a] += n
}

// TestLinkResponderKindAndTraffic: a Link says which responder answers,
// and reports traffic only when that responder counts it.
func TestLinkResponderKindAndTraffic(t *testing.T) {
	r := newLinkRig(t, vipA4)
	if kind, hook := r.link.Kind(), r.link.Hook(); kind != KindSocket || hook != "" {
		t.Errorf("socket Link: got responder %q hook %q, want socket and no hook", kind, hook)
	}
	if tr, ok := r.link.Traffic(vipA4); ok {
		t.Errorf("socket Link: got traffic %+v, want unknown", tr)
	}

	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	resp := newCountingResponder()
	l := NewLink(testInterface(), LinkConfig{ARP: newFakeConn(), IPv6: newFakeConn(), Responder: resp, Now: func() time.Time { return now }})
	defer closeLink(t, l)
	if err := l.Hold(vipA4); err != nil {
		t.Fatal(err)
	}
	if kind, hook := l.Kind(), l.Hook(); kind != "ebpf" || hook != "tcx" {
		t.Errorf("got responder %q hook %q, want ebpf on tcx", kind, hook)
	}
	resp.arrive(vipA4, 4)
	if tr, ok := l.Traffic(vipA4); !ok || tr != (Traffic{Packets: 4, Bytes: 400}) {
		t.Errorf("first reading: got %+v, %v; want 4 packets, 400 bytes, no rate yet", tr, ok)
	}
	resp.arrive(vipA4, 6)
	now = now.Add(2 * time.Second)
	if tr, _ := l.Traffic(vipA4); tr.PacketsPerSecond != 3 || tr.BytesPerSecond != 300 {
		t.Errorf("two seconds on: got %+v, want 3 packets/s and 300 bytes/s", tr)
	}
	// Dropped and held again: the rate starts again with the counters.
	if err := l.LetGo(vipA4); err != nil {
		t.Fatal(err)
	}
	if err := l.Hold(vipA4); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	if tr, _ := l.Traffic(vipA4); tr.PacketsPerSecond != 0 {
		t.Errorf("held again: got %+v, want no rate until a second reading", tr)
	}
}

// claimA4AndKernelB4 runs an engine whose ports answer through resp, with
// b4 the kernel's, and claims a4 and b4 on it.
func claimA4AndKernelB4(t *testing.T, resp KernelResponder) (*Engine, context.Context) {
	t.Helper()
	e := NewEngine(EngineConfig{
		Burst: SchedulerConfig{Clock: clockwork.NewFakeClockAt(t0)},
		Open: func(string) (Port, error) {
			return NewLink(testInterface(), LinkConfig{ARP: newFakeConn(), IPv6: newFakeConn(), Responder: resp}), nil
		},
		Kernel: func(string) map[netip.Addr]bool { return map[netip.Addr]bool{b4: true} },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(ccancel)
	if _, err := e.Claim(cctx, []Request{{a4, "test0"}, {b4, "test0"}}, ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	return e, cctx
}

// TestEngineStatusResponder: status names the responder of each claim:
// the port's for those it answers, the kernel for an address assigned to
// the interface.
func TestEngineStatusResponder(t *testing.T) {
	resp := newCountingResponder()
	e, _ := claimA4AndKernelB4(t, resp)
	resp.arrive(a4, 2)
	st := e.Status()
	if len(st) != 2 {
		t.Fatalf("got %d claims, want 2", len(st))
	}
	if s := st[0]; s.Responder != "ebpf" || s.Hook != "tcx" || s.Traffic == nil || s.Traffic.Packets != 2 {
		t.Errorf("%s: got responder %q hook %q traffic %+v; want ebpf on tcx with 2 packets", s.Addr, s.Responder, s.Hook, s.Traffic)
	}
	if s := st[1]; s.Responder != KindKernel || s.Hook != "" {
		t.Errorf("%s (assigned): got responder %q hook %q; want the kernel", s.Addr, s.Responder, s.Hook)
	}
	if !resp.held[a4] || resp.held[b4] {
		t.Errorf("the responder holds %v, want %s alone (the kernel answers for %s)", resp.held, a4, b4)
	}
}

// TestEngineCountsWhatTheKernelAnswers: the in-kernel responder counts an
// address without answering for it, so status shows the traffic of an
// address the kernel owns too, its responder still the kernel; released,
// the counting stops.
func TestEngineCountsWhatTheKernelAnswers(t *testing.T) {
	resp := newCountingResponder()
	e, cctx := claimA4AndKernelB4(t, resp)
	if !resp.counted[b4] || resp.held[b4] {
		t.Fatalf("the kernel's address: counted %v, held %v; want counted and not answered", resp.counted[b4], resp.held[b4])
	}
	resp.arrive(b4, 5)
	st := e.Status(b4)
	if len(st) != 1 || st[0].Responder != KindKernel || st[0].Traffic == nil || st[0].Traffic.Packets != 5 {
		t.Fatalf("status of the kernel's address: %+v, want the kernel answering and 5 packets counted", st)
	}
	if _, _, err := e.Release(cctx, []netip.Addr{b4}); err != nil {
		t.Fatal(err)
	}
	if resp.counted[b4] {
		t.Error("released, the kernel's address is still counted")
	}
}

// TestLinkSendsPastAPendingLinkDown: a socket nothing reads keeps the
// kernel's report of the link going down until the next send, which then
// fails once; the round is sent all the same, and fails only while the
// link stays down.
func TestLinkSendsPastAPendingLinkDown(t *testing.T) {
	arp := newFakeConn()
	l := NewLink(testInterface(), LinkConfig{ARP: arp, IPv6: newFakeConn(), Responder: newCountingResponder()})
	defer closeLink(t, l)
	arp.downWrites.Store(1)
	if n, err := l.Announce(vipA4, FrameARPRequest); n != 1 || err != nil || len(arp.sent()) != 1 {
		t.Errorf("after the link came back: got %d, %v; want the round sent", n, err)
	}
	arp.downWrites.Store(4)
	if n, err := l.Probe(vipA4); n != 0 || !errors.Is(err, syscall.ENETDOWN) {
		t.Errorf("while the link is down: got %d, %v; want ENETDOWN", n, err)
	}
}

// TestEngineStatusReadsASnapshot: a port read in one pass gives every
// claim's answers and traffic from that one read, not a lookup each.
func TestEngineStatusReadsASnapshot(t *testing.T) {
	resp := newCountingResponder()
	e, _ := claimA4AndKernelB4(t, resp)
	resp.arrive(a4, 3)
	resp.snapshots, resp.lookups = 0, 0
	st := e.Status()
	if resp.snapshots != 1 || resp.lookups != 0 {
		t.Errorf("status read %d snapshots and %d lookups, want one snapshot and none", resp.snapshots, resp.lookups)
	}
	if s := st[0]; s.Answered != 7 || s.Traffic == nil || s.Traffic.Packets != 3 || s.Responder != "ebpf" {
		t.Errorf("%s: got %+v, want 7 answered, 3 packets, ebpf", s.Addr, s)
	}
}
