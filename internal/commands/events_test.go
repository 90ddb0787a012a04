package commands

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/test/labtest"
)

// endingAgent streams events, a stream per connection: the first ends
// after one event (the agent died), the later ones send one and stay open.
// sinces returns the since= each stream was asked with, in order, and the
// time of the first stream's event.
func endingAgent(t *testing.T) (sock string, sinces func() ([]string, time.Time)) {
	var (
		conns atomic.Int32
		mu    sync.Mutex
		asked []string
		first time.Time
	)
	sock = serveHandler(t, func(w http.ResponseWriter, r *http.Request) {
		n := conns.Add(1)
		now := time.Now()
		mu.Lock()
		asked = append(asked, r.URL.Query().Get("since"))
		if n == 1 {
			first = now
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		_ = json.NewEncoder(w).Encode(api.Event{Time: now, Kind: "claim", Message: "stream " + string(rune('0'+n))})
		w.(http.Flusher).Flush()
		if n == 1 {
			// A cut mid-stream, as a killed agent leaves it.
			panic(http.ErrAbortHandler)
		}
		<-r.Context().Done()
	})
	return sock, func() ([]string, time.Time) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked), first
	}
}

// TestEventsAgentGone: vip events exits 4 (the agent is unreachable) when
// its agent goes away, naming --retry, rather than 1 with "unexpected
// EOF"; with --retry it follows the agent again and says it was away.
func TestEventsAgentGone(t *testing.T) {
	sock, _ := endingAgent(t)
	code, out, errOut := runVip(t, "events", "--json", "--socket", sock)
	if code != ExitUnreachable || !strings.Contains(errOut, "vip events --retry follows it across restarts") || !strings.Contains(out, "stream 1") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 4 naming --retry, after the event", code, out, errOut)
	}

	sock, sinces := endingAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var outB, errB labtest.Buffer
	done := make(chan ExitCode, 1)
	go func() {
		done <- run(ctx, []string{"events", "--json", "--retry", "--socket", sock}, IO{In: strings.NewReader(""), Out: &outB, ErrOut: &errB}, fakeSys{})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(outB.String(), "stream 2") {
		if time.Now().After(deadline) {
			t.Fatalf("--retry did not follow the agent again: stdout %q, stderr %q", outB.String(), errB.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Errorf("--retry interrupted: exit %d, want 0", code)
	}
	if e := errB.String(); !strings.Contains(e, "waiting for it") || !strings.Contains(e, "following the agent again after") {
		t.Errorf("stderr %q: want the end and the return said", e)
	}
	// The stream after the return starts from the last event printed,
	// so that what the agent kept meanwhile is printed too.
	asked, first := sinces()
	if len(asked) < 2 || asked[0] != "" || asked[len(asked)-1] != first.Format(time.RFC3339Nano) {
		t.Errorf("streams asked since %q, want the first from now on and the last since the first stream's event, %s", asked, first.Format(time.RFC3339Nano))
	}
}

// TestEventsSince: --since asks the agent for the events it kept from that
// long ago.
func TestEventsSince(t *testing.T) {
	sock, sinces := endingAgent(t)
	before := time.Now()
	code, _, errOut := runVip(t, "events", "--since", "10m", "--socket", sock)
	asked, _ := sinces()
	if code != ExitUnreachable || len(asked) != 1 {
		t.Fatalf("exit %d, streams %q, stderr %q: want one stream, ended by the agent", code, asked, errOut)
	}
	got, err := time.Parse(time.RFC3339Nano, asked[0])
	if want := before.Add(-10 * time.Minute); err != nil || got.Before(want.Add(-time.Second)) || got.After(want.Add(time.Second)) {
		t.Errorf("since=%q, want about %s (10 minutes ago)", asked[0], want.Format(time.RFC3339Nano))
	}
}
