package netcheck

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrInvalid marks errors caused by bad input.
var ErrInvalid = errors.New("invalid input")

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// Invalidf returns an error about bad input: its text is the formatted
// message alone, and it satisfies errors.Is(err, ErrInvalid).
func Invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	reserved4   = netip.MustParsePrefix("240.0.0.0/4")
	broadcast4  = netip.MustParseAddr("255.255.255.255")
	// ipv4Compatible is ::/96, deprecated by RFC 4291.
	ipv4Compatible = netip.MustParsePrefix("::/96")
)

// ParseAddr parses s as an address vip can claim: a unicast IPv4 or IPv6
// address that a segment's hosts can resolve, so not unspecified, multicast,
// broadcast, loopback or link-local.
func ParseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		if p, perr := netip.ParsePrefix(s); perr == nil {
			return netip.Addr{}, Invalidf("%s has a prefix length: give the address alone, %s", s, p.Addr())
		}
		return netip.Addr{}, Invalidf("%q is not an IP address: give an IPv4 address like 192.0.2.10 or an IPv6 address like 2001:db8::10", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, Invalidf("%s has a zone: give the address without %%%s and choose the interface with -i", s, a.Zone())
	}
	if a.Is4In6() {
		return netip.Addr{}, Invalidf("%s is an IPv4-mapped IPv6 address: write it as %s", s, a.Unmap())
	}
	var why string
	switch {
	case ipv4Compatible.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return netip.Addr{}, Invalidf("%s is a deprecated IPv4-compatible IPv6 address: claim %s for IPv4, or a real IPv6 address", s, netip.AddrFrom4([4]byte(a.AsSlice()[12:])))
	case a.IsUnspecified():
		why = "is the unspecified address"
	case a == broadcast4:
		why = "is the broadcast address"
	case a.IsMulticast():
		why = "is a multicast address"
	case a.IsLoopback():
		why = "is a loopback address"
	case a.IsLinkLocalUnicast():
		why = "is a link-local address"
	case thisNetwork.Contains(a):
		why = "is in 0.0.0.0/8, which means \"this network\""
	case reserved4.Contains(a):
		why = "is in the reserved range 240.0.0.0/4"
	}
	if why != "" {
		return netip.Addr{}, Invalidf("%s %s and cannot be claimed: give a unicast address on the segment", a, why)
	}
	return a, nil
}

// ParseAddrs parses every argument with ParseAddr and refuses an address
// given twice, in any spelling.
func ParseAddrs(args []string) ([]netip.Addr, error) {
	if len(args) == 0 {
		return nil, Invalidf("no address given: name at least one, like 192.0.2.10")
	}
	out := make([]netip.Addr, 0, len(args))
	first := make(map[netip.Addr]string, len(args))
	for _, s := range args {
		s = strings.TrimSpace(s)
		a, err := ParseAddr(s)
		if err != nil {
			return nil, err
		}
		if prev, ok := first[a]; ok {
			if prev == s {
				return nil, Invalidf("%s is given twice: name each address once", s)
			}
			return nil, Invalidf("%s and %s are the same address: name each address once", prev, s)
		}
		first[a] = s
		out = append(out, a)
	}
	return out, nil
}
