package api

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestWhoHasFallsBackToTheOldName: an agent of the release before serves
// the who-has table at /v1/traffic only; the client asks it there when
// /v1/whohas is not found, so a newer vip watch still shows it.
func TestWhoHasFallsBackToTheOldName(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "old.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		asked []string
	)
	ask := func(path string) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, path)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/traffic", func(w http.ResponseWriter, r *http.Request) {
		ask(r.URL.Path)
		_ = json.NewEncoder(w).Encode(WhoHasResponse{Entries: []WhoHas{{Addr: "192.0.2.10", Requests: 3}}})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		ask(r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(Error{Error: "no endpoint", Code: CodeNotFound})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := NewClient(sock).WhoHas(ctx)
	if err != nil || len(got.Entries) != 1 || got.Entries[0].Requests != 3 {
		t.Fatalf("WhoHas from an agent with /v1/traffic only: %+v, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0] != "/v1/whohas" || asked[1] != "/v1/traffic" {
		t.Errorf("asked %v, want /v1/whohas, then /v1/traffic", asked)
	}
}
