package cmd

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/labtest"
)

// endingAgent streams events, a stream per connection: the first ends
// after one event (the agent died), the later ones send one and stay open.
func endingAgent(t *testing.T) string {
	var conns atomic.Int32
	return serveHandler(t, func(w http.ResponseWriter, r *http.Request) {
		n := conns.Add(1)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_ = json.NewEncoder(w).Encode(api.Event{Time: time.Now(), Kind: "claim", Message: "stream " + string(rune('0'+n))})
		w.(http.Flusher).Flush()
		if n == 1 {
			// A cut mid-stream, as a killed agent leaves it.
			panic(http.ErrAbortHandler)
		}
		<-r.Context().Done()
	})
}

// TestEventsAgentGone: vip events exits 4 (the agent is unreachable) when
// its agent goes away, naming --retry, rather than 1 with "unexpected
// EOF"; with --retry it follows the agent again and says it was away.
func TestEventsAgentGone(t *testing.T) {
	sock := endingAgent(t)
	code, out, errOut := runVip(t, "events", "--json", "--socket", sock)
	if code != ExitUnreachable || !strings.Contains(errOut, "vip events --retry follows it across restarts") || !strings.Contains(out, "stream 1") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 4 naming --retry, after the event", code, out, errOut)
	}

	sock = endingAgent(t)
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
}
