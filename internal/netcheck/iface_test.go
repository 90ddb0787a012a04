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
	links     []netcheck.Interface
	routes    []netcheck.Route
	linkErr   error // returned by Link for every name, when set
	routesErr error
}

func (s *fakeSystem) Interface(name string) (netcheck.Interface, error) {
	if s.linkErr != nil {
		return netcheck.Interface{}, s.linkErr
	}
	for _, l := range s.links {
		if l.Name == name {
			return l, nil
		}
	}
	return netcheck.Interface{}, fmt.Errorf("%s: %w", name, netcheck.ErrNoInterface)
}

func (s *fakeSystem) InterfaceByIndex(i int) (netcheck.Interface, error) {
	for _, l := range s.links {
		if l.Index == i {
			return l, nil
		}
	}
	return netcheck.Interface{}, fmt.Errorf("link index %d: %w", i, netcheck.ErrNoInterface)
}

func (s *fakeSystem) ConnectedRoutes() ([]netcheck.Route, error) {
	return s.routes, s.routesErr
}

// eth returns a healthy Ethernet interface.
func eth(name string, index int, prefixes ...string) netcheck.Interface {
	l := netcheck.Interface{Name: name, Index: index, MAC: mac, Up: true, Carrier: true}
	for _, p := range prefixes {
		l.Prefixes = append(l.Prefixes, netip.MustParsePrefix(p))
	}
	return l
}

func loopback() netcheck.Interface {
	return netcheck.Interface{Name: "lo", Index: 1, MAC: net.HardwareAddr{0, 0, 0, 0, 0, 0}, Up: true, Carrier: true, Loopback: true, NoARP: true}
}

