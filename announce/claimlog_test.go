package announce

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// recordHandler keeps the records logged at or above its level.
type recordHandler struct {
	level slog.Level
	mu    sync.Mutex
	recs  []slog.Record
}

func (h *recordHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordHandler) claimLines() (n int, addresses int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Message != "claim" {
			continue
		}
		n++
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "addresses" {
				addresses = a.Value.Int64()
			}
			return true
		})
	}
	return n, addresses
}

// TestClaimLogLines: a small claim logs a line per address; a large one
// logs one line for all at the info level, and each address at debug.
func TestClaimLogLines(t *testing.T) {
	for _, tt := range []struct {
		n         int
		level     slog.Level
		wantLines int
		wantAddrs int64
	}{
		{3, slog.LevelInfo, 3, 0},
		{maxClaimLogLines + 4, slog.LevelInfo, 1, maxClaimLogLines + 4},
		{maxClaimLogLines + 4, slog.LevelDebug, maxClaimLogLines + 5, maxClaimLogLines + 4},
	} {
		h := &recordHandler{level: tt.level}
		e, ctx := runRealEngine(t, slog.New(h))
		var reqs []Request
		for i := range tt.n {
			reqs = append(reqs, Request{Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}), Interface: "eth0"})
		}
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := e.Claim(cctx, reqs, ClaimOptions{}); err != nil {
			t.Fatal(err)
		}
		ccancel()
		if lines, addrs := h.claimLines(); lines != tt.wantLines || addrs != tt.wantAddrs {
			t.Errorf("claim of %d logged at %v: %d claim lines (addresses=%d), want %d (addresses=%d)", tt.n, tt.level, lines, addrs, tt.wantLines, tt.wantAddrs)
		}
	}
}
