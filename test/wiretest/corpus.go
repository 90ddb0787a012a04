package wiretest

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"

	"github.com/vipctl/vip/internal/wire"
)

// The corpus's cast, documentation addresses only: the responder answers
// from CorpusMAC for CorpusHeld4 and CorpusHeld6; a neighbour at
// corpusAskerMAC asks.
var (
	CorpusMAC   = net.HardwareAddr{0x02, 0x00, 0x5e, 0x00, 0x53, 0x07}
	CorpusHeld4 = netip.MustParseAddr("192.0.2.10")
	CorpusHeld6 = netip.MustParseAddr("2001:db8::10")

	corpusAskerMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0x00, 0x53, 0x03}
	corpusAsker4   = netip.MustParseAddr("192.0.2.3")
	corpusAsker6   = netip.MustParseAddr("2001:db8::3")
	corpusOther4   = netip.MustParseAddr("192.0.2.99")
	corpusOther6   = netip.MustParseAddr("2001:db8::99")
)

// CorpusFrame is one frame a responder may be shown, and whether a
// responder holding CorpusHeld4 and CorpusHeld6 answers it.
type CorpusFrame struct {
	Name   string
	Frame  []byte
	Answer bool
}

// Corpus returns frames that every responder of vip (the sockets' and the
// in-kernel one) must answer alike: valid requests in their forms (probes,
// unicast and multicast solicitations with and without a source link-layer
// option, DAD) and, each one field away from one of them, frames that are
// not requests or not valid. Each call builds them afresh.
func Corpus() []CorpusFrame {
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	whoHas := mustFrame(ARPFrame(wire.Broadcast, corpusAskerMAC, arp.OperationRequest, corpusAskerMAC, corpusAsker4, zero, CorpusHeld4))
	snm := wire.SolicitedNode(CorpusHeld6)
	snmMAC := MulticastMAC(snm)
	slla := option(1, corpusAskerMAC)
	ns := func(ethDst net.HardwareAddr, src, dst netip.Addr, opts ...[]byte) []byte {
		return rawNDP(ethDst, corpusAskerMAC, src, dst, wire.TypeNeighborSolicitation, CorpusHeld6, opts...)
	}
	multicast := ns(snmMAC, corpusAsker6, snm, slla)
	unspec := netip.IPv6Unspecified()
	// Offsets into a solicitation.
	const (
		ip6  = wire.EthernetHeaderLen
		icmp = wire.ICMPv6Offset
		opt  = wire.ICMPv6Offset + 24
	)
	return []CorpusFrame{
		{"ARP who-has", whoHas, true},
		{"ARP who-has padded to 60 bytes", pad(whoHas, wire.MinFrameLen), true},
		{"ARP who-has unicast", mustFrame(ARPFrame(CorpusMAC, corpusAskerMAC, arp.OperationRequest, corpusAskerMAC, corpusAsker4, zero, CorpusHeld4)), true},
		{"ARP probe", mustFrame(ARPProbe(corpusAskerMAC, CorpusHeld4)), true},
		{"ARP who-has with a group sender MAC", mustFrame(ARPFrame(wire.Broadcast, corpusAskerMAC, arp.OperationRequest, net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1}, corpusAsker4, zero, CorpusHeld4)), true},
		{"ARP who-has with a zero sender MAC", mustFrame(ARPFrame(wire.Broadcast, corpusAskerMAC, arp.OperationRequest, zero, corpusAsker4, zero, CorpusHeld4)), true},
		{"ARP who-has for another address", mustFrame(ARPFrame(wire.Broadcast, corpusAskerMAC, arp.OperationRequest, corpusAskerMAC, corpusAsker4, zero, corpusOther4)), false},
		{"ARP reply", mustFrame(ARPFrame(CorpusMAC, corpusAskerMAC, arp.OperationReply, corpusAskerMAC, corpusAsker4, CorpusMAC, CorpusHeld4)), false},
		{"ARP gratuitous reply", mustFrame(ARPGratuitousReply(corpusAskerMAC, CorpusHeld4)), false},
		{"our own ARP announcement", mustFrame(ARPAnnouncement(CorpusMAC, CorpusHeld4)), false},
		{"another node's ARP announcement of the held address", mustFrame(ARPAnnouncement(corpusAskerMAC, CorpusHeld4)), false},
		{"ARP who-has from our MAC", mustFrame(ARPFrame(wire.Broadcast, CorpusMAC, arp.OperationRequest, corpusAskerMAC, corpusAsker4, zero, CorpusHeld4)), false},
		{"ARP cut short", whoHas[:wire.ARPLen-1], false},
		{"ARP over IEEE 802", with(whoHas, func(b []byte) { b[15] = 6 }), false},
		{"ARP for IPv6", with(whoHas, func(b []byte) { b[16], b[17] = 0x86, 0xdd }), false},
		{"ARP with 16-byte addresses", with(whoHas, func(b []byte) { b[19] = 16 }), false},
		{"ARP operation 3", with(whoHas, func(b []byte) { b[21] = 3 }), false},
		{"ARP who-has VLAN-tagged", tagged(whoHas), false},
		{"IPv4 packet to the held address", ipv4To(CorpusHeld4), false},
		{"Ethernet header only", whoHas[:wire.EthernetHeaderLen], false},
		{"13 bytes", whoHas[:13], false},

		{"solicitation", multicast, true},
		{"solicitation padded", pad(multicast, len(multicast)+6), true},
		{"solicitation without source link-layer option", ns(snmMAC, corpusAsker6, snm), true},
		{"unicast solicitation (NUD)", ns(CorpusMAC, corpusAsker6, CorpusHeld6, slla), true},
		{"unicast solicitation without option", ns(CorpusMAC, corpusAsker6, CorpusHeld6), true},
		{"DAD probe", mustFrame(DADSolicitation(corpusAskerMAC, CorpusHeld6)), true},
		{"solicitation with a group link-layer address", ns(snmMAC, corpusAsker6, snm, option(1, net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1})), true},
		{"solicitation with a nonce after the option", ns(snmMAC, corpusAsker6, snm, slla, nonce()), true},
		{"solicitation with a nonce before the option", ns(snmMAC, corpusAsker6, snm, nonce(), slla), true},
		{"solicitation with two source options", ns(snmMAC, corpusAsker6, snm, slla, option(1, net.HardwareAddr{0x02, 0, 0x5e, 0, 0x53, 0x33})), true},
		{"solicitation with a 16-byte source option", ns(snmMAC, corpusAsker6, snm, longSourceOption()), true},
		{"solicitation with 1,400 bytes of options", ns(snmMAC, corpusAsker6, snm, slla, bulk(1400)), true},
		{"solicitation from our MAC", rawNDP(snmMAC, CorpusMAC, corpusAsker6, snm, wire.TypeNeighborSolicitation, CorpusHeld6, slla), false},
		{"solicitation for another address", rawNDP(MulticastMAC(wire.SolicitedNode(corpusOther6)), corpusAskerMAC, corpusAsker6, wire.SolicitedNode(corpusOther6), wire.TypeNeighborSolicitation, corpusOther6, slla), false},
		{"solicitation to another group", ns(snmMAC, corpusAsker6, wire.SolicitedNode(corpusOther6), slla), false},
		{"solicitation to all nodes", ns(MulticastMAC(wire.AllNodes), corpusAsker6, wire.AllNodes, slla), false},
		{"DAD probe with a source option", ns(snmMAC, unspec, snm, slla), false},
		{"DAD probe to the address itself", ns(CorpusMAC, unspec, CorpusHeld6), false},
		{"solicitation hop limit 254", refix(multicast, func(b []byte) { b[ip6+7] = 254 }), false},
		{"solicitation with a bad checksum", with(multicast, func(b []byte) { b[icmp+3] ^= 0xff }), false},
		{"solicitation code 1", refix(multicast, func(b []byte) { b[icmp+1] = 1 }), false},
		{"solicitation for a group", rawNDP(snmMAC, corpusAskerMAC, corpusAsker6, snm, wire.TypeNeighborSolicitation, snm, slla), false},
		{"solicitation for an IPv4-mapped address", rawNDP(snmMAC, corpusAskerMAC, corpusAsker6, snm, wire.TypeNeighborSolicitation, netip.AddrFrom16(CorpusHeld4.As16()), slla), false},
		{"option of length 0", refix(multicast, func(b []byte) { b[opt+1] = 0 }), false},
		{"option past the message", refix(multicast, func(b []byte) { b[opt+1] = 2 }), false},
		{"a lone option byte", ns(snmMAC, corpusAsker6, snm, []byte{1}), false},
		{"no room for the target", refix(cutPayload(multicast, 20), func([]byte) {}), false},
		{"payload past the frame", multicast[:len(multicast)-1], false},
		{"jumbogram", with(multicast, func(b []byte) { b[ip6+4], b[ip6+5] = 0, 0 }), false},
		{"hop-by-hop header", with(multicast, func(b []byte) { b[ip6+6] = 0 }), false},
		{"UDP", with(multicast, func(b []byte) { b[ip6+6] = 17 }), false},
		{"IPv6 version 4", with(multicast, func(b []byte) { b[ip6] = 0x40 }), false},
		{"IPv6 header cut short", multicast[:wire.ICMPv6Offset-1], false},
		{"advertisement", mustFrame(NeighborAdvertisement(CorpusMAC, corpusAskerMAC, CorpusHeld6, CorpusHeld6, true)), false},
		{"echo request", rawICMP(CorpusMAC, corpusAskerMAC, corpusAsker6, CorpusHeld6, []byte{128, 0, 0, 0, 0, 1, 0, 1}), false},
		{"solicitation VLAN-tagged", tagged(multicast), false},
	}
}

