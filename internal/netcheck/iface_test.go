package netcheck_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/vipctl/vip/internal/netcheck"
)

var mac = net.HardwareAddr{0x00, 0x00, 0x5e, 0x00, 0x53, 0x01}

// fakeSystem is a System with a fixed set of interfaces and routes.
type fakeSystem struct {
	links     []netcheck.Link
	routes    []netcheck.Route
	linkErr   error // returned by Link for every name, when set
	routesErr error
}

func (s *fakeSystem) Link(name string) (netcheck.Link, error) {
	if s.linkErr != nil {
		return netcheck.Link{}, s.linkErr
	}
	for _, l := range s.links {
		if l.Name == name {
			return l, nil
		}
	}
	return netcheck.Link{}, fmt.Errorf("%s: %w", name, netcheck.ErrNoInterface)
}

func (s *fakeSystem) LinkByIndex(i int) (netcheck.Link, error) {
	for _, l := range s.links {
		if l.Index == i {
			return l, nil
		}
	}
	return netcheck.Link{}, fmt.Errorf("link index %d: %w", i, netcheck.ErrNoInterface)
}

func (s *fakeSystem) ConnectedRoutes() ([]netcheck.Route, error) {
	return s.routes, s.routesErr
}

// eth returns a healthy Ethernet interface.
func eth(name string, index int, prefixes ...string) netcheck.Link {
	l := netcheck.Link{Name: name, Index: index, MAC: mac, Up: true, Carrier: true}
	for _, p := range prefixes {
		l.Prefixes = append(l.Prefixes, netip.MustParsePrefix(p))
	}
	return l
}

func loopback() netcheck.Link {
	return netcheck.Link{Name: "lo", Index: 1, MAC: net.HardwareAddr{0, 0, 0, 0, 0, 0}, Up: true, Carrier: true, Loopback: true, NoARP: true}
}

func TestCheckInterface(t *testing.T) {
	with := func(f func(l *netcheck.Link)) netcheck.Link {
		l := eth("eth0", 2, "192.0.2.1/24")
		f(&l)
		return l
	}
	tests := []struct {
		name string
		link netcheck.Link
		ask  string
		frag []string // nil: accepted
	}{
		{name: "ok", link: eth("eth0", 2, "192.0.2.1/24"), ask: "eth0"},
		{name: "empty name", link: eth("eth0", 2), ask: "", frag: []string{"empty interface name", "-i"}},
		{name: "missing", link: eth("eth0", 2), ask: "eth9", frag: []string{`interface "eth9" does not exist`, "ip link"}},
		{name: "loopback", link: loopback(), ask: "lo", frag: []string{"interface lo is a loopback interface"}},
		{name: "no MAC", link: with(func(l *netcheck.Link) { l.MAC = nil }), ask: "eth0", frag: []string{"eth0 has no Ethernet address"}},
		{name: "20-byte InfiniBand address", link: with(func(l *netcheck.Link) { l.MAC = make(net.HardwareAddr, 20) }), ask: "eth0", frag: []string{"no Ethernet address"}},
		{name: "NOARP", link: with(func(l *netcheck.Link) { l.NoARP = true }), ask: "eth0", frag: []string{"NOARP", `"ip link set eth0 arp on"`}},
		{name: "down", link: with(func(l *netcheck.Link) { l.Up = false; l.Carrier = false }), ask: "eth0", frag: []string{"eth0 is down", `"ip link set eth0 up"`}},
		{name: "no carrier", link: with(func(l *netcheck.Link) { l.Carrier = false }), ask: "eth0", frag: []string{"eth0 has no carrier"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := &fakeSystem{links: []netcheck.Link{loopback(), tt.link}}
			got, err := netcheck.CheckInterface(sys, tt.ask)
			if tt.frag != nil {
				checkInvalid(t, err, tt.frag...)
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got.Name != tt.link.Name || got.Index != tt.link.Index || got.MAC.String() != tt.link.MAC.String() {
				t.Errorf("got %+v, want %+v", got, tt.link)
			}
		})
	}
}

func TestCheckInterfaceSystemError(t *testing.T) {
	// A failure to ask the system is not the operator's fault.
	sys := &fakeSystem{linkErr: os.ErrPermission}
	_, err := netcheck.CheckInterface(sys, "eth0")
	if !errors.Is(err, os.ErrPermission) {
		t.Errorf("got %v, want it to wrap %v", err, os.ErrPermission)
	}
	if errors.Is(err, netcheck.ErrInvalid) {
		t.Errorf("got %v marked ErrInvalid, want a system error", err)
	}
	if err != nil && !strings.Contains(err.Error(), "eth0") {
		t.Errorf("error %q does not name the interface", err)
	}
}

func TestCheckAddrOnLink(t *testing.T) {
	v6off := eth("eth0", 2, "192.0.2.1/24")
	v6off.IPv6Disabled = true
	tests := []struct {
		name string
		addr string
		link netcheck.Link
		frag []string // nil: accepted
	}{
		{"host in a /24", "192.0.2.10", eth("eth0", 2, "192.0.2.1/24"), nil},
		{"broadcast of a /24", "192.0.2.255", eth("eth0", 2, "192.0.2.1/24"), []string{"192.0.2.255 is the broadcast address of 192.0.2.0/24 on eth0"}},
		{"broadcast of the second subnet", "198.51.100.127", eth("eth0", 2, "192.0.2.1/24", "198.51.100.1/25"), []string{"broadcast address of 198.51.100.0/25"}},
		{"broadcast of a /30", "203.0.113.3", eth("eth0", 2, "203.0.113.1/30"), []string{"broadcast address of 203.0.113.0/30"}},
		{"last address outside the subnet", "192.0.2.255", eth("eth0", 2, "192.0.2.1/25"), nil},
		{"top of a /31", "192.0.2.1", eth("eth0", 2, "192.0.2.0/31"), nil},
		{"a /32", "192.0.2.7", eth("eth0", 2, "192.0.2.7/32"), nil},
		{"no subnet on the link", "192.0.2.255", eth("eth0", 2), nil},
		{"IPv6 has no broadcast", "2001:db8::ffff:ffff:ffff:ffff", eth("eth0", 2, "2001:db8::1/64"), nil},
		{"IPv6 disabled", "2001:db8::10", v6off, []string{"IPv6 is turned off on eth0", "net.ipv6.conf.eth0.disable_ipv6=0"}},
		{"IPv4 where IPv6 is disabled", "192.0.2.10", v6off, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := netcheck.CheckAddrOnLink(netip.MustParseAddr(tt.addr), tt.link)
			if tt.frag == nil {
				if err != nil {
					t.Errorf("got error %v, want none", err)
				}
				return
			}
			checkInvalid(t, err, tt.frag...)
		})
	}
}

