package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/netcheck"
)

// fakeEngine records calls and holds claims in a map.
type fakeEngine struct {
	mu       sync.Mutex
	held     map[netip.Addr]announce.Status
	claims   int
	claimErr error
	// refuse are addresses the engine refuses while it claims the others.
	refuse map[netip.Addr]error
	subs   []chan announce.Event
	// since is what each subscription asked for, in order.
	since []time.Time
}

func newFakeEngine() *fakeEngine { return &fakeEngine{held: map[netip.Addr]announce.Status{}} }

func (f *fakeEngine) Claim(_ context.Context, reqs []announce.Request, opts announce.ClaimOptions) ([]announce.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	if f.claimErr != nil {
		return nil, f.claimErr
	}
	var out []announce.Status
	var refused []announce.Refusal
	for _, r := range reqs {
		if why, ok := f.refuse[r.Addr]; ok {
			refused = append(refused, announce.Refusal{Addr: r.Addr, Err: why})
			continue
		}
		// The engine fills in its defaults; this one has the real ones.
		st := announce.Status{Claim: announce.Claim{Addr: r.Addr, Interface: r.Interface, Options: opts}, MAC: "02:00:00:00:00:02", State: api.StateAnnouncing,
			Window: cmp.Or(opts.Window, announce.DefaultWindow), Interval: cmp.Or(opts.Interval, announce.DefaultInterval), Frames: cmp.Or(opts.Frames, announce.DefaultFrameKinds)}
		if opts.SingleRound {
			st.Window = 0
		}
		f.held[r.Addr] = st
		out = append(out, st)
	}
	if len(refused) > 0 {
		return out, &announce.RefusedError{Refused: refused}
	}
	return out, nil
}

func (f *fakeEngine) split(addrs []netip.Addr) (held, notHeld []netip.Addr) {
	for _, a := range addrs {
		if _, ok := f.held[a]; ok {
			held = append(held, a)
		} else {
			notHeld = append(notHeld, a)
		}
	}
	return held, notHeld
}

func (f *fakeEngine) Refresh(_ context.Context, addrs []netip.Addr) ([]netip.Addr, []netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, n := f.split(addrs)
	return h, n, nil
}

func (f *fakeEngine) Release(_ context.Context, addrs []netip.Addr) ([]netip.Addr, []netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, n := f.split(addrs)
	for _, a := range h {
		delete(f.held, a)
	}
	return h, n, nil
}

func (f *fakeEngine) Status(addrs ...netip.Addr) []announce.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []announce.Status
	for _, st := range f.held {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b announce.Status) int { return a.Addr.Compare(b.Addr) })
	return out
}

func (f *fakeEngine) Held() []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []netip.Addr
	for a := range f.held {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

func (f *fakeEngine) SubscribeSince(n int, since time.Time) (<-chan announce.Event, func()) {
	f.mu.Lock()
	f.since = append(f.since, since)
	f.mu.Unlock()
	return f.Subscribe(n)
}

func (f *fakeEngine) Subscribe(n int) (<-chan announce.Event, func()) {
	ch := make(chan announce.Event, n)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	f.mu.Unlock()
	return ch, func() {}
}

func (f *fakeEngine) publish(ev announce.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		ch <- ev
	}
}

func (f *fakeEngine) subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

func (f *fakeEngine) Config() announce.EngineConfig {
	return announce.EngineConfig{Burst: announce.SchedulerConfig{Window: announce.DefaultWindow, Interval: announce.DefaultInterval}, Frames: announce.DefaultFrameKinds}
}

func (f *fakeEngine) claimCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claims
}

// oneLinkSys is a host with eth0 on 192.0.2.0/24 and 2001:db8::/64.
type oneLinkSys struct{}

