package announce

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// syncingBook is a SyncBook whose Sync waits until its port sent a round:
// a disk whose flush is slow.
type syncingBook struct {
	*MemBook
	sent func() bool

	mu             sync.Mutex
	unsynced       []Claim
	syncs          int
	sentBeforeSync bool
}

func (b *syncingBook) PutUnsynced(ctx context.Context, claims ...Claim) error {
	b.mu.Lock()
	b.unsynced = append(b.unsynced, claims...)
	b.mu.Unlock()
	return b.MemBook.Put(ctx, claims...)
}

func (b *syncingBook) Sync(context.Context) error {
	deadline := time.Now().Add(5 * time.Second)
	for !b.sent() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.syncs++
	b.sentBeforeSync = b.sent()
	return nil
}

// TestEngineSendsBeforeTheBookSyncs: with a book that can record before it
// syncs (the state file), a new claim's first round goes out before the
// book's sync returns, not after it: the disk's flush is not on the way to
// the first frame. The claim is answered only once the sync is done.
func TestEngineSendsBeforeTheBookSyncs(t *testing.T) {
	var port *fakePort
	var portMu sync.Mutex
	sent := func() bool {
		portMu.Lock()
		defer portMu.Unlock()
		if port == nil {
			return false
		}
		port.mu.Lock()
		defer port.mu.Unlock()
		return slices.Contains(port.announced, a4)
	}
	book := &syncingBook{MemBook: NewMemBook(), sent: sent}
	e := NewEngine(EngineConfig{
		Burst: SchedulerConfig{Clock: clockwork.NewFakeClockAt(t0)},
		Book:  book,
		Open: func(name string) (Port, error) {
			portMu.Lock()
			defer portMu.Unlock()
			port = &fakePort{name: name, index: 2, held: map[netip.Addr]bool{}}
			return port, nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	if _, err := e.Claim(cctx, []Request{{a4, "eth0"}}, ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	book.mu.Lock()
	defer book.mu.Unlock()
	switch {
	case len(book.unsynced) != 1 || book.syncs != 1:
		t.Fatalf("the claim was recorded unsynced %d times and synced %d times, want once each", len(book.unsynced), book.syncs)
	case !book.sentBeforeSync:
		t.Error("the first round waited for the book's sync")
	}
}
