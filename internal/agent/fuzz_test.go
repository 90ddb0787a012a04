package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
)

// fuzzEndpoints are the POST endpoints whose bodies the fuzzers send.
var fuzzEndpoints = []string{"/v1/claims", "/v1/refresh", "/v1/release"}

// countingEngine is a fakeEngine that also counts refreshes and releases,
// so that a fuzzer can tell that a refused request never reached it.
type countingEngine struct {
	*fakeEngine
	refreshes, releases int
}

func (c *countingEngine) Refresh(ctx context.Context, addrs []netip.Addr) ([]netip.Addr, []netip.Addr, error) {
	c.mu.Lock()
	c.refreshes++
	c.mu.Unlock()
	return c.fakeEngine.Refresh(ctx, addrs)
}

func (c *countingEngine) Release(ctx context.Context, addrs []netip.Addr) ([]netip.Addr, []netip.Addr, error) {
	c.mu.Lock()
	c.releases++
	c.mu.Unlock()
	return c.fakeEngine.Release(ctx, addrs)
}

// calls is everything a request could have changed in the engine.
type calls struct {
	claims, refreshes, releases int
	held                        []netip.Addr
}

func (c *countingEngine) calls() calls {
	held := c.Held()
	c.mu.Lock()
	defer c.mu.Unlock()
	return calls{c.claims, c.refreshes, c.releases, held}
}

// post sends body to path through h as a root peer and returns the answer.
func post(h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://vip"+path, bytes.NewReader(body))
	r = r.WithContext(context.WithValue(r.Context(), peerKey{}, Peer{PID: 1}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// checkAnswer checks what the fuzzers require of every answer: 200 or a
// 4xx, never a 5xx for input alone, and a 4xx is a JSON error with a code
// that matches its status.
func checkAnswer(t *testing.T, path string, body []byte, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code == http.StatusOK {
		return
	}
	if w.Code < 400 || w.Code > 499 {
		t.Fatalf("POST %s %q: got %d %s, want 200 or a 4xx for input alone", path, body, w.Code, w.Body)
	}
	var e api.Error
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" {
		t.Fatalf("POST %s %q: got %d with body %q, want a JSON error (%v)", path, body, w.Code, w.Body, err)
	}
	want := map[int]string{400: api.CodeBadInput, 409: api.CodeOtherInterface, 413: api.CodeTooLarge}[w.Code]
	if e.Code != want {
		t.Fatalf("POST %s %q: got %d with code %q, want %q", path, body, w.Code, e.Code, want)
	}
}

// FuzzServerRequest sends arbitrary bytes as the body of POST /v1/claims,
// /v1/refresh and /v1/release through the real Server handler over a fake
// engine that holds two addresses. The handler must not panic, must answer
// 200 or a 4xx (never a 5xx for input alone), and a 4xx must leave the
// engine untouched: no call reached it and it holds what it held.
//
// The seeds in testdata/fuzz/FuzzServerRequest are requests as the CLI
// sends them and the refusals of TestServerRefusesBadRequests.
func FuzzServerRequest(f *testing.F) {
	for _, s := range []struct {
		endpoint uint8
		body     string
	}{
		{0, `{"addrs":["192.0.2.10","2001:db8::10"],"interface":"eth0","window":"5s","interval":"1.1s","frames":"arp-request,arp-reply,na","refresh_every":"30s","assign":true,"on_conflict":"defend","probe_every":"10s"}`},
		{0, `{"addrs":["192.0.2.11"],"window":"0s","probe_every":"0s"}`},
		{1, `{"addrs":["192.0.2.10","192.0.2.99"]}`},
		{1, `{"all":true}`},
		{2, `{"addrs":["192.0.2.10","192.0.2.10"]}`},
		{2, `{"all":true,"addrs":["192.0.2.10"]}`},
	} {
		f.Add(s.endpoint, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte) {
		path := fuzzEndpoints[int(endpoint)%len(fuzzEndpoints)]
		eng := &countingEngine{fakeEngine: newFakeEngine()}
		if _, err := eng.Claim(context.Background(), []announce.Request{
			{Addr: netip.MustParseAddr("192.0.2.10"), Interface: "eth0"},
			{Addr: netip.MustParseAddr("2001:db8::10"), Interface: "eth0"},
		}, announce.ClaimOptions{}); err != nil {
			t.Fatal(err)
		}
		before := eng.calls()
		srv := NewServer(ServerConfig{Engine: eng, Sys: oneLinkSys{}, Allow: RootOnly})
		w := post(srv.Handler(), path, body)
		checkAnswer(t, path, body, w)
		if w.Code != http.StatusOK {
			if after := eng.calls(); !reflect.DeepEqual(after, before) {
				t.Fatalf("POST %s %q: refused with %d, yet the engine went from %+v to %+v", path, body, w.Code, before, after)
			}
		}
	})
}

// fuzzPort is a Port that answers nothing and remembers what it holds and
// whether it is closed, for FuzzServerEngine's invariants.
type fuzzPort struct {
	name string
	mu   sync.Mutex
	held map[netip.Addr]bool
	shut bool
}

func (p *fuzzPort) Hold(addrs ...netip.Addr) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		p.held[a] = true
	}
	return nil
}

