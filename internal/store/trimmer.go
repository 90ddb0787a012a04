package store

import (
	"context"
	"log/slog"
	"sync"
)

// trimmer keeps the history within its bound (HistoryKeep records a
// subject) behind the ledger's writes: each subject written to is trimmed
// once, in the background, by one goroutine, so that a change never waits
// for the trim and a burst of changes of one subject trims it once.
type trimmer struct {
	c   *Client
	log *slog.Logger

	mu      sync.Mutex
	pending map[string]bool
	running bool
	closed  bool
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

func newTrimmer(c *Client, log *slog.Logger) *trimmer {
	ctx, cancel := context.WithCancel(context.Background())
	return &trimmer{c: c, log: log, pending: map[string]bool{}, ctx: ctx, cancel: cancel}
}

// add asks for subject to be trimmed.
func (t *trimmer) add(subject string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.pending[subject] = true
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
