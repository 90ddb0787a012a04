package wiretest_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"
)

// decoded is a frame as gopacket, not the package under test, reads it.
type decoded struct {
	eth  *layers.Ethernet
	arp  *layers.ARP
	ip6  *layers.IPv6
	icmp *layers.ICMPv6
	ns   *layers.ICMPv6NeighborSolicitation
	na   *layers.ICMPv6NeighborAdvertisement
}

func decode(t *testing.T, frame []byte) decoded {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket cannot decode the frame: %v\n% x", el.Error(), frame)
	}
	var d decoded
	if l, ok := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); ok {
		d.eth = l
	}
	if l, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
		d.arp = l
	}
	if l, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
		d.ip6 = l
	}
	if l, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		d.icmp = l
	}
	if l, ok := p.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation); ok {
		d.ns = l
	}
	if l, ok := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement); ok {
		d.na = l
	}
	if d.eth == nil {
		t.Fatalf("gopacket finds no Ethernet layer in % x", frame)
	}
	return d
}

func ip(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

func addrOf(t *testing.T, b net.IP) netip.Addr {
	t.Helper()
	a, ok := netip.AddrFromSlice(b)
	if !ok {
		t.Fatalf("not an address: %v", b)
	}
	return a
}

// serialize builds a frame with gopacket, lengths and checksums computed.
func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		t.Fatalf("gopacket serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// ndpSpec describes an IPv6 frame carrying one ICMPv6 message, built by
// gopacket.
type ndpSpec struct {
	ethDst, ethSrc net.HardwareAddr
	src, dst       netip.Addr
	hopLimit       uint8
	typ, code      uint8
	target         netip.Addr
	// lla is the link-layer address option, of type source for a
	// solicitation and target for an advertisement; nil leaves it out.
	lla   net.HardwareAddr
	flags uint8 // advertisement flags: 0x80 R, 0x40 S, 0x20 O
	// body, when set, replaces the message after the ICMPv6 header.
	body []byte
}

func buildNDP(t testing.TB, s ndpSpec) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: s.ethSrc, DstMAC: s.ethDst, EthernetType: layers.EthernetTypeIPv6}
	ip6 := &layers.IPv6{Version: 6, HopLimit: s.hopLimit, NextHeader: layers.IPProtocolICMPv6, SrcIP: ip(s.src), DstIP: ip(s.dst)}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(s.typ, s.code)}
	if err := icmp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	var msg gopacket.SerializableLayer
	switch {
	case s.body != nil:
		msg = gopacket.Payload(s.body)
	case s.typ == wire.TypeNeighborSolicitation:
		ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: ip(s.target)}
		if s.lla != nil {
			ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: s.lla}}
		}
		msg = ns
	case s.typ == wire.TypeNeighborAdvertisement:
		na := &layers.ICMPv6NeighborAdvertisement{Flags: s.flags, TargetAddress: ip(s.target)}
		if s.lla != nil {
			na.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: s.lla}}
		}
		msg = na
	default:
		t.Fatalf("buildNDP: no body for type %d", s.typ)
	}
	return serialize(t, eth, ip6, icmp, msg)
}

// solicitation is a well-formed multicast solicitation for wiretest.VIP6 from wiretest.Peer6
// with a source link-layer address option, as a kernel sends it.
func solicitation() ndpSpec {
	return ndpSpec{
		ethDst: wiretest.MulticastMAC(wiretest.SNM6), ethSrc: wiretest.PeerMAC,
		src: wiretest.Peer6, dst: wiretest.SNM6, hopLimit: 255,
		typ: wire.TypeNeighborSolicitation, target: wiretest.VIP6, lla: wiretest.PeerMAC,
	}
}

