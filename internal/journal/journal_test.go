package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func textHandler(w io.Writer) slog.Handler {
	return slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})
}

func jsonHandler(w io.Writer) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})
}

// lines returns what one handler wrote, one record a line.
func lines(t *testing.T, buf *bytes.Buffer) []string {
	t.Helper()
	out := strings.Split(buf.String(), "\n")
	if out[len(out)-1] != "" {
		t.Fatalf("the output does not end in a newline: %q", buf.String())
	}
	return out[:len(out)-1]
}

func TestHandlerPriorities(t *testing.T) {
	t.Parallel()
	tests := []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelDebug, `<7>level=DEBUG msg=m`},
		{slog.LevelDebug + 2, `<7>level=DEBUG+2 msg=m`},
		{slog.LevelInfo, `<6>level=INFO msg=m`},
		{slog.LevelInfo + 2, `<6>level=INFO+2 msg=m`},
		{slog.LevelWarn, `<4>level=WARN msg=m`},
		{slog.LevelError, `<3>level=ERROR msg=m`},
		{slog.LevelError + 4, `<3>level=ERROR+4 msg=m`},
	}
	for _, tt := range tests {
		t.Run(tt.level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			slog.New(NewHandler(&buf, textHandler)).Log(context.Background(), tt.level, "m")
			if got := lines(t, &buf); len(got) != 1 || got[0] != tt.want {
				t.Errorf("got %q, want one line %q", got, tt.want)
			}
		})
	}
}

// TestHandlerKeepsTheRest: attributes, groups and the handlers derived
// with them all write the line slog's handler writes, less the time, and
// share one stream.
func TestHandlerKeepsTheRest(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(NewHandler(&buf, textHandler))
	agent := log.With("pid", 42).WithGroup("claim")
	log.Info("agent listening", "socket", "/run/vip/vip.sock")
	agent.Warn("competing claimer", "addr", "192.0.2.10", slog.Group("rival", "mac", "02:00:00:00:00:99"))
	log.Error("multi\nline", "err", "no such device\nreally")
	want := []string{
		`<6>level=INFO msg="agent listening" socket=/run/vip/vip.sock`,
		`<4>level=WARN msg="competing claimer" pid=42 claim.addr=192.0.2.10 claim.rival.mac=02:00:00:00:00:99`,
		`<3>level=ERROR msg="multi\nline" err="no such device\nreally"`,
	}
	got := lines(t, &buf)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestHandlerJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(NewHandler(&buf, jsonHandler)).With("pid", 42).WithGroup("claim")
	log.Debug("probe", "addr", "2001:db8::10")
	log.Warn("competing claimer", "addr", "192.0.2.10")
	got := lines(t, &buf)
	if len(got) != 2 {
		t.Fatalf("got %d lines, want 2: %q", len(got), got)
	}
	for i, w := range []struct{ prefix, level, addr string }{{"<7>", "DEBUG", "2001:db8::10"}, {"<4>", "WARN", "192.0.2.10"}} {
		rest, ok := strings.CutPrefix(got[i], w.prefix)
		if !ok {
			t.Errorf("line %d: got %q, want it to start with %s", i, got[i], w.prefix)
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(rest), &rec); err != nil {
			t.Errorf("line %d after the prefix is not JSON: %v: %q", i, err, rest)
			continue
		}
		if _, ok := rec[slog.TimeKey]; ok {
			t.Errorf("line %d has a time: %q", i, rest)
		}
		claim, _ := rec["claim"].(map[string]any)
		if rec["level"] != w.level || rec["pid"] != float64(42) || claim["addr"] != w.addr {
			t.Errorf("line %d: got %v, want level %s, pid 42, claim.addr %s", i, rec, w.level, w.addr)
		}
	}
}

// TestHandlerLevel: the wrapped handler's level decides what is written.
func TestHandlerLevel(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(NewHandler(&buf, func(w io.Writer) slog.Handler {
		return slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})
	}))
	log.Info("dropped")
	log.Warn("kept")
	if got, want := buf.String(), "<4>level=WARN msg=kept\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// writes records each Write call apart.
type writes struct {
	mu    sync.Mutex
	calls []string
}

func (w *writes) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, string(b))
	return len(b), nil
}

// TestHandlerOneWriteARecord: each record reaches the stream in one write,
// its own prefix first, even from handlers derived from one another and
// logging at once.
func TestHandlerOneWriteARecord(t *testing.T) {
	t.Parallel()
	w := &writes{}
	base := slog.New(NewHandler(w, textHandler))
	var wg sync.WaitGroup
	const n = 200
	for g, log := range []*slog.Logger{base, base.With("g", 1), base.WithGroup("x").With("g", 2)} {
		wg.Go(func() {
			for range n {
				if g%2 == 0 {
					log.Warn("w")
				} else {
					log.Info("i")
				}
			}
		})
	}
	wg.Wait()
	if len(w.calls) != 3*n {
		t.Fatalf("got %d writes, want %d", len(w.calls), 3*n)
	}
	for _, c := range w.calls {
		want := "<6>level=INFO msg=i"
		if strings.Contains(c, "WARN") {
			want = "<4>level=WARN msg=w"
		}
		if !strings.HasPrefix(c, want) || strings.Count(c, "\n") != 1 || !strings.HasSuffix(c, "\n") {
			t.Fatalf("a write is not one record after its own prefix %q: %q", want[:3], c)
		}
	}
}
