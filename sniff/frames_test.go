package sniff_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"
)

// Frames for the tests, built with gopacket so that they do not depend on
// the decoder they test. Every address is from the documentation prefixes
// (RFC 5737, RFC 3849) and the documentation MAC block (RFC 7042), wiretest's
// where it has one.
var (
	ourMAC    = wire.MAC(wiretest.OurMAC)
	clientMAC = wire.MAC(wiretest.PeerMAC)
	rogueMAC  = wire.MAC(wiretest.OtherMAC)
	otherMAC  = wire.MAC{0x00, 0x00, 0x5e, 0x00, 0x53, 0x04}
	bcastMAC  = wire.MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

	vip4    = wiretest.VIP4
	client4 = netip.MustParseAddr("192.0.2.3")
	zero4   = netip.IPv4Unspecified()

	vip6     = wiretest.VIP6
	client6  = netip.MustParseAddr("2001:db8::3")
	zero6    = netip.IPv6Unspecified()
	allNodes = netip.MustParseAddr("ff02::1")
	snm6     = wiretest.SNM6
)

// ts0 is the capture time the decoder tests give every frame.
var ts0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func hw(m wire.MAC) net.HardwareAddr { return net.HardwareAddr(m[:]) }
func ip(a netip.Addr) net.IP         { return net.IP(a.AsSlice()) }

// multicastMAC is the Ethernet address an IPv6 group maps to (RFC 2464).
func multicastMAC(g netip.Addr) wire.MAC {
	b := g.As16()
	return wire.MAC{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		t.Fatalf("gopacket serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// arpSpec describes an ARP frame for IPv4 over Ethernet.
type arpSpec struct {
	ethDst, ethSrc       wire.MAC
	op                   uint16
	senderMAC, targetMAC wire.MAC
	sender, target       netip.Addr
	// vlans are 802.1Q tags, outermost first; the outermost is sent as
	// 802.1ad (QinQ) when there are two.
	vlans []uint16
}

func buildARP(t testing.TB, s arpSpec) []byte {
	t.Helper()
	ls := ethernet(s.ethDst, s.ethSrc, layers.EthernetTypeARP, s.vlans)
	ls = append(ls, &layers.ARP{
		AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: s.op,
		SourceHwAddress: hw(s.senderMAC), SourceProtAddress: ip(s.sender),
		DstHwAddress: hw(s.targetMAC), DstProtAddress: ip(s.target),
	})
	// gopacket pads to Ethernet's 60-byte minimum; a capture on the
	// sending host sees the frame before the NIC pads it.
	return serialize(t, ls...)[:14+4*len(s.vlans)+28]
}

// ethernet returns the Ethernet header, and VLAN tags if any, for a frame
// carrying payload type et.
func ethernet(dst, src wire.MAC, et layers.EthernetType, vlans []uint16) []gopacket.SerializableLayer {
	eth := &layers.Ethernet{DstMAC: hw(dst), SrcMAC: hw(src), EthernetType: et}
	if len(vlans) == 0 {
		return []gopacket.SerializableLayer{eth}
	}
	ls := []gopacket.SerializableLayer{eth}
	eth.EthernetType = layers.EthernetTypeDot1Q
	if len(vlans) > 1 {
		eth.EthernetType = layers.EthernetTypeQinQ
	}
	for i, id := range vlans {
		next := layers.EthernetTypeDot1Q
		if i == len(vlans)-1 {
			next = et
		}
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: id, Type: next})
	}
	return ls
}

// Who asks, who answers, and who claims, as frames.

func whoHas() arpSpec {
	return arpSpec{ethDst: bcastMAC, ethSrc: clientMAC, op: layers.ARPRequest,
		senderMAC: clientMAC, sender: client4, target: vip4}
}

func probe() arpSpec {
	s := whoHas()
	s.sender = zero4
	return s
}

func announcement(mac wire.MAC) arpSpec {
	return arpSpec{ethDst: bcastMAC, ethSrc: mac, op: layers.ARPRequest,
		senderMAC: mac, sender: vip4, target: vip4}
}

func reply(mac wire.MAC) arpSpec {
	return arpSpec{ethDst: clientMAC, ethSrc: mac, op: layers.ARPReply,
		senderMAC: mac, sender: vip4, targetMAC: clientMAC, target: client4}
}

func gratuitousReply(mac wire.MAC) arpSpec {
	return arpSpec{ethDst: bcastMAC, ethSrc: mac, op: layers.ARPReply,
		senderMAC: mac, sender: vip4, targetMAC: bcastMAC, target: vip4}
}

// ndpSpec describes an Ethernet frame carrying an IPv6 packet with one
// ICMPv6 message, possibly behind extension headers.
type ndpSpec struct {
	ethDst, ethSrc wire.MAC
	src, dst       netip.Addr
	hopLimit       uint8
	typ, code      uint8
	target         netip.Addr
	// lla is the link-layer address option, of type source for a
	// solicitation and target for an advertisement; nil leaves it out.
	lla *wire.MAC
	// nonce puts a nonce option (RFC 3971) before the link-layer option.
	nonce bool
	flags uint8 // advertisement flags: 0x80 R, 0x40 S, 0x20 O
	// ext are the next-header values of extension headers to put between
	// the IPv6 header and the message, in order: 0 hop-by-hop, 60
	// destination options, 44 fragment.
	ext []layers.IPProtocol
	// body, when set, replaces the message after the ICMPv6 header.
	body  []byte
	vlans []uint16
}

// extHeader is an IPv6 extension header laid out by hand: next header,
// length, and padding to 8 bytes (a fragment header has the same size).
type extHeader struct {
	next layers.IPProtocol
}

func (e extHeader) LayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

func (e extHeader) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	bytes, err := b.PrependBytes(8)
	if err != nil {
		return err
	}
	// Length 0 (8 bytes in all), then a PadN option covering the rest.
	copy(bytes, []byte{byte(e.next), 0, 1, 4, 0, 0, 0, 0})
	return nil
}

