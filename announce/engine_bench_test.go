package announce

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"
)

// BenchmarkEngineStatus measures Status of every claim with 10,000 held on
// one interface, as `vip status` asks for them: the engine's share of the
// agent's work behind GET /v1/status. The claims are in their gratuitous
// window, as right after a claim.
func BenchmarkEngineStatus(b *testing.B) {
	e, ctx := runRealEngine(b, nil)
	keys := benchKeys(10000)
	reqs := make([]Request, len(keys))
	for i, k := range keys {
		reqs[i] = Request{Addr: k.Addr, Interface: "eth0"}
	}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	if _, err := e.Claim(cctx, reqs, ClaimOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if st := e.Status(); len(st) != len(keys) {
			b.Fatalf("got %d claims, want %d", len(st), len(keys))
		}
	}
}

// runRealEngine runs an engine on the real clock over fake ports (index 2),
// with one-hour windows and an unbounded rate, until the test ends; log may
// be nil. It returns the engine and the context it runs under.
func runRealEngine(tb testing.TB, log *slog.Logger) (*Engine, context.Context) {
	tb.Helper()
	e := NewEngine(EngineConfig{
		Burst: SchedulerConfig{Window: time.Hour, Interval: time.Hour, Rate: 1e9},
		Open: func(name string) (Port, error) {
			return &fakePort{name: name, index: 2, held: map[netip.Addr]bool{}}, nil
		},
		Log: log,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	return e, ctx
}
