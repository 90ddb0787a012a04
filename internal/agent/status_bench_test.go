package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
)

// discardWriter is a ResponseWriter that keeps nothing of the body.
type discardWriter struct {
	h http.Header
	n int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }

// BenchmarkStatus measures the agent's answer to GET /v1/status with
// 10,000 claims in their window, on the real engine with in-memory ports:
// the engine's status, the conversion for clients and the JSON, compact
// (for any client) and indented (for vip status --json).
func BenchmarkStatus(b *testing.B) {
	eng := announce.NewEngine(announce.EngineConfig{
		Burst: announce.SchedulerConfig{Window: time.Hour, Interval: time.Hour, Rate: 1e9},
		Open: func(name string) (announce.Port, error) {
			return &fuzzPort{name: name, held: map[netip.Addr]bool{}}, nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	reqs := make([]announce.Request, 10000)
	base := netip.MustParseAddr("2001:db8:1::").As16()
	for i := range reqs {
		a := base
		a[14], a[15] = byte(i>>8), byte(i)
		reqs[i] = announce.Request{Addr: netip.AddrFrom16(a), Interface: "eth0"}
	}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	if _, err := eng.Claim(cctx, reqs, announce.ClaimOptions{ProbesOff: true}); err != nil {
		b.Fatal(err)
	}
	srv := NewServer(ServerConfig{Engine: eng, Sys: oneLinkSys{}, Allow: RootOnly})
	for _, path := range []string{"/v1/status", "/v1/status?indent=true"} {
		b.Run(path, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "http://vip"+path, nil)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				w.n = 0
				srv.status(w, r)
			}
			b.SetBytes(int64(w.n))
		})
	}
}
