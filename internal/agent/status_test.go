package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
)

// statusEngine is a fakeEngine whose claims vary in every way the status
// shows.
func statusEngine() *fakeEngine {
	eng := newFakeEngine()
	at := time.Now().Add(-time.Minute).Round(0)
	for _, st := range []announce.Status{
		{Claim: announce.Claim{Addr: netip.MustParseAddr("192.0.2.10"), Interface: "eth0", ClaimedAt: at, RefreshedAt: at},
			MAC: "02:00:00:00:00:02", State: api.StateAnnouncing, WindowEnd: time.Now().Add(time.Hour), Answered: 7, GratuitousFrames: 3},
		{Claim: announce.Claim{Addr: netip.MustParseAddr("2001:db8::10"), Interface: "eth0", ClaimedAt: at, RefreshedAt: at.Add(time.Second), AddedAddress: true,
			Options: announce.ClaimOptions{Frames: announce.FrameNA, RefreshEvery: time.Minute, OnConflict: announce.PolicyYield}},
			MAC: "02:00:00:00:00:02", State: api.StateConflict, Claimers: []announce.Claimer{{MAC: net.HardwareAddr{2, 0, 0, 0, 0xee, 1}, Kind: "reply", FirstSeen: at, LastSeen: at, Count: 2}}},
		{Claim: announce.Claim{Addr: netip.MustParseAddr("fe80::1%eth0"), Interface: "eth0", ClaimedAt: at, RefreshedAt: at}, State: api.StateWaiting},
	} {
		eng.held[st.Addr] = st
	}
	return eng
}

// TestServerStatus checks GET /v1/status, compact and indented, against
// encoding/json's writing of the same status (less the window remaining,
// which moves with the clock).
func TestServerStatus(t *testing.T) {
	eng := statusEngine()
	c, sock := serve(t, eng, nil)
	hc := unixHTTP(sock)
	get := func(t *testing.T, query string) (*http.Response, []byte) {
		t.Helper()
		resp, err := hc.Get("http://vip/v1/status" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		if _, err := b.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		return resp, b.Bytes()
	}
	tests := []struct {
		query  string
		indent bool
	}{{"", false}, {"?indent=false", false}, {"?indent=true", true}, {"?indent=1", true}}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			resp, body := get(t, tt.query)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("got %s, %v, want 200 with a JSON body", resp.Status, resp.Header)
			}
			var st api.StatusResponse
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatal(err)
			}
			if len(st.Claims) != 3 || st.Claims[0].WindowRemaining <= 0 {
				t.Fatalf("got claims %+v, want 3, the first in its window", st.Claims)
			}
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			if tt.indent {
				enc.SetIndent("", "  ")
			}
			if err := enc.Encode(st); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(body, want.Bytes()) {
				t.Errorf("got:\n%s\nwant (encoding/json of what it says):\n%s", body, want.Bytes())
			}
			// And what it says is the engine's status, converted.
			now := time.Now()
			conv := ClaimsFromStatus(eng.Status(), now)
			for i := range conv {
				conv[i].WindowRemaining, st.Claims[i].WindowRemaining = 0, 0
			}
			if got, want := mustJSON(t, st.Claims), mustJSON(t, conv); got != want {
				t.Errorf("claims: got %s, want %s", got, want)
			}
		})
	}
	t.Run("bad indent", func(t *testing.T) {
		resp, body := get(t, "?indent=maybe")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), api.CodeBadInput) || !strings.Contains(string(body), "maybe") {
			t.Errorf("got %s %s, want 400 bad_input naming the value", resp.Status, body)
		}
	})
	t.Run("client", func(t *testing.T) {
		r, indented, err := c.StatusJSON(ctx5(t))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		body, err := io.ReadAll(r)
		if err != nil || !indented || !bytes.HasPrefix(body, []byte("{\n  \"agent\": {\n")) || !json.Valid(body) {
			t.Errorf("got %q, indented %v, %v; want the indented status whole", body, indented, err)
		}
	})
	t.Run("no claims", func(t *testing.T) {
		eng.mu.Lock()
		clear(eng.held)
		eng.mu.Unlock()
		_, body := get(t, "?indent=true")
		if !bytes.HasSuffix(body, []byte("\n  \"claims\": []\n}\n")) {
			t.Errorf("got %s, want an empty list of claims", body)
		}
	})
}

// TestServerStatusFails checks that a status encoding/json cannot write is
// an error answer while none of it has gone out, and a cut connection
// after: never an answer that ends well but short.
func TestServerStatusFails(t *testing.T) {
	bad := announce.Status{Claim: announce.Claim{Addr: netip.MustParseAddr("2001:db8::ffff"), ClaimedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	tests := []struct {
		name   string
		others int // claims before the bad one, in their order
		cut    bool
	}{
		{"at once", 0, false},
		{"once the answer went out", 2000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := newFakeEngine()
			for i := range tt.others {
				a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
				eng.held[a] = announce.Status{Claim: announce.Claim{Addr: a, Interface: "eth0"}, State: api.StateHolding}
			}
			eng.held[bad.Addr] = bad
			_, sock := serve(t, eng, nil)
			hc := unixHTTP(sock)
			resp, err := hc.Get("http://vip/v1/status?indent=true")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if tt.cut {
				if resp.StatusCode != http.StatusOK || err == nil {
					t.Errorf("got %s and a body that ends well (%d bytes); want it cut, to fail reading", resp.Status, len(body))
				}
				return
			}
			if resp.StatusCode != http.StatusInternalServerError || err != nil || !strings.Contains(string(body), api.CodeInternal) {
				t.Errorf("got %s %s (%v), want 500 internal", resp.Status, body, err)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGrowSendBuffer checks that a large answer gets room for all of it
// in the socket: as root beyond the system's limit, else up to it.
func TestGrowSendBuffer(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[1])
	f := os.NewFile(uintptr(fds[0]), "socketpair")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sndbuf := func() int {
		raw, err := c.(*net.UnixConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		raw.Control(func(fd uintptr) { n, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) })
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := sndbuf()
	ctx := context.WithValue(context.Background(), connKey{}, c)
	growSendBuffer(ctx, 100<<10)
	if got := sndbuf(); got != before {
		t.Errorf("a 100 KB answer: send buffer went from %d to %d, want it left alone", before, got)
	}
	const n = 6 << 20
	want := n
	if os.Geteuid() != 0 {
		b, err := os.ReadFile("/proc/sys/net/core/wmem_max")
		if err != nil {
			t.Skipf("not root, and the system's limit is unknown: %v", err)
		}
		limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		want = min(n, limit)
	}
	growSendBuffer(ctx, n)
	if got := sndbuf(); got < want {
		t.Errorf("a 6 MB answer: got a send buffer of %d, want at least %d", got, want)
	}
}