func TestARPBuilders(t *testing.T) {
	tests := []struct {
		name      string
		build     func() ([]byte, error)
		ethDst    net.HardwareAddr
		op        uint16
		senderMAC net.HardwareAddr
		senderIP  netip.Addr
		targetMAC net.HardwareAddr
		targetIP  netip.Addr
	}{
		{
			name:   "announcement is a request with a zero target MAC",
			build:  func() ([]byte, error) { return wiretest.ARPAnnouncement(wiretest.OurMAC, wiretest.VIP4) },
			ethDst: wire.Broadcast, op: layers.ARPRequest,
			senderMAC: wiretest.OurMAC, senderIP: wiretest.VIP4, targetMAC: wiretest.ZeroMAC, targetIP: wiretest.VIP4,
		},
		{
			name:   "gratuitous reply has a broadcast target MAC",
			build:  func() ([]byte, error) { return wiretest.ARPGratuitousReply(wiretest.OurMAC, wiretest.VIP4) },
			ethDst: wire.Broadcast, op: layers.ARPReply,
			senderMAC: wiretest.OurMAC, senderIP: wiretest.VIP4, targetMAC: wire.Broadcast, targetIP: wiretest.VIP4,
		},
		{
			name: "reply to a request",
			build: func() ([]byte, error) {
				return wiretest.ARPFrame(wiretest.PeerMAC, wiretest.OurMAC, arp.OperationReply, wiretest.OurMAC, wiretest.VIP4, wiretest.PeerMAC, wiretest.Peer4)
			},
			ethDst: wiretest.PeerMAC, op: layers.ARPReply,
			senderMAC: wiretest.OurMAC, senderIP: wiretest.VIP4, targetMAC: wiretest.PeerMAC, targetIP: wiretest.Peer4,
		},
		{
			name: "reply to a probe",
			build: func() ([]byte, error) {
				return wiretest.ARPFrame(wiretest.PeerMAC, wiretest.OurMAC, arp.OperationReply, wiretest.OurMAC, wiretest.VIP4, wiretest.PeerMAC, netip.IPv4Unspecified())
			},
			ethDst: wiretest.PeerMAC, op: layers.ARPReply,
			senderMAC: wiretest.OurMAC, senderIP: wiretest.VIP4, targetMAC: wiretest.PeerMAC, targetIP: netip.IPv4Unspecified(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame, err := tt.build()
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			d := decode(t, frame)
			if d.arp == nil {
				t.Fatalf("gopacket finds no ARP layer in % x", frame)
			}
			if got := d.eth.DstMAC; !bytes.Equal(got, tt.ethDst) {
				t.Errorf("eth dst: got %v, want %v", got, tt.ethDst)
			}
			if got := d.eth.SrcMAC; !bytes.Equal(got, wiretest.OurMAC) {
				t.Errorf("eth src: got %v, want %v", got, wiretest.OurMAC)
			}
			if got := d.eth.EthernetType; got != layers.EthernetTypeARP {
				t.Errorf("ethertype: got %v, want ARP", got)
			}
			a := d.arp
			if a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || a.HwAddressSize != 6 || a.ProtAddressSize != 4 {
				t.Errorf("ARP header: got htype %v ptype %v hlen %d plen %d, want Ethernet IPv4 6 4", a.AddrType, a.Protocol, a.HwAddressSize, a.ProtAddressSize)
			}
			if a.Operation != tt.op {
				t.Errorf("op: got %d, want %d", a.Operation, tt.op)
			}
			if got := net.HardwareAddr(a.SourceHwAddress); !bytes.Equal(got, tt.senderMAC) {
				t.Errorf("sender MAC: got %v, want %v", got, tt.senderMAC)
			}
			if got := addrOf(t, a.SourceProtAddress); got != tt.senderIP {
				t.Errorf("sender IP: got %v, want %v", got, tt.senderIP)
			}
			if got := net.HardwareAddr(a.DstHwAddress); !bytes.Equal(got, tt.targetMAC) {
				t.Errorf("target MAC: got %v, want %v", got, tt.targetMAC)
			}
			if got := addrOf(t, a.DstProtAddress); got != tt.targetIP {
				t.Errorf("target IP: got %v, want %v", got, tt.targetIP)
			}

			// ParseARP reads back what was built.
			info, err := wiretest.ParseARP(frame)
			if err != nil {
				t.Fatalf("ParseARP: %v", err)
			}
			p := info.Packet
			if !bytes.Equal(info.EthDst, tt.ethDst) || !bytes.Equal(info.EthSrc, wiretest.OurMAC) {
				t.Errorf("ParseARP eth: got dst %v src %v, want dst %v src %v", info.EthDst, info.EthSrc, tt.ethDst, wiretest.OurMAC)
			}
			if uint16(p.Operation) != tt.op || !bytes.Equal(p.SenderHardwareAddr, tt.senderMAC) || p.SenderIP != tt.senderIP ||
				!bytes.Equal(p.TargetHardwareAddr, tt.targetMAC) || p.TargetIP != tt.targetIP {
				t.Errorf("ParseARP: got op %d sender (%v, %v) target (%v, %v), want op %d sender (%v, %v) target (%v, %v)",
					p.Operation, p.SenderHardwareAddr, p.SenderIP, p.TargetHardwareAddr, p.TargetIP,
					tt.op, tt.senderMAC, tt.senderIP, tt.targetMAC, tt.targetIP)
			}
		})
	}
}

