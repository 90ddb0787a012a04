package commands

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vip/internal/api"
)

// serveHandler answers on a socket in a temporary directory with h.
func serveHandler(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "vip.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// indentingAgent answers status as the agent does: indented when asked.
func indentingAgent(t *testing.T, st api.StatusResponse) string {
	return serveHandler(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(statusJSON(t, st, r.URL.Query().Get("indent") == "true"))
	})
}

// statusJSON is st as encoding/json writes it, indented or not.
func statusJSON(t *testing.T, st api.StatusResponse, indent bool) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(st); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestStatusJSON runs vip status --json against an agent that sends the
// indented status, which vip prints as it is, and against one from before
// that form, whose compact status vip decodes and encodes: the output is
// the documented shape either way.
func TestStatusJSON(t *testing.T) {
	agents := []struct {
		name string
		sock string
	}{
		{"agent that indents", indentingAgent(t, statusFixture)},
		{"agent from before ?indent", serveStatus(t, statusFixture)},
	}
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			code, out, errOut := runVip(t, "status", "--json", "--socket", a.sock)
			if code != ExitOK || errOut != "" {
				t.Fatalf("got exit %d, stderr %q", code, errOut)
			}
			golden(t, "status.json.golden", []byte(out))
			// --check reads the claims, so it takes the decoding way, to
			// the same output; the fixture's conflict makes it exit 3.
			code, out, errOut = runVip(t, "status", "--json", "--check", "--socket", a.sock)
			if code != ExitConflict || !strings.Contains(errOut, "2001:db8::10") {
				t.Errorf("--check: got exit %d, stderr %q; want %d naming the conflicted address", code, errOut, ExitConflict)
			}
			golden(t, "status.json.golden", []byte(out))
		})
	}
}

// TestStatusJSONFailures checks that vip status --json fails, and says
// why, when the agent's answer fails: having printed nothing, or, for an
// answer cut short, what came of it.
func TestStatusJSONFailures(t *testing.T) {
	full := statusJSON(t, statusFixture, true)
	tests := []struct {
		name     string
		h        http.HandlerFunc
		wantCode ExitCode
		wantOut  string
		wantErr  string
	}{
		{"an error answer", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(api.Error{Error: "the engine broke", Code: api.CodeInternal})
		}, ExitFailure, "", "the engine broke"},
		{"a cut answer", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "100000")
			w.Write(full[:len(full)/2])
		}, ExitFailure, string(full[:len(full)/2]), "read the agent's answer"},
		{"an old agent's broken answer", func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"agent":`))
		}, ExitFailure, "", "read the agent's answer"},
		{"an empty answer", func(w http.ResponseWriter, _ *http.Request) {}, ExitFailure, "", "read the agent's answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runVip(t, "status", "--json", "--socket", serveHandler(t, tt.h))
			if code != tt.wantCode || out != tt.wantOut || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("got exit %d, stdout %q, stderr %q; want exit %d, stdout %q, and %q", code, out, errOut, tt.wantCode, tt.wantOut, tt.wantErr)
			}
		})
	}
	if code, _, errOut := runVip(t, "status", "--json", "--socket", filepath.Join(t.TempDir(), "none.sock")); code != ExitUnreachable {
		t.Errorf("no agent: got exit %d (%s), want %d", code, errOut, ExitUnreachable)
	}
}
