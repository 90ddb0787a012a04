package api_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/vipctl/vip"

// engineSide is what answers and captures on the host: the engine, the
// capture, the agent and fleet member that run them, netlink and the frame
// code, and the libraries under them. None of it belongs in a client.
var engineSide = []string{
	module + "/announce", module + "/sniff", module + "/internal/agent", module + "/internal/fleet",
	module + "/internal/wire", module + "/internal/hostnet",
	"github.com/vishvananda/netlink", "github.com/google/gopacket", "github.com/mdlayher/",
}

// tuiLinks are the packages of the project the live view may link beside
// its own, each for a reason: it is a client of the agent's API and of
// nothing else.
var tuiLinks = []string{
	module + "/internal/api", // the agent's contract, which the view renders
	// types alone: api.Event is event.Event, and the view tells the
	// kinds apart
	module + "/internal/event",
	// the API validates the addresses and interfaces of its requests with
	// it, so the CLI and the agent refuse bad input with one sentence
	module + "/internal/netcheck",
}

// TestArrows holds the arrows between the packages: the API is the contract
// between the agent and its clients, and the store's records are read by
// clients too (vip fleet), so neither links the engine's side; the live
// view links nothing of the project but the API and the leaves it needs.
func TestArrows(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to list the packages' dependencies")
	}
	tests := []struct {
		pkg string
		// bad reports why dep must not be linked, or "".
		bad func(dep string) string
	}{
		{module + "/internal/api", banned(engineSide)},
		{module + "/internal/store", banned(engineSide)},
		// gopacket/layers fills 6-8 MB of tables at the start of every
		// process that links it (sniff/pcap.go): tests only.
		{module + "/cmd/vip", func(dep string) string {
			if strings.HasPrefix(dep, "github.com/google/gopacket") {
				return "its start-up tables cost every vip process 6-8 MB and 3-4 ms: call libpcap directly (sniff/pcap.go)"
			}
			return ""
		}},
		{module + "/tui", func(dep string) string {
			if why := banned(engineSide)(dep); why != "" {
				return why
			}
			if dep == module || strings.HasPrefix(dep, module+"/") {
				if dep != module+"/tui" && !strings.HasPrefix(dep, module+"/tui/") && !slices.Contains(tuiLinks, dep) {
					return "the live view links only the API of the project (see tuiLinks)"
				}
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.pkg, module+"/"), func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tt.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			for _, dep := range strings.Fields(string(out)) {
				if why := tt.bad(dep); why != "" {
					t.Errorf("%s links %s: %s", tt.pkg, dep, why)
				}
			}
		})
	}
}

// banned reports the packages under any of prefixes.
func banned(prefixes []string) func(string) string {
	return func(dep string) string {
		for _, p := range prefixes {
			if strings.HasPrefix(dep, p) {
				return "a client of the agent links nothing of the engine's side"
			}
		}
		return ""
	}
}