func TestARPFrameRefusesBadInput(t *testing.T) {
	tests := []struct {
		name      string
		senderMAC net.HardwareAddr
		senderIP  netip.Addr
		targetIP  netip.Addr
	}{
		{"IPv6 sender", wiretest.OurMAC, wiretest.VIP6, wiretest.Peer4},
		{"IPv6 target", wiretest.OurMAC, wiretest.VIP4, wiretest.Peer6},
		{"zero sender", wiretest.OurMAC, netip.Addr{}, wiretest.Peer4},
		{"short MAC", net.HardwareAddr{1, 2, 3}, wiretest.VIP4, wiretest.Peer4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if b, err := wiretest.ARPFrame(wiretest.PeerMAC, wiretest.OurMAC, arp.OperationReply, tt.senderMAC, tt.senderIP, wiretest.PeerMAC, tt.targetIP); err == nil {
				t.Errorf("got frame % x, want an error", b)
			}
		})
	}
}

// gopacketARP builds an ARP frame with gopacket, as a peer sends it.
func gopacketARP(t testing.TB, op uint16, senderMAC net.HardwareAddr, senderIP netip.Addr, targetMAC net.HardwareAddr, targetIP netip.Addr) []byte {
	t.Helper()
	dst := wire.Broadcast
	if op == layers.ARPReply {
		dst = targetMAC
	}
	return serialize(t,
		&layers.Ethernet{SrcMAC: senderMAC, DstMAC: dst, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{
			AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
			HwAddressSize: 6, ProtAddressSize: 4, Operation: op,
			SourceHwAddress: senderMAC, SourceProtAddress: senderIP.AsSlice(),
			DstHwAddress: targetMAC, DstProtAddress: targetIP.AsSlice(),
		})
}

func TestParseARPReadsPeerFrames(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
		op    arp.Operation
	}{
		{"who-has", gopacketARP(t, layers.ARPRequest, wiretest.PeerMAC, wiretest.Peer4, wiretest.ZeroMAC, wiretest.VIP4), arp.OperationRequest},
		{"probe", gopacketARP(t, layers.ARPRequest, wiretest.PeerMAC, netip.IPv4Unspecified(), wiretest.ZeroMAC, wiretest.VIP4), arp.OperationRequest},
		{"reply", gopacketARP(t, layers.ARPReply, wiretest.PeerMAC, wiretest.Peer4, wiretest.OurMAC, wiretest.VIP4), arp.OperationReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decode(t, tt.frame)
			info, err := wiretest.ParseARP(tt.frame)
			if err != nil {
				t.Fatalf("ParseARP: %v", err)
			}
			p := info.Packet
			if p.Operation != tt.op {
				t.Errorf("op: got %v, want %v", p.Operation, tt.op)
			}
			if !bytes.Equal(info.EthDst, d.eth.DstMAC) || !bytes.Equal(info.EthSrc, d.eth.SrcMAC) {
				t.Errorf("eth: got dst %v src %v, want dst %v src %v", info.EthDst, info.EthSrc, d.eth.DstMAC, d.eth.SrcMAC)
			}
			if !bytes.Equal(p.SenderHardwareAddr, d.arp.SourceHwAddress) || p.SenderIP != addrOf(t, d.arp.SourceProtAddress) {
				t.Errorf("sender: got (%v, %v), want (%v, %v)", p.SenderHardwareAddr, p.SenderIP, net.HardwareAddr(d.arp.SourceHwAddress), net.IP(d.arp.SourceProtAddress))
			}
			if !bytes.Equal(p.TargetHardwareAddr, d.arp.DstHwAddress) || p.TargetIP != addrOf(t, d.arp.DstProtAddress) {
				t.Errorf("target: got (%v, %v), want (%v, %v)", p.TargetHardwareAddr, p.TargetIP, net.HardwareAddr(d.arp.DstHwAddress), net.IP(d.arp.DstProtAddress))
			}
		})
	}
}