func mustFrame(b []byte, err error) []byte {
	if err != nil {
		panic("wiretest: a corpus frame does not build: " + err.Error())
	}
	return b
}

func with(b []byte, edit func(b []byte)) []byte {
	b = append([]byte(nil), b...)
	edit(b)
	return b
}

// refix edits an NDP frame and puts its checksum right again, so that the
// edit is the one thing wrong with it.
func refix(b []byte, edit func(b []byte)) []byte {
	b = with(b, edit)
	src := netip.AddrFrom16([16]byte(b[wire.EthernetHeaderLen+8:]))
	dst := netip.AddrFrom16([16]byte(b[wire.EthernetHeaderLen+24:]))
	plen := int(binary.BigEndian.Uint16(b[wire.EthernetHeaderLen+4:]))
	m := b[wire.ICMPv6Offset : wire.ICMPv6Offset+plen]
	m[2], m[3] = 0, 0
	binary.BigEndian.PutUint16(m[2:], wire.Checksum(src, dst, m))
	return b
}

func pad(b []byte, n int) []byte { return append(append([]byte(nil), b...), make([]byte, n-len(b))...) }

// tagged inserts an 802.1Q tag (VLAN 100) after b's addresses.
func tagged(b []byte) []byte {
	out := append([]byte(nil), b[:12]...)
	out = append(out, 0x81, 0x00, 0x00, 100)
	return append(out, b[12:]...)
}

