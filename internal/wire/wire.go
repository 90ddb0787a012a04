package wire

import (
	"net"
	"net/netip"
)

// EtherType values of the frames vip handles.
const (
	EtherTypeARP  = 0x0806
	EtherTypeIPv6 = 0x86dd
)

// Sizes and offsets of the headers vip reads; the kernel filters read the
// frames at these offsets too (see Asm).
const (
	EthernetHeaderLen = 14
	IPv6HeaderLen     = 40
	// EtherTypeOffset is where an untagged Ethernet frame carries its
	// EtherType.
	EtherTypeOffset = 12
	// ARPHardwareOffset, ARPProtocolOffset, ARPLengthsOffset and
	// ARPOpOffset are where an untagged ARP frame carries its hardware
	// type, its protocol type, its two address lengths (a byte each) and
	// its operation.
	ARPHardwareOffset = EthernetHeaderLen
	ARPProtocolOffset = EthernetHeaderLen + 2
	ARPLengthsOffset  = EthernetHeaderLen + 4
	ARPOpOffset       = EthernetHeaderLen + 6
	// IPv6NextHeaderOffset and IPv6SrcOffset are where an untagged frame
	// carries its IPv6 header's next header and source address.
	IPv6NextHeaderOffset = EthernetHeaderLen + 6
	IPv6SrcOffset        = EthernetHeaderLen + 8
	// ICMPv6Offset is where the ICMPv6 message starts in an untagged
	// Ethernet frame carrying IPv6 without extension headers.
	ICMPv6Offset = EthernetHeaderLen + IPv6HeaderLen
	// ARPTargetIPOffset is where an untagged ARP frame carries its target
	// protocol address (kernel filters match it).
	ARPTargetIPOffset = EthernetHeaderLen + 24
	// ARPSenderIPOffset is where an untagged ARP frame carries its sender
	// protocol address.
	ARPSenderIPOffset = EthernetHeaderLen + 14
	// NDTargetOffset is where an untagged solicitation or advertisement
	// without extension headers carries its target address.
	NDTargetOffset = ICMPv6Offset + 8
)

// Lengths of the frames the builders write.
const (
	// ARPLen is an ARP frame for IPv4 over Ethernet, without padding.
	ARPLen = EthernetHeaderLen + arpLen
	// MinFrameLen is Ethernet's minimum frame length without the FCS, to
	// which a sender pads a shorter frame with zeros.
	MinFrameLen = 60
	// NDLen is a solicitation or advertisement without options;
	// NDLenWithLinkLayer one with a link-layer address option.
	NDLen              = ICMPv6Offset + ndpMinLen
	NDLenWithLinkLayer = NDLen + 8
)

// NDP message types (RFC 4861).
const (
	TypeNeighborSolicitation  = 135
	TypeNeighborAdvertisement = 136
)

// ARP operations vip reads and writes.
const (
	OpRequest = 1
	OpReply   = 2
)

// MAC is an Ethernet address as a value: views and builders use it so that
// neither allocates.
type MAC [6]byte

// BroadcastMAC is the Ethernet broadcast address.
var BroadcastMAC = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Broadcast is the Ethernet broadcast address as a net.HardwareAddr, for
// socket addresses.
var Broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Well-known IPv6 multicast groups.
var (
	AllNodes   = netip.MustParseAddr("ff02::1")
	AllRouters = netip.MustParseAddr("ff02::2")
)

// MACOf returns hw as a MAC, and false when hw is not a 6-byte Ethernet
// address.
func MACOf(hw net.HardwareAddr) (MAC, bool) {
	if len(hw) != 6 {
		return MAC{}, false
	}
	return MAC(hw), true
}

// GroupMAC returns the Ethernet address that IPv6 multicast group g maps to
// (RFC 2464: 33:33 followed by the group's last 32 bits).
func GroupMAC(g netip.Addr) MAC {
	b := g.As16()
	return MAC{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// SolicitedNode returns the solicited-node multicast group of a,
// ff02::1:ff00:0/104 with a's last 24 bits (RFC 4291 section 2.7.1).
func SolicitedNode(a netip.Addr) netip.Addr {
	t := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 10: 0, 11: 0x01, 12: 0xff, 13: t[13], 14: t[14], 15: t[15]})
}

// IsSolicitedNode reports whether a is a solicited-node multicast group,
// ff02::1:ffXX:XXXX.
func IsSolicitedNode(a netip.Addr) bool {
	b := a.As16()
	return a.Is6() && b[0] == 0xff && b[1] == 0x02 && b[11] == 0x01 && b[12] == 0xff &&
		b[2]|b[3]|b[4]|b[5]|b[6]|b[7]|b[8]|b[9]|b[10] == 0
}

// Checksum returns the ones'-complement sum of the IPv6 pseudo-header and
// msg, folded and inverted. Over a message with its checksum in place the
// result is 0 when the checksum is right.
func Checksum(src, dst netip.Addr, msg []byte) uint16 {
	var sum uint32
	s, d := src.As16(), dst.As16()
	for i := 0; i < 16; i += 2 {
		sum += uint32(s[i])<<8 | uint32(s[i+1])
		sum += uint32(d[i])<<8 | uint32(d[i+1])
	}
	sum += uint32(len(msg)>>16) + uint32(len(msg)&0xffff)
	sum += ProtoICMPv6
	for i := 0; i+1 < len(msg); i += 2 {
		sum += uint32(msg[i])<<8 | uint32(msg[i+1])
	}
	if len(msg)%2 == 1 {
		sum += uint32(msg[len(msg)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