func buildNDP(t testing.TB, s ndpSpec) []byte {
	t.Helper()
	ls := ethernet(s.ethDst, s.ethSrc, layers.EthernetTypeIPv6, s.vlans)
	ip6 := &layers.IPv6{Version: 6, HopLimit: s.hopLimit, NextHeader: layers.IPProtocolICMPv6, SrcIP: ip(s.src), DstIP: ip(s.dst)}
	ls = append(ls, ip6)
	if len(s.ext) > 0 {
		ip6.NextHeader = s.ext[0]
		for i := range s.ext {
			next := layers.IPProtocolICMPv6
			if i+1 < len(s.ext) {
				next = s.ext[i+1]
			}
			ls = append(ls, extHeader{next: next})
		}
	}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(s.typ, s.code)}
	if err := icmp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	ls = append(ls, icmp)
	var opts layers.ICMPv6Options
	if s.nonce {
		opts = append(opts, layers.ICMPv6Option{Type: 14, Data: []byte{1, 2, 3, 4, 5, 6}})
	}
	switch {
	case s.body != nil:
		ls = append(ls, gopacket.Payload(s.body))
	case s.typ == layers.ICMPv6TypeNeighborSolicitation:
		if s.lla != nil {
			opts = append(opts, layers.ICMPv6Option{Type: layers.ICMPv6OptSourceAddress, Data: hw(*s.lla)})
		}
		ls = append(ls, &layers.ICMPv6NeighborSolicitation{TargetAddress: ip(s.target), Options: opts})
	case s.typ == layers.ICMPv6TypeNeighborAdvertisement:
		if s.lla != nil {
			opts = append(opts, layers.ICMPv6Option{Type: layers.ICMPv6OptTargetAddress, Data: hw(*s.lla)})
		}
		ls = append(ls, &layers.ICMPv6NeighborAdvertisement{Flags: s.flags, TargetAddress: ip(s.target), Options: opts})
	default:
		ls = append(ls, gopacket.Payload(make([]byte, 4)))
	}
	return serialize(t, ls...)
}

func mac(m wire.MAC) *wire.MAC { return &m }

// solicitation is the multicast solicitation a kernel sends to resolve
// vip6: from client6 to vip6's solicited-node group, with a source
// link-layer address option.
func solicitation() ndpSpec {
	return ndpSpec{ethDst: multicastMAC(snm6), ethSrc: clientMAC, src: client6, dst: snm6, hopLimit: 255,
		typ: layers.ICMPv6TypeNeighborSolicitation, target: vip6, lla: mac(clientMAC)}
}

// unreachability is a unicast solicitation, as neighbour unreachability
// detection sends it, without a link-layer option.
func unreachability() ndpSpec {
	return ndpSpec{ethDst: ourMAC, ethSrc: clientMAC, src: client6, dst: vip6, hopLimit: 255,
		typ: layers.ICMPv6TypeNeighborSolicitation, target: vip6}
}

// dad is a duplicate address detection probe for vip6.
func dad(from wire.MAC) ndpSpec {
	return ndpSpec{ethDst: multicastMAC(snm6), ethSrc: from, src: zero6, dst: snm6, hopLimit: 255,
		typ: layers.ICMPv6TypeNeighborSolicitation, target: vip6}
}

// advertisement is an advertisement of vip6 by m: solicited (to client6)
// or unsolicited (to all nodes), with override and a target link-layer
// address option.
func advertisement(m wire.MAC, solicited bool) ndpSpec {
	s := ndpSpec{ethDst: multicastMAC(allNodes), ethSrc: m, src: vip6, dst: allNodes, hopLimit: 255,
		typ: layers.ICMPv6TypeNeighborAdvertisement, target: vip6, lla: mac(m), flags: 0x20}
	if solicited {
		s.ethDst, s.dst, s.flags = clientMAC, client6, 0x60
	}
	return s
}

// icmpOffset returns where the ICMPv6 message of an untagged frame without
// extension headers starts.
const icmpOffset = 14 + 40

// setChecksum writes the ICMPv6 checksum of an untagged frame without
// extension headers whose message starts at icmpOffset.
func setChecksum(frame []byte) {
	icmp := frame[icmpOffset:]
	icmp[2], icmp[3] = 0, 0
	var sum uint32
	for i := 14 + 8; i < 14+40; i += 2 { // source and destination
		sum += uint32(binary.BigEndian.Uint16(frame[i:]))
	}
	sum += uint32(len(icmp)) + 58
	for i := 0; i+1 < len(icmp); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(icmp[i:]))
	}
	if len(icmp)%2 == 1 {
		sum += uint32(icmp[len(icmp)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(icmp[2:], ^uint16(sum))
}