func TestParseARPRejects(t *testing.T) {
	good, err := wiretest.ARPAnnouncement(wiretest.OurMAC, wiretest.VIP4)
	if err != nil {
		t.Fatal(err)
	}
	with := func(off int, v ...byte) []byte {
		b := append([]byte(nil), good...)
		copy(b[off:], v)
		return b
	}
	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"IPv4 ethertype", with(12, 0x08, 0x00), wiretest.ErrNotARP},
		{"IPv6 ethertype", with(12, 0x86, 0xdd), wiretest.ErrNotARP},
		{"IEEE 802 hardware type", with(14, 0x00, 0x06), wiretest.ErrNotARP},
		{"IPv6 protocol type", with(16, 0x86, 0xdd), wiretest.ErrNotARP},
		{"8-byte hardware addresses", with(18, 8), wiretest.ErrNotARP},
		{"16-byte protocol addresses", with(19, 16), wiretest.ErrNotARP},
		{"no ethernet header", good[:13], wiretest.ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := wiretest.ParseARP(tt.frame)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %+v, %v; want error %v", info, err, tt.want)
			}
		})
	}
}

func TestParseARPTruncated(t *testing.T) {
	frame, err := wiretest.ARPGratuitousReply(wiretest.OurMAC, wiretest.VIP4)
	if err != nil {
		t.Fatal(err)
	}
	// 14 bytes of Ethernet header and 28 of ARP; the rest is the padding up
	// to the Ethernet minimum, which a frame may or may not carry.
	const arpEnd = 14 + 28
	if len(frame) < arpEnd {
		t.Fatalf("frame is %d bytes, want at least %d", len(frame), arpEnd)
	}
	for n := 0; n <= len(frame); n++ {
		_, err := wiretest.ParseARP(frame[:n:n]) // capacity n: a read past n panics
		switch {
		case n < 14 && !errors.Is(err, wiretest.ErrTruncated):
			t.Errorf("%d bytes: got error %v, want %v", n, err, wiretest.ErrTruncated)
		case n < arpEnd && err == nil:
			t.Errorf("%d bytes: got no error, want one", n)
		case n >= arpEnd && err != nil:
			t.Errorf("%d bytes (the whole ARP packet): got error %v, want none", n, err)
		}
	}
}

