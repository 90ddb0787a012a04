package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// eventually polls cond every 10 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServerThousandConcurrentClients: 1,000 clients, each on its own
// connection, claim an address and refresh it, all at once. Every one is
// served, within a bound, and the engine ends up holding exactly the 1,000
// addresses.
func TestServerThousandConcurrentClients(t *testing.T) {
	t.Parallel()
	eng := newFakeEngine()
	_, sock := serve(t, eng, nil)
	const clients = 1000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := api.NewClient(sock) // a client, and so a connection, of its own
			addr := fmt.Sprintf("2001:db8::1:%x", i)
			resp, err := c.Claim(ctx, api.ClaimRequest{Addrs: []string{addr}})
			if err == nil && (len(resp.Claims) != 1 || resp.Claims[0].Addr != addr) {
				err = fmt.Errorf("claim %s: got %+v", addr, resp.Claims)
			}
			if err == nil {
				var rf api.RefreshResponse
				rf, err = c.Refresh(ctx, api.AddrsRequest{Addrs: []string{addr}})
				if err == nil && (len(rf.Refreshed) != 1 || rf.Refreshed[0] != addr) {
					err = fmt.Errorf("refresh %s: got %+v", addr, rf)
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if failed == 0 {
				t.Errorf("a client failed: %v", err)
			}
			failed++
		}
	}
	t.Logf("%d concurrent clients served in %v", clients, took)
	if failed > 0 {
		t.Fatalf("%d of %d clients failed, want every one served", failed, clients)
	}
	if n := len(eng.Held()); n != clients {
		t.Errorf("the engine holds %d addresses, want %d", n, clients)
	}
	if n := eng.claimCalls(); n != clients {
		t.Errorf("the engine got %d claims, want %d", n, clients)
	}
}

// TestServerOversizedRequestsChangeNothing: a well-formed request over the
// size limit, to every endpoint that changes something, is refused with 413
// before the engine hears of it, and the agent goes on serving.
func TestServerOversizedRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	eng := newFakeEngine()
	c, sock := serve(t, eng, nil)
	if _, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10", "192.0.2.11"}}); err != nil {
		t.Fatal(err)
	}
	held := eng.Held()
	// Real addresses, the held ones first, until the body is over the limit.
	var b strings.Builder
	b.WriteString(`{"addrs":["192.0.2.10","192.0.2.11"`)
	for i := 0; b.Len() <= api.MaxRequestBytes; i++ {
		fmt.Fprintf(&b, `,"2001:db8::%x:%x"`, i>>16, i&0xffff)
	}
	b.WriteString(`]}`)
	body := b.String()
	hc := unixHTTP(sock)
	for _, path := range []string{"/v1/claims", "/v1/refresh", "/v1/release"} {
		resp, err := hc.Post("http://vip"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), api.CodeTooLarge) {
			t.Errorf("POST %s with %d bytes: got %d %s, want 413 too_large", path, len(body), resp.StatusCode, msg)
		}
	}
	if got := eng.Held(); !slices.Equal(got, held) || eng.claimCalls() != 1 {
		t.Errorf("after oversized requests: holding %v after %d claims, want %v after the one claim", got, eng.claimCalls(), held)
	}
	if st, err := c.Status(ctx5(t)); err != nil || len(st.Claims) != 2 {
		t.Errorf("status after oversized requests: got %+v, %v", st.Claims, err)
	}
}

