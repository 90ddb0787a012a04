package wiretest

import (
	"net"
	"net/netip"
)

// The addresses tests put in frames, from the documentation blocks only:
// MACs from RFC 7042's 00-00-5E-00-53-00/24, IPv4 from RFC 5737, IPv6 from
// RFC 3849. A test names them for the part each plays in it (linkMAC,
// askerMAC); the values are here, once. Tests must not write into the MACs.
var (
	// OurMAC is the address of the side under test: the responder's link.
	OurMAC = net.HardwareAddr{0x00, 0x00, 0x5e, 0x00, 0x53, 0x01}
	// PeerMAC is the other host on the segment: the one that asks.
	PeerMAC = net.HardwareAddr{0x00, 0x00, 0x5e, 0x00, 0x53, 0x02}
	// OtherMAC is a third host: a rival claimer, or a link-layer option
	// that differs from the frame's Ethernet source.
	OtherMAC = net.HardwareAddr{0x00, 0x00, 0x5e, 0x00, 0x53, 0x03}
	// ZeroMAC is the all-zero address an ARP request carries as its target.
	ZeroMAC = net.HardwareAddr{0, 0, 0, 0, 0, 0}

	// VIP4 and VIP6 are the virtual addresses claimed.
	VIP4 = netip.MustParseAddr("192.0.2.10")
	VIP6 = netip.MustParseAddr("2001:db8::10")
	// Peer4 and Peer6 are the addresses of the peer that asks.
	Peer4 = netip.MustParseAddr("192.0.2.20")
	Peer6 = netip.MustParseAddr("2001:db8::20")
	// SNM6 is the solicited-node group of VIP6.
	SNM6 = netip.MustParseAddr("ff02::1:ff00:10")
)
