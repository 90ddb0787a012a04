package store

import (
	"context"
	"log/slog"
	"sync"
)

// HistoryTrimEvery is how many records a ledger writes to one subject
// between two trims of it: a trim costs the store a count (and, when over,
// a read and a delete), so trimming after every write cost a busy fleet
// about as many ranges as writes. A subject so holds between HistoryKeep
// and HistoryKeep + HistoryTrimEvery records for each node writing it.
const HistoryTrimEvery = HistoryKeep / 4

// trimmer keeps the history within its bound (HistoryKeep records a
// subject, give or take HistoryTrimEvery a writer) behind the ledger's
// writes: a subject is trimmed after every HistoryTrimEvery records this
// ledger wrote to it, in the background, by one goroutine, so that a
// change never waits for the trim and a burst of changes of one subject
// trims it once.
type trimmer struct {
	c   *Client
	log *slog.Logger

	mu      sync.Mutex
	written map[string]int // records written to a subject since its last trim
	pending map[string]bool
	running bool
	closed  bool
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

func newTrimmer(c *Client, log *slog.Logger) *trimmer {
	ctx, cancel := context.WithCancel(context.Background())
	return &trimmer{c: c, log: log, written: map[string]int{}, pending: map[string]bool{}, ctx: ctx, cancel: cancel}
}

// add counts a record written to each of subjects, and has a subject
// trimmed once HistoryTrimEvery were.
func (t *trimmer) add(subjects ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	queued := false
	for _, s := range subjects {
		t.written[s]++
		if t.written[s] < HistoryTrimEvery {
			continue
		}
		delete(t.written, s)
		t.pending[s] = true
		queued = true
	}
	if !queued {
		return
	}
	if t.running {
		return
	}
	t.running = true
	t.wg.Add(1)
	go t.run()
}

func (t *trimmer) run() {
	defer t.wg.Done()
	for {
		t.mu.Lock()
		var subject string
		for s := range t.pending {
			subject = s
			break
		}
		if subject == "" || t.closed {
			t.running = false
			t.mu.Unlock()
			return
		}
		delete(t.pending, subject)
		t.mu.Unlock()
		if err := t.c.TrimHistory(t.ctx, subject); err != nil && t.ctx.Err() == nil {
			// The next write of the subject trims it again.
			t.log.Debug("trim the history", "subject", subject, "err", err)
		}
	}
}

// close stops trimming and waits for the trim under way.
func (t *trimmer) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}