var eth0 = netcheck.Interface{Name: "eth0", Index: 2, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Up: true, Carrier: true,
	Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.2/24")}}

func (oneLinkSys) Interface(name string) (netcheck.Interface, error) {
	if name == "eth0" {
		return eth0, nil
	}
	return netcheck.Interface{}, fmt.Errorf("%s: %w", name, netcheck.ErrNoInterface)
}

func (oneLinkSys) InterfaceByIndex(i int) (netcheck.Interface, error) {
	if i == 2 {
		return eth0, nil
	}
	return netcheck.Interface{}, errors.New("no such index")
}

func (oneLinkSys) ConnectedRoutes() ([]netcheck.Route, error) {
	return []netcheck.Route{{Dst: netip.MustParsePrefix("192.0.2.0/24"), LinkIndex: 2}, {Dst: netip.MustParsePrefix("2001:db8::/64"), LinkIndex: 2}}, nil
}

// serve runs a Server for eng on a socket in a temporary directory.
func serve(t *testing.T, eng Engine, allow func(Peer) error) (*api.Client, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "vip.sock")
	ln, err := listen(sock, "")
	if err != nil {
		t.Fatal(err)
	}
	if allow == nil {
		allow = SelfAllow()
	}
	srv := NewServer(ServerConfig{Engine: eng, Sys: oneLinkSys{}, Allow: allow, Info: api.Agent{PID: 42, Socket: sock}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
	return api.NewClient(sock), sock
}

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func remoteCode(err error) (int, string) {
	var re *api.RemoteError
	if errors.As(err, &re) {
		return re.Status, re.Code
	}
	return 0, ""
}

func TestServerClaim(t *testing.T) {
	eng := newFakeEngine()
	c, _ := serve(t, eng, nil)
	w := api.Duration(2 * time.Second)
	resp, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10", "2001:db8::10"}, Window: &w, Frames: "arp-reply,na", Assign: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Claims) != 2 || resp.Claims[0].Interface != "eth0" || resp.Claims[0].Window != w || resp.Claims[0].Frames != "arp-reply,na" {
		t.Fatalf("got %+v, want both claims on eth0 (picked by route) with the asked window and frames", resp.Claims)
	}
	st, err := c.Status(ctx5(t))
	if err != nil || len(st.Claims) != 2 || st.Agent.PID != 42 {
		t.Errorf("status: got %+v, %v", st, err)
	}
}

func TestServerRefusesBadRequests(t *testing.T) {
	eng := newFakeEngine()
	c, sock := serve(t, eng, nil)
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantCode   string
		wantText   string
	}{
		{"multicast address", `{"addrs":["224.0.0.1"]}`, 400, api.CodeBadInput, "multicast"},
		{"no such interface", `{"addrs":["192.0.2.10"],"interface":"eth9"}`, 400, api.CodeBadInput, `eth9\" does not exist`},
		{"not JSON", `{"addrs":`, 400, api.CodeBadInput, "not valid JSON"},
		{"unknown field", `{"addrs":["192.0.2.10"],"steal":true}`, 400, api.CodeBadInput, "steal"},
		{"two values", `{"addrs":["192.0.2.10"]}{}`, 400, api.CodeBadInput, "more than one"},
		{"bad duration", `{"addrs":["192.0.2.10"],"interval":"soon"}`, 400, api.CodeBadInput, "not a duration"},
		{"interval too short", `{"addrs":["192.0.2.10"],"interval":"1ms"}`, 400, api.CodeBadInput, "too short"},
		{"oversized", `{"addrs":["` + strings.Repeat("1", api.MaxRequestBytes) + `"]}`, 413, api.CodeTooLarge, "over"},
	}
	hc := unixHTTP(sock)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := hc.Post("http://vip/v1/claims", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(b.String(), tt.wantCode) || !strings.Contains(b.String(), tt.wantText) {
				t.Errorf("got %d %s, want %d with code %s and %q", resp.StatusCode, b.String(), tt.wantStatus, tt.wantCode, tt.wantText)
			}
		})
	}
	if n := eng.claimCalls(); n != 0 {
		t.Errorf("got %d engine claims, want none: a refused request changes nothing", n)
	}
	// The agent still serves after all that.
	if _, err := c.Status(ctx5(t)); err != nil {
		t.Errorf("status after bad requests: %v", err)
	}
	resp, err := hc.Get("http://vip/v2/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown endpoint: got %d, want 404", resp.StatusCode)
	}
}

func TestServerEngineErrors(t *testing.T) {
	eng := newFakeEngine()
	c, _ := serve(t, eng, nil)
	eng.claimErr = fmt.Errorf("claim: %w", announce.ErrHeldElsewhere)
	_, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10"}})
	if s, code := remoteCode(err); s != 409 || code != api.CodeOtherInterface {
		t.Errorf("held elsewhere: got %d %s (%v), want 409 conflict", s, code, err)
	}
	eng.claimErr = errors.New("socket: operation not permitted")
	_, err = c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10"}})
	if s, code := remoteCode(err); s != 500 || code != api.CodeInternal || !strings.Contains(err.Error(), "not permitted") {
		t.Errorf("engine failure: got %d %s (%v), want 500 with the cause", s, code, err)
	}
}