func TestNDPBuilders(t *testing.T) {
	tests := []struct {
		name      string
		dstMAC    net.HardwareAddr
		dst       netip.Addr
		solicited bool
	}{
		{"solicited to the asker", wiretest.PeerMAC, wiretest.Peer6, true},
		{"unsolicited to all nodes", wiretest.MulticastMAC(wire.AllNodes), wire.AllNodes, false},
		{"unsolicited to all routers", wiretest.MulticastMAC(wire.AllRouters), wire.AllRouters, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame, err := wiretest.NeighborAdvertisement(tt.dstMAC, wiretest.OurMAC, wiretest.VIP6, tt.dst, tt.solicited)
			if err != nil {
				t.Fatalf("NeighborAdvertisement: %v", err)
			}
			d := decode(t, frame)
			if !bytes.Equal(d.eth.DstMAC, tt.dstMAC) || !bytes.Equal(d.eth.SrcMAC, wiretest.OurMAC) || d.eth.EthernetType != layers.EthernetTypeIPv6 {
				t.Errorf("eth: got dst %v src %v type %v, want dst %v src %v type IPv6", d.eth.DstMAC, d.eth.SrcMAC, d.eth.EthernetType, tt.dstMAC, wiretest.OurMAC)
			}
			if d.ip6 == nil || d.icmp == nil || d.na == nil {
				t.Fatalf("gopacket finds IPv6 %v, ICMPv6 %v, NA %v; want all three", d.ip6 != nil, d.icmp != nil, d.na != nil)
			}
			if d.ip6.Version != 6 || d.ip6.HopLimit != 255 || d.ip6.NextHeader != layers.IPProtocolICMPv6 {
				t.Errorf("IPv6: got version %d hop limit %d next header %d, want 6 255 58", d.ip6.Version, d.ip6.HopLimit, d.ip6.NextHeader)
			}
			if want := len(frame) - wire.ICMPv6Offset; int(d.ip6.Length) != want {
				t.Errorf("payload length: got %d, want %d", d.ip6.Length, want)
			}
			if got := addrOf(t, d.ip6.SrcIP); got != wiretest.VIP6 {
				t.Errorf("IPv6 src: got %v, want %v", got, wiretest.VIP6)
			}
			if got := addrOf(t, d.ip6.DstIP); got != tt.dst {
				t.Errorf("IPv6 dst: got %v, want %v", got, tt.dst)
			}
			if got, want := d.icmp.TypeCode, layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0); got != want {
				t.Errorf("ICMPv6 type/code: got %v, want %v", got, want)
			}
			if d.na.Router() || d.na.Solicited() != tt.solicited || !d.na.Override() {
				t.Errorf("flags: got R=%t S=%t O=%t, want R=false S=%t O=true", d.na.Router(), d.na.Solicited(), d.na.Override(), tt.solicited)
			}
			if got := addrOf(t, d.na.TargetAddress); got != wiretest.VIP6 {
				t.Errorf("target: got %v, want %v", got, wiretest.VIP6)
			}
			if len(d.na.Options) != 1 || d.na.Options[0].Type != layers.ICMPv6OptTargetAddress || !bytes.Equal(d.na.Options[0].Data, wiretest.OurMAC) {
				t.Errorf("options: got %v, want one target link-layer address %v", d.na.Options, wiretest.OurMAC)
			}

			// gopacket builds the same message from the same fields, with its
			// own checksum code: the frames must be identical, checksum and
			// all.
			var flags uint8 = 0x20
			if tt.solicited {
				flags |= 0x40
			}
			want := buildNDP(t, ndpSpec{
				ethDst: tt.dstMAC, ethSrc: wiretest.OurMAC, src: wiretest.VIP6, dst: tt.dst, hopLimit: 255,
				typ: wire.TypeNeighborAdvertisement, target: wiretest.VIP6, lla: wiretest.OurMAC, flags: flags,
			})
			if wd := decode(t, want); d.icmp.Checksum != wd.icmp.Checksum {
				t.Errorf("checksum: got %#04x, gopacket computes %#04x", d.icmp.Checksum, wd.icmp.Checksum)
			}
			if !bytes.Equal(frame, want) {
				t.Errorf("frame differs from gopacket's:\n got % x\nwant % x", frame, want)
			}

			// ParseNDP reads it back.
			info, err := wiretest.ParseNDP(frame)
			if err != nil {
				t.Fatalf("ParseNDP: %v", err)
			}
			na, ok := info.Message.(*ndp.NeighborAdvertisement)
			if !ok {
				t.Fatalf("ParseNDP message: got %T, want *ndp.NeighborAdvertisement", info.Message)
			}
			if info.Src != wiretest.VIP6 || info.Dst != tt.dst || info.HopLimit != 255 || !bytes.Equal(info.EthDst, tt.dstMAC) || !bytes.Equal(info.EthSrc, wiretest.OurMAC) {
				t.Errorf("ParseNDP: got %v > %v hop %d eth %v > %v, want %v > %v hop 255 eth %v > %v",
					info.Src, info.Dst, info.HopLimit, info.EthSrc, info.EthDst, wiretest.VIP6, tt.dst, wiretest.OurMAC, tt.dstMAC)
			}
			if na.Router || na.Solicited != tt.solicited || !na.Override || na.TargetAddress != wiretest.VIP6 || !bytes.Equal(wiretest.TargetLinkLayer(na.Options), wiretest.OurMAC) {
				t.Errorf("ParseNDP NA: got %+v, want S=%t O=true target %v TLLA %v", na, tt.solicited, wiretest.VIP6, wiretest.OurMAC)
			}
		})
	}
}

func TestNDPFrameSolicitation(t *testing.T) {
	ns := &ndp.NeighborSolicitation{
		TargetAddress: wiretest.VIP6,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: wiretest.PeerMAC}},
	}
	frame, err := wiretest.NDPFrame(wiretest.MulticastMAC(wiretest.SNM6), wiretest.PeerMAC, wiretest.Peer6, wiretest.SNM6, ns)
	if err != nil {
		t.Fatalf("NDPFrame: %v", err)
	}
	want := buildNDP(t, solicitation())
	if !bytes.Equal(frame, want) {
		t.Errorf("frame differs from gopacket's:\n got % x\nwant % x", frame, want)
	}
	d := decode(t, frame)
	if d.ns == nil {
		t.Fatalf("gopacket finds no neighbor solicitation in % x", frame)
	}
	if got := addrOf(t, d.ns.TargetAddress); got != wiretest.VIP6 {
		t.Errorf("target: got %v, want %v", got, wiretest.VIP6)
	}
}

