package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientsLinkNoEngine: the API is the contract between the agent and
// its clients, so the clients (this package, the live view) link none of
// the engine, the capture, netlink or the frame code.
func TestClientsLinkNoEngine(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to list the packages' dependencies")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/vipctl/vip/internal/api", "github.com/vipctl/vip/tui").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{
			"github.com/vipctl/vip/announce", "github.com/vipctl/vip/sniff", "github.com/vipctl/vip/internal/agent",
			"github.com/vipctl/vip/internal/wire", "github.com/vipctl/vip/internal/hostnet",
			"github.com/vishvananda/netlink", "github.com/google/gopacket", "github.com/mdlayher/",
		} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("a client links %s", dep)
			}
		}
	}
}
