package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/netcheck"
)

var _ netcheck.System = System{}

// System is the netcheck.System of the running host (its network
// namespace), read through rtnetlink.
type System struct{}

// Link implements netcheck.System.
func (System) Interface(name string) (netcheck.Interface, error) {
	nl, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return netcheck.Interface{}, fmt.Errorf("%s: %w", name, netcheck.ErrNoInterface)
		}
		return netcheck.Interface{}, err
	}
	return fromNetlink(nl)
}

// InterfaceByIndex implements netcheck.System.
func (System) InterfaceByIndex(i int) (netcheck.Interface, error) {
	nl, err := netlink.LinkByIndex(i)
	if err != nil {
		return netcheck.Interface{}, err
	}
	return fromNetlink(nl)
}

// ConnectedRoutes implements netcheck.System.
func (System) ConnectedRoutes() ([]netcheck.Route, error) {
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	var out []netcheck.Route
	for _, r := range rs {
		if r.Dst == nil || r.Gw != nil || len(r.MultiPath) > 0 || r.Type != unix.RTN_UNICAST {
			continue
		}
		p, ok := prefixOf(r.Dst)
		if !ok {
			continue
		}
		out = append(out, netcheck.Route{Dst: p, LinkIndex: r.LinkIndex})
	}
	return out, nil
}

func fromNetlink(nl netlink.Link) (netcheck.Interface, error) {
	at := nl.Attrs()
	l := netcheck.Interface{
		Name:        at.Name,
		Index:       at.Index,
		MAC:         at.HardwareAddr,
		Up:          at.Flags&net.FlagUp != 0,
		Loopback:    at.Flags&net.FlagLoopback != 0,
		NoARP:       at.RawFlags&unix.IFF_NOARP != 0,
		Carrier:     at.OperState == netlink.OperUp || at.OperState == netlink.OperUnknown,
		Kind:        nl.Type(),
		MasterIndex: at.MasterIndex,
	}
	if v, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + at.Name + "/disable_ipv6"); err != nil || strings.TrimSpace(string(v)) != "0" {
		l.IPv6Disabled = true
	}
	addrs, err := netlink.AddrList(nl, netlink.FAMILY_ALL)
	if err != nil {
		return netcheck.Interface{}, fmt.Errorf("list addresses of %s: %w", at.Name, err)
	}
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet); ok {
			l.Prefixes = append(l.Prefixes, p)
		}
	}
	return l, nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}