// TestServerClaimRefusesSome: a claim of which some addresses are refused
// answers with the claimed ones and each refusal, its reason and code; one
// of which all are refused is an error.
func TestServerClaimRefusesSome(t *testing.T) {
	eng := newFakeEngine()
	c, _ := serve(t, eng, nil)
	eng.refuse = map[netip.Addr]error{
		netip.MustParseAddr("192.0.2.11"): fmt.Errorf("claim 192.0.2.11 on eth0: %w (eth1); release it first", announce.ErrHeldElsewhere),
	}
	resp, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10", "192.0.2.11"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Claims) != 1 || resp.Claims[0].Addr != "192.0.2.10" || len(resp.Refused) != 1 ||
		resp.Refused[0].Addr != "192.0.2.11" || resp.Refused[0].Code != api.CodeOtherInterface || !strings.Contains(resp.Refused[0].Error, "release it first") {
		t.Fatalf("got %+v, want 192.0.2.10 claimed and 192.0.2.11 refused as a conflict, with the reason", resp)
	}
	_, err = c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.11"}})
	if s, code := remoteCode(err); s != 409 || code != api.CodeOtherInterface {
		t.Errorf("all refused: got %d %s (%v), want 409 conflict", s, code, err)
	}
}

// TestServerGroupWithoutStore: without a store, a group is claimed whole
// or not at all, refreshed and released by its name, and an address of
// one group is refused to another.
func TestServerGroupWithoutStore(t *testing.T) {
	eng := newFakeEngine()
	c, _ := serve(t, eng, nil)
	eng.refuse = map[netip.Addr]error{
		netip.MustParseAddr("192.0.2.11"): fmt.Errorf("claim 192.0.2.11 on eth0: %w (eth1); release it first", announce.ErrHeldElsewhere),
	}
	_, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10", "192.0.2.11"}, Group: "web"})
	if err == nil || !strings.Contains(err.Error(), "group web not claimed, nothing changed") {
		t.Fatalf("a group with an address refused: %v, want the group not claimed", err)
	}
	if held := eng.Held(); len(held) != 0 {
		t.Fatalf("held %v after the group was refused, want nothing", held)
	}
	eng.refuse = nil
	resp, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10", "2001:db8::10"}, Group: "web"})
	if err != nil || len(resp.Claims) != 2 || resp.Claims[0].Group != "web" {
		t.Fatalf("claim of group web: %+v, %v", resp, err)
	}
	if _, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10"}, Group: "db"}); err == nil ||
		!strings.Contains(err.Error(), "192.0.2.10 is in group web, not db") {
		t.Errorf("claim of web's address into db: %v, want it refused naming web", err)
	}
	if _, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10"}}); err == nil ||
		!strings.Contains(err.Error(), "claim it with --group web") {
		t.Errorf("claim of web's address without a group: %v, want it refused", err)
	}
	rf, err := c.Refresh(ctx5(t), api.AddrsRequest{Group: "web"})
	if err != nil || !slices.Equal(rf.Refreshed, []string{"192.0.2.10", "2001:db8::10"}) {
		t.Errorf("refresh --group web: %+v, %v", rf, err)
	}
	if _, err := c.Release(ctx5(t), api.AddrsRequest{Group: "db"}); err == nil || !strings.Contains(err.Error(), "no address of group db") {
		t.Errorf("release of a group not held: %v, want it refused", err)
	}
	rl, err := c.Release(ctx5(t), api.AddrsRequest{Group: "web"})
	if err != nil || !slices.Equal(rl.Released, []string{"192.0.2.10", "2001:db8::10"}) {
		t.Errorf("release --group web: %+v, %v", rl, err)
	}
}

func TestServerRefreshRelease(t *testing.T) {
	eng := newFakeEngine()
	c, _ := serve(t, eng, nil)
	if _, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10", "192.0.2.11"}}); err != nil {
		t.Fatal(err)
	}
	rf, err := c.Refresh(ctx5(t), api.AddrsRequest{Addrs: []string{"192.0.2.10", "192.0.2.99"}})
	if err != nil || !slices.Equal(rf.Refreshed, []string{"192.0.2.10"}) || !slices.Equal(rf.NotHeld, []string{"192.0.2.99"}) {
		t.Errorf("refresh: got %+v, %v", rf, err)
	}
	if _, err := c.Release(ctx5(t), api.AddrsRequest{Addrs: []string{"192.0.2.10"}, All: true}); err == nil {
		t.Error("release with addresses and all: want a bad-input error")
	}
	rl, err := c.Release(ctx5(t), api.AddrsRequest{All: true})
	if err != nil || !slices.Equal(rl.Released, []string{"192.0.2.10", "192.0.2.11"}) || len(rl.NotHeld) != 0 {
		t.Errorf("release all: got %+v, %v", rl, err)
	}
	if _, err := c.Release(ctx5(t), api.AddrsRequest{Addrs: []string{"not-an-ip"}}); err == nil {
		t.Error("release of garbage: want a bad-input error")
	}
}