func TestCheckInterface(t *testing.T) {
	with := func(f func(l *netcheck.Interface)) netcheck.Interface {
		l := eth("eth0", 2, "192.0.2.1/24")
		f(&l)
		return l
	}
	tests := []struct {
		name string
		link netcheck.Interface
		ask  string
		frag []string // nil: accepted
	}{
		{name: "ok", link: eth("eth0", 2, "192.0.2.1/24"), ask: "eth0"},
		{name: "empty name", link: eth("eth0", 2), ask: "", frag: []string{"empty interface name", "-i"}},
		{name: "missing", link: eth("eth0", 2), ask: "eth9", frag: []string{`interface "eth9" does not exist`, "ip link"}},
		{name: "loopback", link: loopback(), ask: "lo", frag: []string{"interface lo is a loopback interface"}},
		{name: "no MAC", link: with(func(l *netcheck.Interface) { l.MAC = nil }), ask: "eth0", frag: []string{"eth0 has no Ethernet address"}},
		{name: "20-byte InfiniBand address", link: with(func(l *netcheck.Interface) { l.MAC = make(net.HardwareAddr, 20) }), ask: "eth0", frag: []string{"no Ethernet address"}},
		{name: "NOARP", link: with(func(l *netcheck.Interface) { l.NoARP = true }), ask: "eth0", frag: []string{"NOARP", `"ip link set eth0 arp on"`}},
		{name: "down", link: with(func(l *netcheck.Interface) { l.Up = false; l.Carrier = false }), ask: "eth0", frag: []string{"eth0 is down", `"ip link set eth0 up"`}},
		{name: "no carrier", link: with(func(l *netcheck.Interface) { l.Carrier = false }), ask: "eth0", frag: []string{"eth0 has no carrier"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := &fakeSystem{links: []netcheck.Interface{loopback(), tt.link}}
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
		link netcheck.Interface
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
	links := []netcheck.Interface{loopback(), eth("eth0", 2), eth("eth1", 3), eth("br0", 4)}
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
			got, err := pickInterface(sys, netip.MustParseAddr(tt.addr))
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
	_, err := pickInterface(sys, netip.MustParseAddr("192.0.2.10"))
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
	sys := &fakeSystem{links: []netcheck.Interface{eth("eth0", 2)}, routes: []netcheck.Route{route("192.0.2.0/24", 99), route("192.0.2.0/24", 2)}}
	got, err := pickInterface(sys, netip.MustParseAddr("192.0.2.10"))
	if err == nil || errors.Is(err, netcheck.ErrInvalid) || got != "" {
		t.Errorf("got %q, %v; want a system error and no interface", got, err)
	}
}

func TestCheckAddrOnLinkRefusesNetworkAddress(t *testing.T) {
	l := netcheck.Interface{Name: "eth0", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.2/24")}}
	err := netcheck.CheckAddrOnLink(netip.MustParseAddr("192.0.2.0"), l)
	if !errors.Is(err, netcheck.ErrInvalid) || !strings.Contains(err.Error(), "network address of 192.0.2.0/24") {
		t.Errorf("got %v, want the network address refused", err)
	}
}

// masters is a host with ports of every kind of master: each ethN is a port
// of the master named in its comment.
func masters() *fakeSystem {
	in := func(l netcheck.Interface, master int) netcheck.Interface { l.MasterIndex = master; return l }
	kind := func(l netcheck.Interface, k string) netcheck.Interface { l.Kind = k; return l }
	down := eth("eth10", 30)
	down.Up, down.Carrier = false, false
	return &fakeSystem{links: []netcheck.Interface{
		loopback(),
		kind(eth("br0", 10, "192.0.2.1/24"), "bridge"),
		kind(eth("bond0", 11), "bond"),
		kind(eth("team0", 12), "team"),
		kind(eth("ovs-system", 13), "openvswitch"),
		kind(eth("blue", 14), "vrf"),
		in(kind(eth("bond1", 15), "bond"), 16),
		kind(eth("br1", 16), "bridge"),
		in(kind(eth("br2", 17), "bridge"), 14),
		kind(eth("hsr0", 18), "hsr"),
		in(kind(eth("br3", 19), "bridge"), 19),  // its own master: a loop no kernel makes
		in(eth("eth1", 21, "192.0.2.5/24"), 10), // br0
		in(eth("eth2", 22), 11),                 // bond0
		in(eth("eth3", 23), 12),                 // team0
		in(eth("eth4", 24), 13),                 // ovs-system
		in(eth("eth5", 25), 14),                 // blue, a VRF
		in(eth("eth6", 26), 15),                 // bond1, itself a port of br1
		in(eth("eth7", 27), 17),                 // br2, itself in the VRF blue
		in(eth("eth8", 28), 18),                 // hsr0
		in(eth("eth9", 29), 99),                 // a master that is gone
		in(down, 10),                            // br0
		in(eth("eth11", 31), 19),                // br3
	}}
}

func TestCheckInterfaceRefusesPorts(t *testing.T) {
	tests := []struct {
		ask  string
		want string // the whole sentence; "": accepted
	}{
		{"eth1", "interface eth1 is a port of bridge br0, which receives its frames: claim on br0 instead (-i br0)"},
		{"eth2", "interface eth2 is a slave of bond bond0, which receives its frames: claim on bond0 instead (-i bond0)"},
		{"eth3", "interface eth3 is a port of team team0, which receives its frames: claim on team0 instead (-i team0)"},
		{"eth4", `interface eth4 is a port of the Open vSwitch datapath ovs-system, which receives its frames: claim on the internal interface of its Open vSwitch bridge instead ("ovs-vsctl port-to-br eth4" names the bridge)`},
		{"eth6", "interface eth6 is a slave of bond bond1, a port of bridge br1, which receives its frames: claim on br1 instead (-i br1)"},
		{"bond1", "interface bond1 is a port of bridge br1, which receives its frames: claim on br1 instead (-i br1)"},
		{"eth7", "interface eth7 is a port of bridge br2, which receives its frames: claim on br2 instead (-i br2)"},
		{"eth8", "interface eth8 is a port of hsr hsr0, which receives its frames: claim on hsr0 instead (-i hsr0)"},
		{"eth10", "interface eth10 is a port of bridge br0, which receives its frames: claim on br0 instead (-i br0)"}, // before "is down": up would not help
		{"br0", ""},
		{"bond0", ""},
		{"br1", ""},
		{"eth5", ""}, // a VRF member receives its own frames
		{"br2", ""},  // a bridge in a VRF
	}
	for _, tt := range tests {
		t.Run(tt.ask, func(t *testing.T) {
			got, err := netcheck.CheckInterface(masters(), tt.ask)
			if tt.want == "" {
				if err != nil || got.Name != tt.ask {
					t.Errorf("got %q, %v; want %s accepted", got.Name, err, tt.ask)
				}
				return
			}
			checkInvalid(t, err, tt.want)
			if err != nil && err.Error() != tt.want {
				t.Errorf("got %q, want %q", err, tt.want)
			}
		})
	}
}

func TestCheckInterfaceMasterErrors(t *testing.T) {
	// A master that cannot be looked up is the system's failure, not the
	// operator's.
	_, err := netcheck.CheckInterface(masters(), "eth9")
	if err == nil || errors.Is(err, netcheck.ErrInvalid) || !strings.Contains(err.Error(), "master of eth9") {
		t.Errorf("port of a missing master: got %v, want a system error naming the master of eth9", err)
	}
	// A loop of masters ends: the walk is bounded as the kernel's nesting is.
	_, err = netcheck.CheckInterface(masters(), "eth11")
	checkInvalid(t, err, "interface eth11 is a port of bridge br3, a port of bridge br3", "claim on br3 instead")
}

func TestPickInterfaceRefusesPorts(t *testing.T) {
	route := func(p string, index int) netcheck.Route {
		return netcheck.Route{Dst: netip.MustParsePrefix(p), LinkIndex: index}
	}
	tests := []struct {
		name   string
		routes []netcheck.Route
		want   string
		frag   string // the whole sentence, when refused
	}{
		{name: "route on the bridge", routes: []netcheck.Route{route("192.0.2.0/24", 10)}, want: "br0"},
		{name: "route left on the port", routes: []netcheck.Route{route("192.0.2.0/24", 21)},
			frag: "192.0.2.10 is on-link on eth1, but eth1 is a port of bridge br0, which receives its frames: claim on br0 instead (-i br0)"},
		{name: "route on the port and its bridge", routes: []netcheck.Route{route("192.0.2.0/24", 21), route("192.0.2.0/24", 10)},
			frag: "192.0.2.10 is on-link on br0 and eth1: pass -i to choose one"},
		{name: "route on a VRF member", routes: []netcheck.Route{route("192.0.2.0/24", 25)}, want: "eth5"},
		{name: "route on a bond slave", routes: []netcheck.Route{route("192.0.2.0/24", 26)},
			frag: "192.0.2.10 is on-link on eth6, but eth6 is a slave of bond bond1, a port of bridge br1, which receives its frames: claim on br1 instead (-i br1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := masters()
			sys.routes = tt.routes
			got, err := pickInterface(sys, netip.MustParseAddr("192.0.2.10"))
			if tt.frag != "" {
				checkInvalid(t, err, tt.frag)
				if err != nil && err.Error() != tt.frag {
					t.Errorf("got %q, want %q", err, tt.frag)
				}
				if got != "" {
					t.Errorf("got %q with the error, want \"\"", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestPickerLooksUpMastersOnce(t *testing.T) {
	// A claim of thousands of addresses without -i must not walk the
	// masters again for each.
	sys := &countingSystem{fakeSystem: masters()}
	sys.routes = []netcheck.Route{{Dst: netip.MustParsePrefix("192.0.2.0/24"), LinkIndex: 25}}
	p, err := netcheck.NewPicker(sys)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if got, err := p.Pick(netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)})); err != nil || got != "eth5" {
			t.Fatalf("Pick: got %q, %v; want eth5", got, err)
		}
	}
	if sys.byIndex != 2 { // eth5, then its VRF
		t.Errorf("got %d InterfaceByIndex calls for 100 picks, want 2", sys.byIndex)
	}
}

type countingSystem struct {
	*fakeSystem
	byIndex int
}

func (s *countingSystem) InterfaceByIndex(i int) (netcheck.Interface, error) {
	s.byIndex++
	return s.fakeSystem.InterfaceByIndex(i)
}

// pickInterface picks the interface for one address, as claim does for
// each of its addresses.
func pickInterface(sys netcheck.System, a netip.Addr) (string, error) {
	p, err := netcheck.NewPicker(sys)
	if err != nil {
		return "", fmt.Errorf("find the interface for %s: %w", a, err)
	}
	return p.Pick(a)
}
