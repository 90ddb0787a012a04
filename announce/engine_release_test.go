package announce

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// TestEngineReleaseSameAddressTwice: an address named twice in one release
// is released once. Releasing it twice used to drop its port's reference
// twice and close the port under another claim, which status still showed
// as announcing while nothing answered for it.
func TestEngineReleaseSameAddressTwice(t *testing.T) {
	h := newEngineHarness(t, nil)
	if _, err := h.claim(t, Request{a4, "eth0"}, Request{b4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	released, notHeld, err := h.e.Release(context.Background(), []netip.Addr{a4, a4})
	if err != nil || !slices.Equal(released, []netip.Addr{a4}) || len(notHeld) != 0 {
		t.Errorf("release a4 twice: got released %v, not held %v, %v; want a4 once", released, notHeld, err)
	}
	p := h.ports["eth0"]
	if p.isClosed() || !p.isHeld(b4) {
		t.Fatalf("after releasing a4 twice: eth0 closed %v, b4 held by the port %v; want eth0 open and still answering for b4", p.isClosed(), p.isHeld(b4))
	}
	st := h.e.Status()
	if len(st) != 1 || st[0].Addr != b4 || st[0].State == api.StateWaiting {
		t.Errorf("status: got %+v, want b4 alone, live", st)
	}
	// The port's count is still right: releasing b4 closes it.
	if _, _, err := h.e.Release(context.Background(), []netip.Addr{b4}); err != nil {
		t.Fatal(err)
	}
	if !p.isClosed() {
		t.Error("after releasing every claim on eth0: want the port closed")
	}
}

// failingBook is a MemBook that refuses every change while broken, and
// any change once its context is done, as the state file does when it
// cannot be written.
type failingBook struct {
	*MemBook
	broken bool
}

func (b *failingBook) Put(ctx context.Context, claims ...Claim) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	return b.MemBook.Put(ctx, claims...)
}

func (b *failingBook) Delete(ctx context.Context, addrs ...netip.Addr) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	return b.MemBook.Delete(ctx, addrs...)
}

func (b *failingBook) check(ctx context.Context) error {
	if b.broken {
		return errors.New("save state file: permission denied")
	}
	return ctx.Err()
}

// agree fails the test unless the book records exactly what the engine
// holds, and the port answers for exactly that.
func agree(t *testing.T, h *engineHarness, book Book, what string) {
	t.Helper()
	claims, _ := book.List(context.Background())
	var inBook []netip.Addr
	for _, c := range claims {
		inBook = append(inBook, c.Addr)
	}
	held := h.e.Held()
	if !slices.Equal(inBook, held) {
		t.Errorf("%s: the book records %v, the engine holds %v; want the same", what, inBook, held)
	}
	p := h.ports["eth0"]
	for _, a := range []netip.Addr{a4, b4, a6} {
		if want := slices.Contains(held, a); p.isHeld(a) != want || (want && p.isClosed()) {
			t.Errorf("%s: the port answers for %s: %v (closed %v), want %v", what, a, p.isHeld(a), p.isClosed(), want)
		}
	}
}

// TestEngineReleaseThatCannotBeRecorded: a release whose record cannot be
// written, because its client went away or the book cannot be written,
// releases nothing and says so. It used to release anyway and leave the
// claim in the book, where the next agent re-adopted it and where any later
// write of the book kept it.
func TestEngineReleaseThatCannotBeRecorded(t *testing.T) {
	book := &failingBook{MemBook: NewMemBook()}
	h := newEngineHarness(t, nil)
	h.e.cfg.Book = book
	if _, err := h.claim(t, Request{a4, "eth0"}, Request{a6, "eth0"}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	released, _, err := h.e.Release(ctx, []netip.Addr{a4})
	if err == nil || len(released) != 0 {
		t.Errorf("release with its context done: got released %v, %v; want nothing released and an error", released, err)
	}
	agree(t, h, book, "after a release whose client went away")

	book.broken = true
	released, _, err = h.e.Release(context.Background(), []netip.Addr{a4})
	if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "nothing was released") || len(released) != 0 {
		t.Errorf("release with the book broken: got released %v, %v; want nothing released and an error naming the cause", released, err)
	}
	agree(t, h, book, "after a release that could not be recorded")

	// Once the book can be written again, the release goes through, and
	// a later claim does not bring the released address back.
	book.broken = false
	if released, _, err := h.e.Release(context.Background(), []netip.Addr{a4}); err != nil || !slices.Equal(released, []netip.Addr{a4}) {
		t.Fatalf("release once the book works: got %v, %v", released, err)
	}
	if _, err := h.claim(t, Request{b4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	agree(t, h, book, "after the release and a new claim")

}

// TestEngineStopReleasesWhateverTheBookSays: the engine's stop releases
// every claim even when the book cannot be written, and says so.
func TestEngineStopReleasesWhateverTheBookSays(t *testing.T) {
	book := &failingBook{MemBook: NewMemBook()}
	port := &fakePort{name: "eth0", index: 2, held: map[netip.Addr]bool{}}
	e := NewEngine(EngineConfig{Book: book, Open: func(string) (Port, error) { return port, nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if _, err := e.Claim(cctx, []Request{{a4, "eth0"}, {a6, "eth0"}}, ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	book.broken = true
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("Run: got %v, want the book's failure reported", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not stop")
	}
	if port.isHeld(a4) || port.isHeld(a6) || !port.isClosed() || len(e.Held()) != 0 {
		t.Errorf("after stopping with the book broken: port holds a4 %v, a6 %v, closed %v, engine holds %v; want everything released",
			port.isHeld(a4), port.isHeld(a6), port.isClosed(), e.Held())
	}
}
