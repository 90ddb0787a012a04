package announce

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeBoot is a CLOCK_BOOTTIME a test moves by hand.
type fakeBoot struct{ ns atomic.Int64 }

func newFakeBoot() *fakeBoot {
	c := &fakeBoot{}
	c.ns.Store(int64(time.Hour))
	return c
}

func (c *fakeBoot) now() time.Duration      { return time.Duration(c.ns.Load()) }
func (c *fakeBoot) advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestDeadlineOpens: a new Deadline is closed; it opens until the time
// Set gives and closes at it, Close ends it at once, and a nil one (an
// unguarded agent) is always open. A watcher hears the deadline at once
// and each change in order, and what it withheld outlives its watch.
func TestDeadlineOpens(t *testing.T) {
	var unguarded *Deadline
	if !unguarded.Open() || unguarded.Withheld() != 0 {
		t.Fatal("a nil Deadline must be open and count nothing")
	}
	clock := newFakeBoot()
	d := NewDeadline(clock.now)
	if d.Open() {
		t.Fatal("a new Deadline is open: an agent would answer before its lease is granted")
	}
	if err := d.Set(clock.now() + time.Second); err != nil {
		t.Fatal(err)
	}
	if !d.Open() {
		t.Fatal("closed a second before the deadline")
	}
	clock.advance(time.Second - time.Nanosecond)
	if !d.Open() {
		t.Fatal("closed a nanosecond before the deadline")
	}
	clock.advance(time.Nanosecond)
	if d.Open() {
		t.Fatal("open at the deadline")
	}
	if err := d.Set(clock.now() + time.Second); err != nil || !d.Open() {
		t.Fatalf("a fresh deadline does not open it again (err %v)", err)
	}
	if err := d.Close(); err != nil || d.Open() {
		t.Fatalf("Close leaves it open (err %v)", err)
	}

	var heard []time.Duration
	var own atomic.Uint64
	stop, err := d.Watch(func(at time.Duration) error { heard = append(heard, at); return nil }, own.Load)
	if err != nil {
		t.Fatal(err)
	}
	at := clock.now() + 3*time.Second
	_ = d.Set(at)
	if len(heard) != 2 || heard[0] != closedAt || heard[1] != at {
		t.Fatalf("the watcher heard %v, want [%v %v]", heard, time.Duration(closedAt), at)
	}
	own.Store(5)
	d.withhold(2)
	if got := d.Withheld(); got != 7 {
		t.Fatalf("withheld: got %d, want 7 (2 by the links, 5 by the watcher)", got)
	}
	stop()
	own.Store(100) // no longer read
	_ = d.Set(at + time.Second)
	if len(heard) != 2 {
		t.Errorf("a stopped watcher heard %v", heard[2:])
	}
	if got := d.Withheld(); got != 7 {
		t.Errorf("withheld after the watch stopped: got %d, want 7", got)
	}

	failing := errors.New("map write refused")
	if _, err := d.Watch(func(time.Duration) error { return failing }, nil); !errors.Is(err, failing) {
		t.Errorf("Watch with a failing first write: got %v, want it", err)
	}
	if err := d.Set(at); err != nil {
		t.Errorf("a watcher whose first write failed is still watched: %v", err)
	}
}

// TestLinkWithholdsPastDeadline: a guarded Link answers, announces and
// probes only before its deadline; past it a request is read and dropped,
// a round and a probe are not sent, and each frame counts as withheld; a
// renewal's fresh deadline lets them out again.
func TestLinkWithholdsPastDeadline(t *testing.T) {
	clock := newFakeBoot()
	d := NewDeadline(clock.now)
	_ = d.Set(clock.now() + time.Second)
	r := newLinkRig(t)
	if err := r.link.Guard(d); err != nil {
		t.Fatal(err)
	}
	if err := r.link.Hold(vipA4, vipA6); err != nil {
		t.Fatal(err)
	}
	r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	if got := r.arp.sent(); len(got) != 1 {
		t.Fatalf("before the deadline: %d answers, want 1", len(got))
	}

	clock.advance(time.Second)
	for range 3 {
		r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	}
	if got := r.arp.sent(); len(got) != 0 {
		t.Fatalf("past the deadline: %d answers, want none", len(got))
	}
	if n, err := r.link.Announce(vipA4, DefaultFrameKinds); n != 0 || !errors.Is(err, errPastDeadline) {
		t.Errorf("a round past the deadline: sent %d, err %v; want 0 and withheld", n, err)
	}
	if n, err := r.link.Announce(vipA6, DefaultFrameKinds); n != 0 || !errors.Is(err, errPastDeadline) {
		t.Errorf("an IPv6 round past the deadline: sent %d, err %v; want 0 and withheld", n, err)
	}
	if n, err := r.link.Probe(vipA4); n != 0 || !errors.Is(err, errPastDeadline) {
		t.Errorf("a probe past the deadline: sent %d, err %v; want 0 and withheld", n, err)
	}
	if got := append(r.arp.sent(), r.ip6.sent()...); len(got) != 0 {
		t.Fatalf("past the deadline, %d frames left", len(got))
	}
	// 3 answers, 2 ARP frames and at least one NA, 1 probe.
	if got := d.Withheld(); got < 7 {
		t.Errorf("withheld: got %d, want at least 7", got)
	}
	if got := r.link.Answered(vipA4); got != 1 {
		t.Errorf("answered: got %d, want 1", got)
	}

	_ = d.Set(clock.now() + time.Second)
	r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	if got := r.arp.sent(); len(got) != 1 {
		t.Fatalf("after a fresh deadline: %d answers, want 1", len(got))
	}
	if n, err := r.link.Announce(vipA4, DefaultFrameKinds); n == 0 || err != nil {
		t.Errorf("a round after a fresh deadline: sent %d, err %v", n, err)
	}
}

// TestPollReaderDropsBacklogPastDeadline: the requests queued in a socket
// while the process did not run (a frozen agent's backlog) are read once
// it wakes past its deadline and dropped, every one, not answered in a
// batch.
func TestPollReaderDropsBacklogPastDeadline(t *testing.T) {
	clock := newFakeBoot()
	d := NewDeadline(clock.now)
	_ = d.Set(clock.now() + time.Second)
	arpReq, _ := benchRequests(t)
	arpPeer, arpEnd := benchSocketPair(t)
	ip6Peer, ip6End := benchSocketPair(t)
	_ = ip6Peer
	l := NewLink(benchInterface(), LinkConfig{ARP: arpEnd, IPv6: ip6End, Groups: (&fakeGroups{joiner: &fakeJoiner{}}).open})
	t.Cleanup(func() { closeLink(t, l) })
	if l.sock.wake < 0 {
		t.Skip("the Link has no eventfd: no batch reader to test")
	}
	if err := l.Guard(d); err != nil {
		t.Fatal(err)
	}
	if err := l.Hold(benchVIP4); err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * time.Second)
	const backlog = 40 // more than one batch
	for range backlog {
		if _, err := unix.Write(arpPeer, arpReq); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(waitTimeout)
	for d.Withheld() < backlog {
		if time.Now().After(deadline) {
			t.Fatalf("withheld %d of the %d requests read past the deadline", d.Withheld(), backlog)
		}
		time.Sleep(time.Millisecond)
	}
	reply := make([]byte, 1500)
	if n, _, err := unix.Recvfrom(arpPeer, reply, unix.MSG_DONTWAIT); err == nil || n > 0 {
		t.Fatalf("an answer (%d bytes) left past the deadline", n)
	}
	if got := l.Answered(benchVIP4); got != 0 {
		t.Errorf("answered: got %d, want 0", got)
	}
}
