package labtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

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

// DialIn returns a dial function whose TCP connections are made from inside
// h's network namespace, for a client in the test process (which lives in
// the root namespace, where a lab address would be routed onto the host's
// real network) to reach a server in the lab. It fits grpc.WithContextDialer
// as it is, and http.Transport.DialContext with the network dropped. addr
// must be a literal IP and port: a name would be resolved outside the
// namespace.
func DialIn(h *lab.Host) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return nil, fmt.Errorf("dial %q from lab host %s: want a literal IP and port: %w", addr, h.Name, err)
		}
		var conn net.Conn
		// The socket is created on Do's thread, so it belongs to h's
		// namespace for the rest of its life, whichever thread uses it.
		err = Do(h, func() error {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", ap.String())
			conn = c
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("dial %s from lab host %s: %w", ap, h.Name, err)
		}
		return conn, nil
	}
}

// Macvlan adds a macvlan interface called name on h's parent (bridge
// mode), sets it up and returns its MAC. On a kernel without macvlan the
// test is skipped, under CI too: a kernel feature is not something CI can
// install.
func Macvlan(t TB, h *lab.Host, parent, name string) net.HardwareAddr {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := h.Run(ctx, "ip", "link", "add", name, "link", parent, "type", "macvlan", "mode", "bridge"); err != nil {
		if strings.Contains(out, "Unknown device type") {
			t.Skip("needs macvlan interfaces, which this kernel lacks")
		}
		t.Fatalf("add macvlan %s on %s of %s: %v", name, parent, h.Name, err)
	}
	if _, err := h.Run(ctx, "ip", "link", "set", name, "up"); err != nil {
		t.Fatalf("set %s of %s up: %v", name, h.Name, err)
	}
	var mac net.HardwareAddr
	if err := Do(h, func() error {
		ifi, err := net.InterfaceByName(name)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatalf("read %s's MAC on %s: %v", name, h.Name, err)
	}
	return mac
}
