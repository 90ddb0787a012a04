package announce

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallingBook is a MemBook whose writes wait, once stall is set, until
// they are let go: a state file on a slow disk, a store across a network.
type stallingBook struct {
	*MemBook
	stall   chan struct{} // closed to let the writes go
	entered chan struct{}
}

func (b *stallingBook) wait() {
	if b.stall == nil {
		return
	}
	b.entered <- struct{}{}
	<-b.stall
}

func (b *stallingBook) Put(ctx context.Context, claims ...Claim) error {
	b.wait()
	return b.MemBook.Put(ctx, claims...)
}

func (b *stallingBook) Delete(ctx context.Context, addrs ...netip.Addr) error {
	b.wait()
	return b.MemBook.Delete(ctx, addrs...)
}

// within fails the test unless fn returns within a second; before it
// fails, it lets the stalled I/O go (unstall), so that the engine can stop.
func within(t *testing.T, what string, unstall func(), fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		unstall()
		t.Fatalf("%s waited for a change's I/O", what)
	}
}

// TestStatusDoesNotWaitForIO: while a claim, a release or an interface
// change waits for the book or for a socket to open, status, the totals and
// the sender go on, and show the state from before the change.
func TestStatusDoesNotWaitForIO(t *testing.T) {
	h := newEngineHarness(t, nil)
	book := &stallingBook{MemBook: NewMemBook(), entered: make(chan struct{}, 1)}
	h.e.cfg.Book = book
	if _, err := h.claim(t, Request{a4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, unstall func(), want ...netip.Addr) {
		t.Helper()
		var n int
		var err error
		within(t, "Status", unstall, func() { n = len(h.e.Status()) })
		within(t, "Totals", unstall, func() { h.e.Totals() })
		within(t, "SendRound", unstall, func() { _, err = h.e.SendRound(context.Background(), Key{Ifindex: 2, Addr: a4}) })
		if n != len(want) || err != nil {
			t.Errorf("during the change: got %d claims in status and SendRound error %v, want %v and none", n, err, want)
		}
	}

	for _, tc := range []struct {
		name string
		op   func() error
		// during is what status shows while the op waits for the book.
		during []netip.Addr
	}{
		{"claim", func() error { _, err := h.claim(t, Request{b4, "eth0"}); return err }, []netip.Addr{a4}},
		{"refresh", func() error { _, _, err := h.e.Refresh(context.Background(), []netip.Addr{b4}); return err }, []netip.Addr{a4, b4}},
		{"release", func() error { _, _, err := h.e.Release(context.Background(), []netip.Addr{b4}); return err }, []netip.Addr{a4, b4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			book.stall = make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- tc.op() }()
			<-book.entered
			var once sync.Once
			unstall := func() { once.Do(func() { close(book.stall) }) }
			check(t, unstall, tc.during...)
			unstall()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			book.stall = nil
		})
	}

	// A socket that takes its time to open stalls only the claim that
	// opens it.
	opening, open := make(chan struct{}), make(chan struct{})
	openPort := h.e.cfg.Open
	h.e.cfg.Open = func(name string) (Port, error) {
		close(opening)
		<-open
		return openPort(name)
	}
	done := make(chan error, 1)
	go func() { _, err := h.claim(t, Request{a6, "eth1"}); done <- err }()
	<-opening
	var once sync.Once
	unstall := func() { once.Do(func() { close(open) }) }
	check(t, unstall, a4)
	unstall()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(h.e.Status()); n != 2 {
		t.Errorf("after the claim on eth1: got %d claims, want 2", n)
	}
}

// TestRevoke: a claim the book takes back stops being answered and
// announced at once, its added address goes, and an event says why; the
// book, stalled here, is not written.
func TestRevoke(t *testing.T) {
	h, fa := newAssignHarness(t)
	book := &stallingBook{MemBook: NewMemBook(), entered: make(chan struct{}, 1)}
	h.e.cfg.Book = book
	if _, err := h.claimWith(t, ClaimOptions{Assign: true}, Request{a4, "eth0"}, Request{a6, "eth0"}); err != nil {
		t.Fatal(err)
	}
	events, stop := h.e.Subscribe(16)
	book.stall = make(chan struct{}) // a write now would hang the test
	var revoked, notHeld []netip.Addr
	var err error
	within(t, "Revoke", func() { close(book.stall) }, func() {
		revoked, notHeld, err = h.e.Suspend([]netip.Addr{a6, b4}, "lease lost")
	})
	stop()
	book.stall = nil
	if err != nil || len(revoked) != 1 || revoked[0] != a6 || len(notHeld) != 1 || notHeld[0] != b4 {
		t.Fatalf("Revoke: got %v, not held %v, %v; want a6 revoked and b4 not held", revoked, notHeld, err)
	}
	p := h.ports["eth0"]
	if p.isHeld(a6) || len(h.e.Status(a6)) != 0 || !p.isHeld(a4) {
		t.Error("after Revoke: want a6 neither held by the port nor in status, a4 untouched")
	}
	if rm := fa.removedList(); len(rm) != 1 || rm[0] != a6 {
		t.Errorf("after Revoke: got removed %v, want a6, which vip had added", rm)
	}
	if recorded, _ := book.MemBook.List(context.Background()); len(recorded) != 2 {
		t.Errorf("after Revoke: the book has %d claims, want both still (the book took a6 back itself)", len(recorded))
	}
	var saw bool
	for ev := range events {
		if ev.Kind == EventSuspend && ev.Addr == a6 && strings.HasPrefix(ev.Message, "lease lost: ") {
			saw = true
		}
	}
	if !saw {
		t.Error("want a revoke event for a6 saying why")
	}
	// Nothing is sent for it any more.
	if n, _ := h.e.SendRound(context.Background(), Key{Ifindex: 2, Addr: a6}); n != 0 {
		t.Errorf("SendRound for a6 after Revoke: sent %d frames, want none", n)
	}
}