// cutPayload shortens an NDP frame's message to n bytes.
func cutPayload(b []byte, n int) []byte {
	b = append([]byte(nil), b[:wire.ICMPv6Offset+n]...)
	binary.BigEndian.PutUint16(b[wire.EthernetHeaderLen+4:], uint16(n))
	return b
}

// option is an NDP link-layer address option of the given type.
func option(typ byte, mac net.HardwareAddr) []byte {
	return append([]byte{typ, 1}, mac...)
}

// nonce is an RFC 3971 nonce option (type 14), as enhanced DAD sends it.
func nonce() []byte { return []byte{14, 1, 1, 2, 3, 4, 5, 6} }

// longSourceOption is a 16-byte source link-layer option (length 2), as
// another link type's would be: it still starts with the address.
func longSourceOption() []byte {
	return append(append([]byte{1, 2}, corpusAskerMAC...), make([]byte, 8)...)
}

// bulk is n bytes (a multiple of 8) of options of an unknown type, which a
// receiver skips.
func bulk(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		b[i], b[i+1] = 200, 1
	}
	return b
}

// rawNDP builds a neighbor solicitation or advertisement frame byte by
// byte, options as given (the builders of mdlayher/ndp refuse the odd ones
// the corpus needs).
func rawNDP(ethDst, ethSrc net.HardwareAddr, src, dst netip.Addr, typ uint8, target netip.Addr, opts ...[]byte) []byte {
	m := make([]byte, 24)
	m[0] = typ
	t := target.As16()
	copy(m[8:], t[:])
	for _, o := range opts {
		m = append(m, o...)
	}
	return rawICMP(ethDst, ethSrc, src, dst, m)
}

// rawICMP wraps ICMPv6 message m (its checksum filled in here) in IPv6
// with hop limit 255 and Ethernet.
func rawICMP(ethDst, ethSrc net.HardwareAddr, src, dst netip.Addr, m []byte) []byte {
	binary.BigEndian.PutUint16(m[2:], wire.Checksum(src, dst, m))
	b := make([]byte, wire.ICMPv6Offset, wire.ICMPv6Offset+len(m))
	copy(b[0:6], ethDst)
	copy(b[6:12], ethSrc)
	binary.BigEndian.PutUint16(b[12:], wire.EtherTypeIPv6)
	ip := b[wire.EthernetHeaderLen:]
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:], uint16(len(m)))
	ip[6], ip[7] = protoICMPv6, 255
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	return append(b, m...)
}

// ipv4To is a minimal IPv4 packet (UDP, no payload) to dst.
func ipv4To(dst netip.Addr) []byte {
	b := make([]byte, wire.EthernetHeaderLen+28)
	copy(b[0:6], CorpusMAC)
	copy(b[6:12], corpusAskerMAC)
	b[12], b[13] = 0x08, 0x00
	ip := b[wire.EthernetHeaderLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 28)
	s, d := corpusAsker4.As4(), dst.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	return b
}
