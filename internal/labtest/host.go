package labtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/vipctl/vip/internal/lab"
)

// Link returns h's link called name, e.g. "eth1", or nil if it has none.
func Link(h *lab.Host, name string) *lab.Link {
	for i := range h.Links {
		if h.Links[i].Name == name {
			return &h.Links[i]
		}
	}
	return nil
}

// Do runs fn inside h's network namespace, as lab.InNetns does: sockets fn
// opens stay there. A dial that net/http makes on a goroutine of its own
// would not: dial on fn's goroutine.
func Do(h *lab.Host, fn func() error) error {
	return lab.InNetns(filepath.Join("/run/netns", h.Netns), fn)
}

// fdbEntry is one entry in the output of `bridge -j fdb show`.
type fdbEntry struct {
	MAC    string   `json:"mac"`
	IfName string   `json:"ifname"`
	Flags  []string `json:"flags"`
	State  string   `json:"state"`
}

// learned reports whether the bridge learned the entry from traffic, as
// opposed to an address of its own, a port's own address or a static entry.
func (e fdbEntry) learned(bridge string) bool {
	return e.IfName != bridge && !slices.Contains(e.Flags, "self") && e.State != "permanent" && e.State != "static"
}

// FDB returns the MAC addresses l's bridge has learned, each mapped to the
// name of the port it was learned on. Permanent entries (the bridge's and
// its ports' own addresses, multicast groups) are left out.
func FDB(ctx context.Context, l *lab.Lab) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, "bridge", "-n", l.Switch, "-j", "fdb", "show", "br", l.Bridge).Output()
	if err != nil {
		return nil, fmt.Errorf("lab %s fdb: %w", l.Prefix, err)
	}
	var entries []fdbEntry
	if err := json.Unmarshal(out, &entries); err != nil {
		return nil, fmt.Errorf("lab %s fdb: %w", l.Prefix, err)
	}
	fdb := make(map[string]string)
	for _, e := range entries {
		if !e.learned(l.Bridge) {
			continue
		}
		mac, err := net.ParseMAC(e.MAC)
		if err != nil {
			return nil, fmt.Errorf("lab %s fdb: %w", l.Prefix, err)
		}
		fdb[mac.String()] = e.IfName
	}
	return fdb, nil
}