func TestPickInterface(t *testing.T) {
	route := func(p string, index int) netcheck.Route {
		return netcheck.Route{Dst: netip.MustParsePrefix(p), LinkIndex: index}
	}
	links := []netcheck.Link{loopback(), eth("eth0", 2), eth("eth1", 3), eth("br0", 4)}
	tests := []struct {
		name   string
		addr   string
		routes []netcheck.Route
		want   string
		frag   []string // nil: want picked
	}{
		{name: "none", addr: "192.0.2.10", routes: nil, frag: []string{"no interface has 192.0.2.10 on a connected route", "-i IFACE"}},
		{name: "other subnets only", addr: "192.0.2.10", routes: []netcheck.Route{route("198.51.100.0/24", 2)}, frag: []string{"no interface has 192.0.2.10"}},
		{name: "one", addr: "192.0.2.10", routes: []netcheck.Route{route("198.51.100.0/24", 3), route("192.0.2.0/24", 2)}, want: "eth0"},
		{name: "one IPv6", addr: "2001:db8::10", routes: []netcheck.Route{route("192.0.2.0/24", 2), route("2001:db8::/64", 3)}, want: "eth1"},
		{name: "two routes on one link", addr: "192.0.2.10", routes: []netcheck.Route{route("192.0.2.0/24", 2), route("192.0.2.0/28", 2)}, want: "eth0"},
		{name: "loopback ignored", addr: "192.0.2.10", routes: []netcheck.Route{route("192.0.2.0/24", 1), route("192.0.2.0/24", 3)}, want: "eth1"},
		{name: "loopback only", addr: "192.0.2.10", routes: []netcheck.Route{route("192.0.2.10/32", 1)}, frag: []string{"no interface has 192.0.2.10"}},
		{name: "several", addr: "192.0.2.10", routes: []netcheck.Route{route("192.0.2.0/24", 3), route("192.0.2.0/25", 2)}, frag: []string{"192.0.2.10 is on-link on eth0 and eth1", "-i"}},
		{name: "three", addr: "192.0.2.10", routes: []netcheck.Route{route("192.0.2.0/24", 4), route("192.0.2.0/24", 3), route("192.0.2.0/24", 2)}, frag: []string{"br0", "eth0", "eth1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := &fakeSystem{links: links, routes: tt.routes}
			got, err := netcheck.PickInterface(sys, netip.MustParseAddr(tt.addr))
			if tt.frag != nil {
				checkInvalid(t, err, tt.frag...)
				if got != "" {
					t.Errorf("got %q with the error, want \"\"", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %s", err, tt.want)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPickInterfaceRoutesError(t *testing.T) {
	sys := &fakeSystem{routesErr: os.ErrPermission}
	_, err := netcheck.PickInterface(sys, netip.MustParseAddr("192.0.2.10"))
	if !errors.Is(err, os.ErrPermission) || errors.Is(err, netcheck.ErrInvalid) {
		t.Errorf("got %v, want a system error wrapping %v", err, os.ErrPermission)
	}
	if err != nil && !strings.Contains(err.Error(), "192.0.2.10") {
		t.Errorf("error %q does not name the address", err)
	}
}

func TestPickInterfaceUnknownLinkIsAnError(t *testing.T) {
	// A route whose interface cannot be looked up must not be skipped: the
	// remaining answer could be the wrong segment.
	route := func(p string, index int) netcheck.Route {
		return netcheck.Route{Dst: netip.MustParsePrefix(p), LinkIndex: index}
	}
	sys := &fakeSystem{links: []netcheck.Link{eth("eth0", 2)}, routes: []netcheck.Route{route("192.0.2.0/24", 99), route("192.0.2.0/24", 2)}}
	got, err := netcheck.PickInterface(sys, netip.MustParseAddr("192.0.2.10"))
	if err == nil || errors.Is(err, netcheck.ErrInvalid) || got != "" {
		t.Errorf("got %q, %v; want a system error and no interface", got, err)
	}
}

func TestCheckAddrOnLinkRefusesNetworkAddress(t *testing.T) {
	l := netcheck.Link{Name: "eth0", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.2/24")}}
	err := netcheck.CheckAddrOnLink(netip.MustParseAddr("192.0.2.0"), l)
	if !errors.Is(err, netcheck.ErrInvalid) || !strings.Contains(err.Error(), "network address of 192.0.2.0/24") {
		t.Errorf("got %v, want the network address refused", err)
	}
}