func TestNDPFrameRefusesBadMessage(t *testing.T) {
	bad := &ndp.NeighborAdvertisement{TargetAddress: wiretest.VIP4}
	if b, err := wiretest.NDPFrame(wiretest.PeerMAC, wiretest.OurMAC, wiretest.VIP6, wiretest.Peer6, bad); err == nil {
		t.Errorf("got frame % x for an IPv4 target, want an error", b)
	}
}

func TestParseNDPAcceptsSolicitations(t *testing.T) {
	tests := []struct {
		name string
		spec func(s *ndpSpec)
	}{
		{"multicast with source link-layer address", func(s *ndpSpec) {}},
		{"multicast without options", func(s *ndpSpec) { s.lla = nil }},
		{"unicast NUD with source link-layer address", func(s *ndpSpec) {
			s.dst, s.ethDst = wiretest.VIP6, wiretest.OurMAC
		}},
		{"unicast NUD without options", func(s *ndpSpec) {
			s.dst, s.ethDst, s.lla = wiretest.VIP6, wiretest.OurMAC, nil
		}},
		{"DAD from ::", func(s *ndpSpec) {
			s.src, s.lla = netip.IPv6Unspecified(), nil
		}},
		{"link-local source", func(s *ndpSpec) {
			s.src = netip.MustParseAddr("fe80::200:5eff:fe00:5302")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := solicitation()
			tt.spec(&s)
			frame := buildNDP(t, s)
			info, err := wiretest.ParseNDP(frame)
			if err != nil {
				t.Fatalf("ParseNDP: %v\n% x", err, frame)
			}
			if info.Src != s.src || info.Dst != s.dst || info.HopLimit != 255 {
				t.Errorf("IPv6: got %v > %v hop %d, want %v > %v hop 255", info.Src, info.Dst, info.HopLimit, s.src, s.dst)
			}
			if !bytes.Equal(info.EthDst, s.ethDst) || !bytes.Equal(info.EthSrc, s.ethSrc) {
				t.Errorf("eth: got %v > %v, want %v > %v", info.EthSrc, info.EthDst, s.ethSrc, s.ethDst)
			}
			ns, ok := info.Message.(*ndp.NeighborSolicitation)
			if !ok {
				t.Fatalf("message: got %T, want *ndp.NeighborSolicitation", info.Message)
			}
			if ns.TargetAddress != s.target {
				t.Errorf("target: got %v, want %v", ns.TargetAddress, s.target)
			}
			if got := wiretest.SourceLinkLayer(ns.Options); !bytes.Equal(got, s.lla) {
				t.Errorf("source link-layer address: got %v, want %v", got, s.lla)
			}
			if got := wiretest.TargetLinkLayer(ns.Options); got != nil {
				t.Errorf("target link-layer address: got %v, want none", got)
			}
		})
	}
}

func TestParseNDPAcceptsTrailingBytes(t *testing.T) {
	// Bytes after the IPv6 payload (Ethernet padding, a trailer) are not
	// part of the message.
	frame := append(buildNDP(t, solicitation()), 0, 0, 0, 0, 0xde, 0xad)
	if _, err := wiretest.ParseNDP(frame); err != nil {
		t.Errorf("got %v, want no error", err)
	}
}

