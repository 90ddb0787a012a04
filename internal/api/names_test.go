package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/event"
)

// serveRaw serves each path's body as written, JSON an agent of another
// release would write, on a unix socket; it returns the client.
func serveRaw(t *testing.T, bodies map[string]string) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for path, body := range bodies {
		status := http.StatusOK
		if path == "POST /v1/release" {
			status = http.StatusConflict
		}
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		})
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return NewClient(sock)
}

// TestNextReleaseNamesRead: an agent of the next release writes the new
// names of the values this release renames (docs/api.md, "Names changed in
// this release"); this release's client reads them as its own, so that a
// fleet being upgraded reads the same. Without the aliases each reads as
// an unknown word.
func TestNextReleaseNamesRead(t *testing.T) {
	at := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	c := serveRaw(t, map[string]string{
		"GET /v1/fleet":    `{"claims":[{"addr":"192.0.2.10","node":"a","state":"holding","claimed_at":"2026-12-07T05:00:00Z"},{"addr":"192.0.2.11","node":"b","state":"unrenewed"}]}`,
		"GET /v1/history":  `{"changes":[{"kind":"failover","addr":"192.0.2.10","node":"a","fenced_at":"2026-12-07T05:00:00Z","summary":"x"}]}`,
		"GET /v1/events":   `{"kind":"suspend","addr":"192.0.2.10"}` + "\n" + `{"kind":"missed","count":3}` + "\n",
		"POST /v1/claims":  `{"claims":[],"refused":[{"addr":"192.0.2.10","error":"held by b","code":"held","held_by":"b","claimed_at":"2026-12-07T05:00:00Z"}]}`,
		"POST /v1/release": `{"error":"192.0.2.10 is held on eth1","code":"other-interface"}`,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	fl, err := c.Fleet(ctx)
	if err != nil || len(fl.Claims) != 2 || fl.Claims[0].State != FleetHolding || fl.Claims[1].State != FleetUnrenewed || !fl.Claims[0].ClaimedAt.Equal(at) {
		t.Errorf("the fleet of a next-release agent: %+v, %v; want states %q and %q, claimed at %v", fl.Claims, err, FleetHolding, FleetUnrenewed, at)
	}
	h, err := c.History(ctx, "192.0.2.10", "")
	if err != nil || len(h.Changes) != 1 || h.Changes[0].Kind != HistoryFailover || !h.Changes[0].FencedAt.Equal(at) {
		t.Errorf("the history of a next-release agent: %+v, %v; want kind %q", h.Changes, err, HistoryFailover)
	}
	evs, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	for _, want := range []event.Kind{event.Suspend, event.Missed} {
		ev, err := evs.Next()
		if err != nil || ev.Kind != want {
			t.Errorf("an event of a next-release agent: %+v, %v; want kind %q", ev, err, want)
		}
	}
	cl, err := c.Claim(ctx, ClaimRequest{Addrs: []string{"192.0.2.10"}})
	if err != nil || len(cl.Refused) != 1 || !cl.Refused[0].ClaimedAt.Equal(at) {
		t.Errorf("a refused claim of a next-release agent: %+v, %v", cl, err)
	}
	_, err = c.Release(ctx, AddrsRequest{Addrs: []string{"192.0.2.10"}})
	if remote := (*RemoteError)(nil); !errors.As(err, &remote) || remote.Code != CodeOtherInterface {
		t.Errorf("an error of a next-release agent: %v; want code %q", err, CodeOtherInterface)
	}
}

// TestOldKeysRead: an agent of the release before writes "since" alone; the
// client reads it as the new key, and this release's agent writes both
// (the old key until the next release).
func TestOldKeysRead(t *testing.T) {
	at := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	c := serveRaw(t, map[string]string{
		"GET /v1/fleet":   `{"claims":[{"addr":"192.0.2.10","node":"a","state":"held","since":"2026-12-07T05:00:00Z"}]}`,
		"GET /v1/history": `{"changes":[{"kind":"fence","node":"a","since":"2026-12-07T05:00:00Z","summary":"x"}]}`,
		"POST /v1/claims": `{"claims":[],"refused":[{"addr":"192.0.2.10","error":"held by b","code":"held","held_by":"b","since":"2026-12-07T05:00:00Z"}]}`,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fl, err := c.Fleet(ctx)
	if err != nil || len(fl.Claims) != 1 || !fl.Claims[0].ClaimedAt.Equal(at) || fl.Claims[0].State != FleetHolding {
		t.Errorf("the fleet of an older agent: %+v, %v", fl.Claims, err)
	}
	h, err := c.History(ctx, "", "")
	if err != nil || len(h.Changes) != 1 || !h.Changes[0].FencedAt.Equal(at) {
		t.Errorf("the history of an older agent: %+v, %v", h.Changes, err)
	}
	cl, err := c.Claim(ctx, ClaimRequest{Addrs: []string{"192.0.2.10"}})
	if err != nil || len(cl.Refused) != 1 || !cl.Refused[0].ClaimedAt.Equal(at) {
		t.Errorf("a refused claim of an older agent: %+v, %v", cl, err)
	}
	for _, v := range []any{
		FleetClaim{ClaimedAt: at, Since: at},
		Refused{ClaimedAt: at, Since: at},
		HistoryChange{FencedAt: at, Since: at},
	} {
		b, _ := json.Marshal(v)
		var keys map[string]any
		_ = json.Unmarshal(b, &keys)
		if keys["since"] == nil || keys["claimed_at"] == nil && keys["fenced_at"] == nil {
			t.Errorf("%T is written %s: want the new key and the old", v, b)
		}
	}
}
