package netcheck

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// Interface is what validation needs to know of an interface.
type Interface struct {
	Name     string
	Index    int
	MAC      net.HardwareAddr
	Up       bool // administratively up
	Carrier  bool // operationally up, or a kind that does not report it
	Loopback bool
	NoARP    bool
	// IPv6Disabled is set when the interface has IPv6 turned off.
	IPv6Disabled bool
	// Prefixes are the interface's own addresses with their prefix length.
	Prefixes []netip.Prefix
	// Kind is the interface's kind as "ip -d link" names it: "bridge",
	// "bond", "vrf", "veth"; "device" for one without a kind, such as a
	// physical NIC.
	Kind string
	// MasterIndex is the index of the interface's master (the bridge,
	// bond or VRF it belongs to), or 0 when it has none.
	MasterIndex int
}

// Route is a connected (on-link, gateway-less) route.
type Route struct {
	Dst       netip.Prefix
	LinkIndex int
}

// System answers questions about the host's interfaces and routes. Netlink
// is the real one; tests use a fake.
type System interface {
	// Interface returns the named interface, or an error satisfying
	// errors.Is(err, ErrNoInterface).
	Interface(name string) (Interface, error)
	// InterfaceByIndex returns the interface with index i.
	InterfaceByIndex(i int) (Interface, error)
	// ConnectedRoutes lists the on-link routes of the main table.
	ConnectedRoutes() ([]Route, error)
}

// ErrNoInterface is returned for an interface that does not exist.
var ErrNoInterface = errors.New("no such interface")

// CheckInterface returns the named interface when vip can claim addresses
// on it: it exists, is not a port of a master that takes its frames (a
// bridge, bond, team or Open vSwitch; a VRF member is fine), is up with a
// carrier, is not loopback, has an Ethernet address and does ARP.
func CheckInterface(sys System, name string) (Interface, error) {
	if name == "" {
		return Interface{}, Invalidf("empty interface name: pass -i with an interface such as eth0")
	}
	l, err := sys.Interface(name)
	if errors.Is(err, ErrNoInterface) {
		return Interface{}, Invalidf("interface %q does not exist: list the interfaces with \"ip link\"", name)
	}
	if err != nil {
		return Interface{}, fmt.Errorf("look up interface %s: %w", name, err)
	}
	// First: bringing a port up or turning its ARP on would not help.
	of, fix, err := MasterOf(sys, l)
	if err != nil {
		return Interface{}, err
	}
	if of != "" {
		return Interface{}, Invalidf("interface %s is %s, which receives its frames: %s", name, of, fix)
	}
	switch {
	case l.Loopback:
		return Interface{}, Invalidf("interface %s is a loopback interface: pick the interface on the segment where the address should live", name)
	case len(l.MAC) != 6:
		return Interface{}, Invalidf("interface %s has no Ethernet address, so nobody can resolve an address to it: pick an Ethernet interface", name)
	case l.NoARP:
		return Interface{}, Invalidf("interface %s has ARP turned off (NOARP): turn it on with \"ip link set %s arp on\" or pick another interface", name, name)
	case !l.Up:
		return Interface{}, Invalidf("interface %s is down: bring it up with \"ip link set %s up\"", name, name)
	case !l.Carrier:
		return Interface{}, Invalidf("interface %s has no carrier (its link is down): check the cable or its peer, then try again", name)
	}
	return l, nil
}

// CheckAddrOnLink refuses addresses that cannot be claimed on l: the
// broadcast address of one of its IPv4 subnets, or an IPv6 address where
// IPv6 is turned off.
func CheckAddrOnLink(a netip.Addr, l Interface) error {
	if a.Is6() && l.IPv6Disabled {
		return Invalidf("IPv6 is turned off on %s: turn it on with \"sysctl net.ipv6.conf.%s.disable_ipv6=0\" or claim an IPv4 address", l.Name, l.Name)
	}
	if a.Is4() {
		for _, p := range l.Prefixes {
			if !p.Addr().Is4() || p.Bits() > 30 || !p.Contains(a) {
				continue
			}
			switch a {
			case lastAddr(p):
				return Invalidf("%s is the broadcast address of %s on %s and cannot be claimed", a, p.Masked(), l.Name)
			case p.Masked().Addr():
				return Invalidf("%s is the network address of %s on %s, which some hosts treat as broadcast: claim a host address", a, p.Masked(), l.Name)
			}
		}
	}
	return nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Picker picks interfaces for many addresses from one reading of the routes.
type Picker struct {
	sys    System
	routes []Route
	links  map[int]*candidate // by index; nil for loopback
}

// candidate is an interface with a connected route, and what it is a port
// of (see port), looked up once for all the addresses.
type candidate struct {
	name    string
	of, fix string
}

// NewPicker reads the connected routes once.
func NewPicker(sys System) (*Picker, error) {
	routes, err := sys.ConnectedRoutes()
	if err != nil {
		return nil, fmt.Errorf("list routes to find interfaces: %w", err)
	}
	return &Picker{sys: sys, routes: routes, links: map[int]*candidate{}}, nil
}

// Pick finds the one interface that has a on a connected route. It fails,
// asking for -i, when none does or when several do: a guess could claim the
// address on the wrong segment. When the one interface found is a port of a
// bridge or bond (its connected route a leftover of the time before it
// became one), Pick refuses it and names the master to claim on instead.
func (p *Picker) Pick(a netip.Addr) (string, error) {
	var found []*candidate
	seen := map[int]bool{}
	for _, r := range p.routes {
		if !r.Dst.Contains(a) || seen[r.LinkIndex] {
			continue
		}
		seen[r.LinkIndex] = true
		c, ok := p.links[r.LinkIndex]
		if !ok {
			l, err := p.sys.InterfaceByIndex(r.LinkIndex)
			if err != nil {
				// Skipping it could leave one confident, wrong answer.
				return "", fmt.Errorf("find the interface for %s: look up interface %d: %w", a, r.LinkIndex, err)
			}
			if !l.Loopback {
				c = &candidate{name: l.Name}
				if c.of, c.fix, err = MasterOf(p.sys, l); err != nil {
					return "", fmt.Errorf("find the interface for %s: %w", a, err)
				}
			}
			p.links[r.LinkIndex] = c
		}
		if c != nil {
			found = append(found, c)
		}
	}
	slices.SortFunc(found, func(x, y *candidate) int { return strings.Compare(x.name, y.name) })
	names := make([]string, len(found))
	for i, c := range found {
		names[i] = c.name
	}
	switch len(names) {
	case 0:
		return "", Invalidf("no interface has %s on a connected route: pass -i IFACE to say where to claim it", a)
	case 1:
		if c := found[0]; c.of != "" {
			return "", Invalidf("%s is on-link on %s, but %s is %s, which receives its frames: %s", a, c.name, c.name, c.of, c.fix)
		}
		return names[0], nil
	}
	return "", Invalidf("%s is on-link on %s and %s: pass -i to choose one", a, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}