func (p *fuzzPort) LetGo(addrs ...netip.Addr) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		delete(p.held, a)
	}
	return nil
}

func (p *fuzzPort) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shut = true
	return nil
}

func (p *fuzzPort) answers(a netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.shut && p.held[a]
}

func (p *fuzzPort) Answered(netip.Addr) uint64 { return 0 }
func (p *fuzzPort) Announce(a netip.Addr, f announce.FrameKinds) (int, error) {
	return f.PerRound(a.Is4()), nil
}
func (p *fuzzPort) Probe(netip.Addr) (int, error)  { return 1, nil }
func (p *fuzzPort) Name() string                   { return p.name }
func (p *fuzzPort) Index() int                     { return 2 }
func (p *fuzzPort) MAC() net.HardwareAddr          { return eth0.MAC }
func (p *fuzzPort) Kind() string                   { return "" }
func (p *fuzzPort) Hook() string                   { return "" }
func (p *fuzzPort) Guard(*announce.Deadline) error { return nil }
func (p *fuzzPort) Traffic(netip.Addr) (announce.Traffic, bool) {
	return announce.Traffic{}, false
}
func (p *fuzzPort) Count(...netip.Addr) error { return nil }
func (p *fuzzPort) CanSnapshot() bool         { return false }
func (p *fuzzPort) Snapshot() (map[netip.Addr]announce.Counts, bool) {
	return nil, false
}
func (p *fuzzPort) RecordsAskers() bool                    { return false }
func (p *fuzzPort) Askers(func(announce.AskerCount)) error { return nil }

// FuzzServerEngine is FuzzServerRequest over the real claim engine (with
// in-memory ports and book) holding three addresses. Besides the answer's
// status, it checks what status would report against what is real: after
// any request, every address the engine reports as held is held by an open
// port and recorded in the book, and a refused request changed neither.
func FuzzServerEngine(f *testing.F) {
	f.Add(uint8(0), []byte(`{"addrs":["192.0.2.12","2001:db8::12"],"window":"1s","interval":"100ms"}`))
	f.Add(uint8(0), []byte(`{"addrs":["192.0.2.10"],"interface":"eth0"}`))
	f.Add(uint8(1), []byte(`{"all":true}`))
	f.Add(uint8(2), []byte(`{"addrs":["192.0.2.10","192.0.2.10","192.0.2.10"]}`))
	f.Add(uint8(2), []byte(`{"addrs":["192.0.2.10","192.0.2.11","2001:db8::10"]}`))
	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte) {
		path := fuzzEndpoints[int(endpoint)%len(fuzzEndpoints)]
		var ports []*fuzzPort
		var mu sync.Mutex
		book := announce.NewMemBook()
		eng := announce.NewEngine(announce.EngineConfig{
			Burst: announce.SchedulerConfig{Window: time.Millisecond},
			Book:  book,
			Open: func(name string) (announce.Port, error) {
				mu.Lock()
				defer mu.Unlock()
				p := &fuzzPort{name: name, held: map[netip.Addr]bool{}}
				ports = append(ports, p)
				return p, nil
			},
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- eng.Run(ctx) }()
		defer func() {
			cancel()
			<-done
		}()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		held := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("2001:db8::10")}
		var reqs []announce.Request
		for _, a := range held {
			reqs = append(reqs, announce.Request{Addr: a, Interface: "eth0"})
		}
		if _, err := eng.Claim(cctx, reqs, announce.ClaimOptions{ProbesOff: true}); err != nil {
			t.Fatal(err)
		}
		before := eng.Held()

		srv := NewServer(ServerConfig{Engine: eng, Sys: oneLinkSys{}, Allow: RootOnly})
		w := post(srv.Handler(), path, body)
		checkAnswer(t, path, body, w)

		after := eng.Held()
		if w.Code != http.StatusOK && !slices.Equal(after, before) {
			t.Fatalf("POST %s %q: refused with %d, yet held went from %v to %v", path, body, w.Code, before, after)
		}
		recorded, _ := book.List(context.Background())
		var inBook []netip.Addr
		for _, c := range recorded {
			inBook = append(inBook, c.Addr)
		}
		if !slices.Equal(inBook, after) {
			t.Fatalf("POST %s %q: the engine holds %v but the book records %v", path, body, after, inBook)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, a := range after {
			answered := false
			for _, p := range ports {
				answered = answered || p.answers(a)
			}
			if !answered {
				t.Fatalf("POST %s %q: %s is held, but no open port answers for it", path, body, a)
			}
		}
	})
}