func TestParseNDPRejects(t *testing.T) {
	ns := buildNDP(t, solicitation())
	mutate := func(b []byte, f func(b []byte)) []byte {
		b = append([]byte(nil), b...)
		f(b)
		return b
	}
	setPayloadLen := func(n uint16) func(b []byte) {
		return func(b []byte) { binary.BigEndian.PutUint16(b[wire.EthernetHeaderLen+4:], n) }
	}
	spec := func(f func(s *ndpSpec)) []byte {
		s := solicitation()
		f(&s)
		return buildNDP(t, s)
	}
	udp6 := func() []byte {
		ip6 := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolUDP, SrcIP: ip(wiretest.Peer6), DstIP: ip(wiretest.VIP6)}
		udp := &layers.UDP{SrcPort: 5353, DstPort: 5353}
		if err := udp.SetNetworkLayerForChecksum(ip6); err != nil {
			t.Fatal(err)
		}
		return serialize(t, &layers.Ethernet{SrcMAC: wiretest.PeerMAC, DstMAC: wiretest.OurMAC, EthernetType: layers.EthernetTypeIPv6}, ip6, udp, gopacket.Payload("hello"))
	}
	arpFrame, err := wiretest.ARPAnnouncement(wiretest.OurMAC, wiretest.VIP4)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"hop limit 254", spec(func(s *ndpSpec) { s.hopLimit = 254 }), wiretest.ErrHopLimit},
		{"hop limit 1", spec(func(s *ndpSpec) { s.hopLimit = 1 }), wiretest.ErrHopLimit},
		{"checksum off by one", mutate(ns, func(b []byte) { b[wire.ICMPv6Offset+3]++ }), wiretest.ErrChecksum},
		{"target changed after checksumming", mutate(ns, func(b []byte) { b[wire.ICMPv6Offset+8+15] ^= 0x01 }), wiretest.ErrChecksum},
		{"source changed after checksumming", mutate(ns, func(b []byte) { b[wire.EthernetHeaderLen+8+15] ^= 0x01 }), wiretest.ErrChecksum},
		{"code 1", spec(func(s *ndpSpec) { s.code = 1 }), wiretest.ErrBadICMPCode},
		{"ARP ethertype", arpFrame, wiretest.ErrNotNDP},
		{"UDP", udp6(), wiretest.ErrNotNDP},
		{"IP version 4 in an IPv6 ethertype", mutate(ns, func(b []byte) { b[wire.EthernetHeaderLen] = 0x45 }), wiretest.ErrNotNDP},
		{"hop-by-hop header first", mutate(ns, func(b []byte) { b[wire.EthernetHeaderLen+6] = 0 }), wiretest.ErrNotNDP},
		{"echo request", spec(func(s *ndpSpec) { s.typ, s.body = 128, []byte{0, 1, 0, 1} }), wiretest.ErrNotNDP},
		{"router advertisement", spec(func(s *ndpSpec) { s.typ, s.body = 134, make([]byte, 12) }), wiretest.ErrNotNDP},
		{"solicitation too short for a target", spec(func(s *ndpSpec) { s.body = make([]byte, 12) }), wiretest.ErrBadMessage},
		{"option of length 0", spec(func(s *ndpSpec) {
			s.body = append(append(make([]byte, 4), wiretest.VIP6.AsSlice()...), 1, 0, 0, 0, 0, 0, 0, 0)
		}), wiretest.ErrBadMessage},
		{"IPv4-mapped target", spec(func(s *ndpSpec) { s.target = netip.AddrFrom16(wiretest.VIP4.As16()) }), wiretest.ErrBadMessage},
		{"payload length one more than the frame", mutate(ns, setPayloadLen(uint16(len(ns)-wire.ICMPv6Offset+1))), wiretest.ErrTruncated},
		{"payload length 65535", mutate(ns, setPayloadLen(0xffff)), wiretest.ErrTruncated},
		{"payload length 0", mutate(ns, setPayloadLen(0)), wiretest.ErrTruncated},
		{"payload length 3", mutate(ns, setPayloadLen(3)), wiretest.ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := wiretest.ParseNDP(tt.frame)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %+v, %v; want error %v", info, err, tt.want)
			}
			if info.Message != nil {
				t.Errorf("got message %+v with error %v, want none", info.Message, err)
			}
		})
	}
}