// TestServerCutsOffSlowClients: clients that send their headers a byte at a
// time and then stall are cut off by the server's header timeout, and while
// they hang on, an ordinary request is answered at once.
func TestServerCutsOffSlowClients(t *testing.T) {
	t.Parallel()
	eng := newFakeEngine()
	c, sock := serve(t, eng, nil)
	const slow = 50
	head := "POST /v1/claims HTTP/1.1\r\nHost: vip\r\nContent-Type: application/json\r\nX-Slow: "
	type cut struct {
		after time.Duration
		err   error
	}
	cuts := make(chan cut, slow)
	start := time.Now()
	for range slow {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		go func() {
			began := time.Now()
			// A byte every 20 ms for the header's start, then nothing.
			for i := range len(head) {
				if _, err := conn.Write([]byte{head[i]}); err != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			// The server ends the connection; a reader here sees it.
			conn.SetReadDeadline(time.Now().Add(15 * time.Second))
			_, err := io.ReadAll(conn)
			cuts <- cut{time.Since(began), err}
		}()
	}
	// Meanwhile, ordinary requests are served, one after another, each
	// finished while every slow client still holds its connection: a
	// server that waited behind them would answer only once they were cut
	// off. How fast each claim is depends on the machine, so what is
	// checked is the order of events, not a rate.
	const ordinary = 5
	var longest time.Duration
	for i := range ordinary {
		t0 := time.Now()
		if _, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{fmt.Sprintf("192.0.2.%d", 10+i)}}); err != nil {
			t.Fatalf("claim while %d clients stall: %v", slow, err)
		}
		longest = max(longest, time.Since(t0))
		if n := len(cuts); n > 0 {
			t.Fatalf("claim %d of %d was answered only after %d slow clients had been cut off (%v after they began), want it answered while they stall", i+1, ordinary, n, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond) // a steady trickle of requests
	}
	t.Logf("while %d clients stalled, the slowest of the ordinary claims took %v", slow, longest)
	var first, last time.Duration
	for i := range slow {
		select {
		case got := <-cuts:
			if i == 0 {
				first = got.after
			}
			last = max(last, got.after)
			// The header timeout is 5 s from the first byte.
			if got.err != nil || got.after < 4*time.Second || got.after > 9*time.Second {
				t.Errorf("slow client: cut off after %v (read error %v), want about 5 s, by the server closing the connection", got.after, got.err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a slow client was never cut off")
		}
	}
	t.Logf("the slow clients were cut off %v to %v after their first byte", first.Round(time.Millisecond), last.Round(time.Millisecond))
	if n := eng.claimCalls(); n != ordinary {
		t.Errorf("the engine got %d claims while the slow clients stalled, want the %d sent", n, ordinary)
	}
}

// TestSocketMadeAgainWhenDeleted: the socket file of a running agent is
// deleted; within a couple of checks the agent listens on the path again,
// as private as before, and serves clients there, with its claims intact.
func TestSocketMadeAgainWhenDeleted(t *testing.T) {
	t.Parallel()
	eng := newFakeEngine()
	sock := filepath.Join(t.TempDir(), "vip.sock")
	raw, err := listen(sock, "")
	if err != nil {
		t.Fatal(err)
	}
	ln := keepSocket(raw, sock, "", 50*time.Millisecond, slog.New(slog.DiscardHandler))
	srv := NewServer(ServerConfig{Engine: eng, Sys: oneLinkSys{}, Allow: SelfAllow()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	c := api.NewClient(sock)
	if _, err := c.Claim(ctx5(t), api.ClaimRequest{Addrs: []string{"192.0.2.10"}}); err != nil {
		t.Fatal(err)
	}
	// A connection made before the deletion goes on working after it. It
	// is served once first, so that the server has accepted it: one still
	// in the old listener's backlog when the socket is made again is reset.
	before, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	beforeR := bufio.NewReader(before)
	get := func(what string) {
		t.Helper()
		before.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := before.Write([]byte("GET /v1/status HTTP/1.1\r\nHost: vip\r\n\r\n")); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		resp, err := http.ReadResponse(beforeR, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: got %v, %v; want 200", what, resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get("a connection made before the deletions, at first")

	for round := range 2 {
		if err := os.Remove(sock); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, func() (bool, string) {
			// A new client each time: c would reuse its idle connection.
			st, err := api.NewClient(sock).Status(ctx5(t))
			return err == nil && len(st.Claims) == 1, fmt.Sprintf("after deletion %d: status %+v, %v", round+1, st.Claims, err)
		})
		fi, err := os.Stat(sock)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket after deletion %d: got mode %v, want a socket, mode 0600", round+1, fi.Mode())
		}
	}
	get("a connection made before the deletions, after them")

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after the agent stopped: got %v, want it removed", err)
	}
}

// TestSocketKeeperLeavesOtherFiles: a file that is not the agent's socket,
// put at its path, is never replaced.
func TestSocketKeeperLeavesOtherFiles(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "vip.sock")
	raw, err := listen(sock, "")
	if err != nil {
		t.Fatal(err)
	}
	ln := keepSocket(raw, sock, "", 10*time.Millisecond, slog.New(slog.DiscardHandler))
	defer ln.Close()
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sock, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Many checks pass; the file stays what it is.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(sock); err != nil || string(b) != "not a socket" {
			t.Fatalf("the file at the socket path: got %q, %v; want it left alone", b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