func TestServerRefusesPeers(t *testing.T) {
	eng := newFakeEngine()
	c, _ := serve(t, eng, func(p Peer) error { return fmt.Errorf("uid %d may not use the vip agent", p.UID) })
	_, err := c.Status(ctx5(t))
	if s, code := remoteCode(err); s != 403 || code != api.CodeForbidden || !strings.Contains(err.Error(), "may not use") {
		t.Errorf("got %d %s (%v), want 403 forbidden", s, code, err)
	}
}

func TestServerEvents(t *testing.T) {
	eng := newFakeEngine()
	c, _ := serve(t, eng, nil)
	s, err := c.Events(ctx5(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(5 * time.Second)
	for eng.subscribers() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream never subscribed")
		}
		time.Sleep(time.Millisecond)
	}
	eng.publish(announce.Event{Kind: announce.EventClaim, Addr: netip.MustParseAddr("192.0.2.10")})
	ev, err := s.Next()
	if err != nil || ev.Kind != announce.EventClaim || ev.Addr != netip.MustParseAddr("192.0.2.10") {
		t.Errorf("got %+v, %v; want the claim event", ev, err)
	}
}

// TestServerEventsSince: since=TIME reaches the engine as that time, and
// a since that is no time is refused in a sentence that gives the form.
func TestServerEventsSince(t *testing.T) {
	eng := newFakeEngine()
	c, sock := serve(t, eng, nil)
	since := time.Date(2026, 12, 3, 9, 30, 0, 123456789, time.UTC)
	s, err := c.EventsSince(ctx5(t), since)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	hc := unixHTTP(sock)
	resp, err := hc.Get("http://vip/v1/events?since=yesterday")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(b.String(), api.CodeBadInput) || !strings.Contains(b.String(), "RFC 3339") {
		t.Errorf("since=yesterday: got %d %s, want 400, bad input, naming RFC 3339", resp.StatusCode, b.String())
	}
	eng.mu.Lock()
	defer eng.mu.Unlock()
	if len(eng.since) != 1 || !eng.since[0].Equal(since) {
		t.Errorf("the engine was asked since %v, want once, since %v (the refused request asks nothing)", eng.since, since)
	}
}

// unixHTTP is an HTTP client of the agent's socket at sock, for requests
// the api client would not send.
func unixHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

func TestClientUnreachable(t *testing.T) {
	c := api.NewClient(filepath.Join(t.TempDir(), "none.sock"))
	if _, err := c.Status(ctx5(t)); !errors.Is(err, api.ErrUnreachable) {
		t.Errorf("got %v, want ErrUnreachable", err)
	}
}

func TestLockRefusesASecondAgent(t *testing.T) {
	p := PathsFor(filepath.Join(t.TempDir(), "vip.sock"))
	l, err := acquireLock(p.Lock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	if _, err := acquireLock(p.Lock); !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), "pid") {
		t.Errorf("got %v, want ErrRunning naming the pid", err)
	}
}

// TestServerWhoHasUnderBothNames: the who-has table is at /v1/whohas, and
// still at /v1/traffic, its name until this release, for scripts that ask
// there.
func TestServerWhoHasUnderBothNames(t *testing.T) {
	c, sock := serve(t, newFakeEngine(), nil)
	if got, err := c.WhoHas(ctx5(t)); err != nil || got.Entries == nil {
		t.Fatalf("WhoHas: %+v, %v; want an empty table", got, err)
	}
	hc := unixHTTP(sock)
	for _, path := range []string{"/v1/whohas", "/v1/traffic"} {
		req, err := http.NewRequestWithContext(ctx5(t), http.MethodGet, "http://vip"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got api.WhoHasResponse
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || got.Entries == nil {
			t.Errorf("GET %s: %s, %+v, %v; want 200 with the table", path, resp.Status, got, err)
		}
	}
}