func TestParseNDPTruncated(t *testing.T) {
	frames := map[string][]byte{
		"solicitation":  buildNDP(t, solicitation()),
		"advertisement": must(wiretest.NeighborAdvertisement(wiretest.PeerMAC, wiretest.OurMAC, wiretest.VIP6, wiretest.Peer6, true)),
	}
	for name, frame := range frames {
		t.Run(name, func(t *testing.T) {
			for n := 0; n < len(frame); n++ {
				// Capacity n too, so that a read past n panics instead of
				// seeing the rest of the frame.
				if _, err := wiretest.ParseNDP(frame[:n:n]); !errors.Is(err, wiretest.ErrTruncated) {
					t.Errorf("%d of %d bytes: got error %v, want %v", n, len(frame), err, wiretest.ErrTruncated)
				}
			}
			if _, err := wiretest.ParseNDP(frame); err != nil {
				t.Errorf("whole frame: got error %v, want none", err)
			}
		})
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestChecksum(t *testing.T) {
	tests := []struct {
		name     string
		src, dst netip.Addr
		msg      []byte
		want     uint16
	}{
		// Pseudo-header alone: length 0 and next header 58 sum to 0x003a.
		{"empty message, zero addresses", netip.IPv6Unspecified(), netip.IPv6Unspecified(), nil, 0xffc5},
		// fe80+0001 + ff02+0001 + length 4 + 58 + 8800 = 0x285c2,
		// folded 0x85c4, inverted 0x7a3b.
		{"NA header, link-local to all nodes", netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::1"), []byte{0x88, 0, 0, 0}, 0x7a3b},
		// An odd last byte counts as the high byte of a word: 0x0100 +
		// length 1 + 58 = 0x013b, inverted 0xfec4.
		{"odd length", netip.IPv6Unspecified(), netip.IPv6Unspecified(), []byte{0x01}, 0xfec4},
		// 0xff + length 3 + 58 + 0x1234 + 0x5600.
		{"odd length, three bytes", netip.IPv6Unspecified(), netip.IPv6Unspecified(), []byte{0x12, 0x34, 0x56}, ^uint16(0x1234 + 0x5600 + 3 + 58)},
		// All-ones addresses make the sum carry many times; the fold must
		// not lose any carry: 16 address words of 0xffff, one message word
		// of 0xffff, length 2 and 58 are 17*0xffff + 60 = 0x11002b,
		// folded 0x003c, inverted 0xffc3.
		{"carries", netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), []byte{0xff, 0xff}, 0xffc3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wire.Checksum(tt.src, tt.dst, tt.msg); got != tt.want {
				t.Errorf("got %#04x, want %#04x", got, tt.want)
			}
		})
	}
}

func TestChecksumVerifiesGopacketMessages(t *testing.T) {
	// Over a message with a right checksum in place the sum is 0; over any
	// single-bit change it is not.
	for _, s := range []ndpSpec{
		solicitation(),
		{ethDst: wiretest.PeerMAC, ethSrc: wiretest.OurMAC, src: wiretest.VIP6, dst: wiretest.Peer6, hopLimit: 255, typ: wire.TypeNeighborAdvertisement, target: wiretest.VIP6, lla: wiretest.OurMAC, flags: 0x60},
		{ethDst: wiretest.OurMAC, ethSrc: wiretest.PeerMAC, src: wiretest.Peer6, dst: wiretest.VIP6, hopLimit: 255, typ: 128, body: []byte{0, 1, 0, 2, 'o', 'd', 'd'}},
	} {
		frame := buildNDP(t, s)
		msg := frame[wire.ICMPv6Offset:]
		if got := wire.Checksum(s.src, s.dst, msg); got != 0 {
			t.Errorf("type %d: got %#04x over a message with gopacket's checksum, want 0", s.typ, got)
		}
		msg[len(msg)-1] ^= 0x80
		if got := wire.Checksum(s.src, s.dst, msg); got == 0 {
			t.Errorf("type %d: got 0 over a corrupted message, want non-zero", s.typ)
		}
	}
}

func TestMulticastMAC(t *testing.T) {
	snm, err := ndp.SolicitedNodeMulticast(netip.MustParseAddr("2001:db8::abcd:1234"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		group netip.Addr
		want  string
	}{
		{wire.AllNodes, "33:33:00:00:00:01"},
		{wire.AllRouters, "33:33:00:00:00:02"},
		{wiretest.SNM6, "33:33:ff:00:00:10"},
		{snm, "33:33:ff:cd:12:34"},
	}
	for _, tt := range tests {
		t.Run(tt.group.String(), func(t *testing.T) {
			if got := wiretest.MulticastMAC(tt.group).String(); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestLinkLayerOptions(t *testing.T) {
	src := &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: wiretest.PeerMAC}
	tgt := &ndp.LinkLayerAddress{Direction: ndp.Target, Addr: wiretest.OtherMAC}
	mtu := ndp.NewMTU(1500)
	tests := []struct {
		name             string
		opts             []ndp.Option
		wantSrc, wantTgt net.HardwareAddr
	}{
		{"none", nil, nil, nil},
		{"source only", []ndp.Option{mtu, src}, wiretest.PeerMAC, nil},
		{"target only", []ndp.Option{tgt, mtu}, nil, wiretest.OtherMAC},
		{"both", []ndp.Option{tgt, src}, wiretest.PeerMAC, wiretest.OtherMAC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wiretest.SourceLinkLayer(tt.opts); !bytes.Equal(got, tt.wantSrc) {
				t.Errorf("SourceLinkLayer: got %v, want %v", got, tt.wantSrc)
			}
			if got := wiretest.TargetLinkLayer(tt.opts); !bytes.Equal(got, tt.wantTgt) {
				t.Errorf("TargetLinkLayer: got %v, want %v", got, tt.wantTgt)
			}
		})
	}
}
