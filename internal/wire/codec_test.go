package wire_test

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"
)

// wiretest's documentation addresses, as this package's types.
var (
	ourMAC  = wire.MAC(wiretest.OurMAC)
	peerMAC = wire.MAC(wiretest.PeerMAC)

	vip4  = wiretest.VIP4
	peer4 = wiretest.Peer4
	vip6  = wiretest.VIP6
	peer6 = wiretest.Peer6
	snm6  = wiretest.SNM6
)

func hw(m wire.MAC) net.HardwareAddr { return net.HardwareAddr(m[:]) }

func macOf(t *testing.T, b net.HardwareAddr) wire.MAC {
	t.Helper()
	m, ok := wire.MACOf(b)
	if !ok {
		t.Fatalf("not an Ethernet address: %v", b)
	}
	return m
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func putARP(dst, src wire.MAC, a wire.ARP) []byte {
	b := make([]byte, wire.ARPLen)
	return b[:wire.PutARP(b, dst, src, &a)]
}

func putND(dst, src wire.MAC, n wire.ND) []byte {
	b := make([]byte, wire.NDLenWithLinkLayer)
	return b[:wire.PutND(b, dst, src, &n)]
}

// The ARP frames vip sends, and what a peer sends it.
func arpCases() []struct {
	name     string
	dst, src wire.MAC
	a        wire.ARP
} {
	return []struct {
		name     string
		dst, src wire.MAC
		a        wire.ARP
	}{
		{"announcement", wire.BroadcastMAC, ourMAC, wire.ARPAnnouncement(ourMAC, vip4, wire.OpRequest)},
		{"gratuitous reply", wire.BroadcastMAC, ourMAC, wire.ARPAnnouncement(ourMAC, vip4, wire.OpReply)},
		{"probe", wire.BroadcastMAC, ourMAC, wire.ARPProbe(ourMAC, vip4)},
		{"who-has", wire.BroadcastMAC, peerMAC, wire.ARP{Op: wire.OpRequest, SenderMAC: peerMAC, SenderIP: peer4, TargetIP: vip4}},
		{"reply", peerMAC, ourMAC, wire.ARP{Op: wire.OpReply, SenderMAC: ourMAC, SenderIP: vip4, TargetMAC: peerMAC, TargetIP: peer4}},
	}
}

// TestARPAgreesWithMdlayher: a frame PutARP builds reads the same in
// mdlayher/arp and gopacket, and a frame mdlayher builds reads the same in
// Parse.
func TestARPAgreesWithMdlayher(t *testing.T) {
	for _, tt := range arpCases() {
		t.Run(tt.name, func(t *testing.T) {
			frame := putARP(tt.dst, tt.src, tt.a)
			got, err := wiretest.ParseARP(frame)
			if err != nil {
				t.Fatalf("mdlayher refuses PutARP's frame: %v\n% x", err, frame)
			}
			p := got.Packet
			if p.Operation != arp.Operation(tt.a.Op) || macOf(t, p.SenderHardwareAddr) != tt.a.SenderMAC || p.SenderIP != tt.a.SenderIP ||
				macOf(t, p.TargetHardwareAddr) != tt.a.TargetMAC || p.TargetIP != tt.a.TargetIP ||
				macOf(t, got.EthDst) != tt.dst || macOf(t, got.EthSrc) != tt.src {
				t.Errorf("mdlayher reads %+v, want %+v from %v to %v", got, tt.a, tt.src, tt.dst)
			}
			pk := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
			ga, ok := pk.Layer(layers.LayerTypeARP).(*layers.ARP)
			if !ok || ga.Operation != tt.a.Op || wire.MAC(ga.SourceHwAddress) != tt.a.SenderMAC ||
				netip.AddrFrom4([4]byte(ga.SourceProtAddress)) != tt.a.SenderIP || wire.MAC(ga.DstHwAddress) != tt.a.TargetMAC ||
				netip.AddrFrom4([4]byte(ga.DstProtAddress)) != tt.a.TargetIP {
				t.Errorf("gopacket reads %+v, want %+v", ga, tt.a)
			}

			theirs := must(wiretest.ARPFrame(hw(tt.dst), hw(tt.src), arp.Operation(tt.a.Op), hw(tt.a.SenderMAC), tt.a.SenderIP, hw(tt.a.TargetMAC), tt.a.TargetIP))
			for _, mode := range []wire.Mode{wire.Answer, wire.Capture} {
				f, err := wire.Parse(theirs, mode)
				if err != nil {
					t.Fatalf("Parse (mode %d) refuses mdlayher's frame: %v", mode, err)
				}
				want := wire.Frame{EthDst: tt.dst, EthSrc: tt.src, EtherType: wire.EtherTypeARP, ARP: tt.a}
				if f != want {
					t.Errorf("Parse (mode %d):\n got %+v\nwant %+v", mode, f, want)
				}
			}
		})
	}
}

// The NDP frames vip sends, and what a peer sends it.
func ndCases() []struct {
	name     string
	dst, src wire.MAC
	n        wire.ND
} {
	return []struct {
		name     string
		dst, src wire.MAC
		n        wire.ND
	}{
		{"unsolicited advertisement", wire.GroupMAC(wire.AllNodes), ourMAC, wire.Advertisement(ourMAC, vip6, wire.AllNodes, false)},
		{"solicited advertisement", peerMAC, ourMAC, wire.Advertisement(ourMAC, vip6, peer6, true)},
		{"router advertisement without option", peerMAC, ourMAC, wire.ND{Type: wire.TypeNeighborAdvertisement, Src: peer6, Dst: vip6, Target: peer6, Router: true, Solicited: true}},
		{"DAD probe", wire.GroupMAC(snm6), ourMAC, wire.DADProbe(vip6)},
		{"solicitation", wire.GroupMAC(snm6), peerMAC, wire.ND{Type: wire.TypeNeighborSolicitation, Src: peer6, Dst: snm6, Target: vip6, LinkLayer: peerMAC, HasLinkLayer: true}},
		{"unreachability", ourMAC, peerMAC, wire.ND{Type: wire.TypeNeighborSolicitation, Src: peer6, Dst: vip6, Target: vip6}},
	}
}

// TestNDAgreesWithMdlayher: a frame PutND builds reads the same in
// mdlayher/ndp and gopacket, and a frame mdlayher builds reads the same in
// Parse.
func TestNDAgreesWithMdlayher(t *testing.T) {
	for _, tt := range ndCases() {
		t.Run(tt.name, func(t *testing.T) {
			frame := putND(tt.dst, tt.src, tt.n)
			got, err := wiretest.ParseNDP(frame)
			if err != nil {
				t.Fatalf("mdlayher refuses PutND's frame: %v\n% x", err, frame)
			}
			if got.Src != tt.n.Src || got.Dst != tt.n.Dst || got.HopLimit != 255 || macOf(t, got.EthDst) != tt.dst || macOf(t, got.EthSrc) != tt.src {
				t.Errorf("mdlayher reads %+v, want %+v", got, tt.n)
			}
			var msg ndp.Message
			switch m := got.Message.(type) {
			case *ndp.NeighborSolicitation:
				checkLLA(t, m.TargetAddress, wiretest.SourceLinkLayer(m.Options), tt.n)
				if tt.n.Type != wire.TypeNeighborSolicitation {
					t.Errorf("mdlayher reads a solicitation, want type %d", tt.n.Type)
				}
				msg = &ndp.NeighborSolicitation{TargetAddress: m.TargetAddress, Options: m.Options}
			case *ndp.NeighborAdvertisement:
				checkLLA(t, m.TargetAddress, wiretest.TargetLinkLayer(m.Options), tt.n)
				if tt.n.Type != wire.TypeNeighborAdvertisement || m.Router != tt.n.Router || m.Solicited != tt.n.Solicited || m.Override != tt.n.Override {
					t.Errorf("mdlayher reads %+v, want %+v", m, tt.n)
				}
				msg = m
			default:
				t.Fatalf("mdlayher reads %T", got.Message)
			}
			pk := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
			if el := pk.ErrorLayer(); el != nil {
				t.Errorf("gopacket refuses PutND's frame: %v", el.Error())
			}
			if ip6, ok := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6); !ok || ip6.HopLimit != 255 || ip6.NextHeader != layers.IPProtocolICMPv6 {
				t.Errorf("gopacket reads IPv6 %+v, want hop limit 255 and ICMPv6", ip6)
			}

			theirs := must(wiretest.NDPFrame(hw(tt.dst), hw(tt.src), tt.n.Src, tt.n.Dst, msg))
			for _, mode := range []wire.Mode{wire.Answer, wire.Capture} {
				f, err := wire.Parse(theirs, mode)
				if err != nil {
					t.Fatalf("Parse (mode %d) refuses mdlayher's frame: %v", mode, err)
				}
				want := wire.Frame{EthDst: tt.dst, EthSrc: tt.src, EtherType: wire.EtherTypeIPv6, ND: tt.n}
				if f != want {
					t.Errorf("Parse (mode %d):\n got %+v\nwant %+v", mode, f, want)
				}
			}
		})
	}
}

func checkLLA(t *testing.T, target netip.Addr, lla net.HardwareAddr, n wire.ND) {
	t.Helper()
	if target != n.Target {
		t.Errorf("target: got %v, want %v", target, n.Target)
	}
	if (lla != nil) != n.HasLinkLayer || (lla != nil && macOf(t, lla) != n.LinkLayer) {
		t.Errorf("link-layer option: got %v, want %v (%v)", lla, n.LinkLayer, n.HasLinkLayer)
	}
}

// gopacket builds the frames the table of bad input starts from, so that
// each case is one field away from a valid frame.
type ndpSpec struct {
	ethDst, ethSrc wire.MAC
	vlans          []uint16
	src, dst       netip.Addr
	hopLimit       uint8
	typ, code      uint8
	target         netip.Addr
	lla            *wire.MAC
	flags          uint8
	body           []byte // replaces the message after the ICMPv6 header
	hopByHop       bool
}

func ip(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

func buildNDP(t *testing.T, s ndpSpec) []byte {
	t.Helper()
	ls := []gopacket.SerializableLayer{}
	eth := &layers.Ethernet{SrcMAC: hw(s.ethSrc), DstMAC: hw(s.ethDst), EthernetType: layers.EthernetTypeIPv6}
	ls = append(ls, eth)
	if len(s.vlans) > 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		for i, id := range s.vlans {
			next := layers.EthernetTypeDot1Q
			if i == len(s.vlans)-1 {
				next = layers.EthernetTypeIPv6
			}
			ls = append(ls, &layers.Dot1Q{VLANIdentifier: id, Type: next})
		}
	}
	ip6 := &layers.IPv6{Version: 6, HopLimit: s.hopLimit, NextHeader: layers.IPProtocolICMPv6, SrcIP: ip(s.src), DstIP: ip(s.dst)}
	ls = append(ls, ip6)
	if s.hopByHop {
		ip6.NextHeader = layers.IPProtocolIPv6HopByHop
		hbh := &layers.IPv6HopByHop{}
		hbh.NextHeader = layers.IPProtocolICMPv6
		hbh.Options = []*layers.IPv6HopByHopOption{{OptionType: 1, OptionLength: 4, OptionData: make([]byte, 4)}} // PadN to 8 bytes
		ls = append(ls, hbh)
	}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(s.typ, s.code)}
	if err := icmp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	ls = append(ls, icmp)
	switch {
	case s.body != nil:
		ls = append(ls, gopacket.Payload(s.body))
	case s.typ == wire.TypeNeighborSolicitation:
		ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: ip(s.target)}
		if s.lla != nil {
			ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: s.lla[:]}}
		}
		ls = append(ls, ns)
	default:
		na := &layers.ICMPv6NeighborAdvertisement{Flags: s.flags, TargetAddress: ip(s.target)}
		if s.lla != nil {
			na.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: s.lla[:]}}
		}
		ls = append(ls, na)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatalf("gopacket serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// solicitation is a multicast solicitation for vip6 from peer6 with a
// source link-layer address option, as a kernel sends it.
func solicitation() ndpSpec {
	lla := peerMAC
	return ndpSpec{
		ethDst: wire.GroupMAC(snm6), ethSrc: peerMAC, src: peer6, dst: snm6, hopLimit: 255,
		typ: wire.TypeNeighborSolicitation, target: vip6, lla: &lla,
	}
}

func with(b []byte, edit func(b []byte)) []byte {
	b = append([]byte(nil), b...)
	edit(b)
	return b
}

// TestParseRefuses is the codec's answer to "what is not a valid
// request", case by case: the class each frame falls in, and the words that
// say why. Where the responder and the capture differ (tags, extension
// headers), both modes are asked.
func TestParseRefuses(t *testing.T) {
	arpReq := putARP(wire.BroadcastMAC, peerMAC, wire.ARP{Op: wire.OpRequest, SenderMAC: peerMAC, SenderIP: peer4, TargetIP: vip4})
	ns := solicitation()
	edit := func(f func(s *ndpSpec)) []byte {
		s := solicitation()
		f(&s)
		return buildNDP(t, s)
	}
	// fixed puts the checksum right after an edit of the message.
	fixed := func(b []byte) []byte {
		icmp := b[wire.ICMPv6Offset:]
		icmp[2], icmp[3] = 0, 0
		binary.BigEndian.PutUint16(icmp[2:], wire.Checksum(peer6, snm6, icmp))
		return b
	}
	good := buildNDP(t, ns)
	optAt := wire.ICMPv6Offset + 24
	tests := []struct {
		name  string
		frame []byte
		mode  wire.Mode
		class error
		why   string
	}{
		{"empty", nil, wire.Answer, wire.ErrTruncated, "Ethernet header"},
		{"ethernet only", arpReq[:13], wire.Capture, wire.ErrTruncated, "Ethernet header"},
		{"IPv4", with(arpReq, func(b []byte) { b[12], b[13] = 8, 0 }), wire.Answer, wire.ErrNotNeighbor, "EtherType"},
		{"ARP cut short", arpReq[:wire.ARPLen-1], wire.Answer, wire.ErrTruncated, "ARP packet"},
		{"ARP over IEEE 802", with(arpReq, func(b []byte) { b[15] = 6 }), wire.Answer, wire.ErrNotNeighbor, "another hardware"},
		{"ARP with 16-byte addresses", with(arpReq, func(b []byte) { b[19] = 16 }), wire.Answer, wire.ErrMalformed, "address lengths"},
		{"ARP operation 3", with(arpReq, func(b []byte) { b[21] = 3 }), wire.Answer, wire.ErrMalformed, "operation"},
		{"tagged, to the responder", edit(func(s *ndpSpec) { s.vlans = []uint16{100} }), wire.Answer, wire.ErrNotNeighbor, "VLAN-tagged"},
		{"three tags", edit(func(s *ndpSpec) { s.vlans = []uint16{1, 2, 3} }), wire.Capture, wire.ErrNotNeighbor, "more than two VLAN tags"},
		{"tag cut", with(good[:16], func(b []byte) { b[12], b[13] = 0x81, 0 }), wire.Capture, wire.ErrTruncated, "VLAN tag"},
		{"hop-by-hop, to the responder", edit(func(s *ndpSpec) { s.hopByHop = true }), wire.Answer, wire.ErrNotNeighbor, "extension headers"},
		{"fragment", with(good, func(b []byte) { b[wire.EthernetHeaderLen+6] = 44 }), wire.Capture, wire.ErrInvalid, "fragmented"},
		{"UDP", with(good, func(b []byte) { b[wire.EthernetHeaderLen+6] = 17 }), wire.Answer, wire.ErrNotNeighbor, "without ICMPv6"},
		{"IPv6 cut short", good[:wire.ICMPv6Offset-1], wire.Answer, wire.ErrTruncated, "IPv6 header"},
		{"IPv6 version 4", with(good, func(b []byte) { b[wire.EthernetHeaderLen] = 0x40 }), wire.Answer, wire.ErrMalformed, "version"},
		{"payload past the frame", good[:len(good)-1], wire.Answer, wire.ErrTruncated, "payload longer"},
		{"jumbogram", with(good, func(b []byte) { b[wire.EthernetHeaderLen+4], b[wire.EthernetHeaderLen+5] = 0, 0 }), wire.Answer, wire.ErrMalformed, "payload length 0"},
		{"echo request", edit(func(s *ndpSpec) { s.typ, s.body = 128, make([]byte, 4) }), wire.Answer, wire.ErrNotNeighbor, "ICMPv6 other"},
		{"hop limit 254", edit(func(s *ndpSpec) { s.hopLimit = 254 }), wire.Answer, wire.ErrInvalid, "hop limit"},
		{"hop limit 1, captured", edit(func(s *ndpSpec) { s.hopLimit = 1 }), wire.Capture, wire.ErrInvalid, "hop limit"},
		{"bad checksum", with(good, func(b []byte) { b[wire.ICMPv6Offset+3] ^= 0xff }), wire.Answer, wire.ErrInvalid, "checksum"},
		{"code 1", edit(func(s *ndpSpec) { s.code = 1 }), wire.Answer, wire.ErrInvalid, "code"},
		{"no room for the target", edit(func(s *ndpSpec) { s.body = make([]byte, 12) }), wire.Answer, wire.ErrInvalid, "shorter than 24"},
		{"multicast target", edit(func(s *ndpSpec) { s.target = snm6 }), wire.Answer, wire.ErrInvalid, "multicast target"},
		{"IPv4-mapped target", edit(func(s *ndpSpec) { s.target = netip.AddrFrom16(vip4.As16()) }), wire.Answer, wire.ErrInvalid, "IPv4-mapped"},
		{"option of length 0", fixed(with(good, func(b []byte) { b[optAt+1] = 0 })), wire.Answer, wire.ErrInvalid, "length 0"},
		{"option past the message", fixed(with(good, func(b []byte) { b[optAt+1] = 2 })), wire.Answer, wire.ErrMalformed, "runs past"},
		{"a lone option byte", edit(func(s *ndpSpec) {
			s.body = append(append(make([]byte, 4), vip6.AsSlice()...), 1)
		}), wire.Answer, wire.ErrMalformed, "runs past"},
		{"DAD with a source link-layer address", edit(func(s *ndpSpec) { s.src = netip.IPv6Unspecified() }), wire.Answer, wire.ErrInvalid, "with a source link-layer"},
		{"DAD to the address itself", edit(func(s *ndpSpec) {
			s.src, s.lla, s.dst, s.ethDst = netip.IPv6Unspecified(), nil, vip6, ourMAC
		}), wire.Answer, wire.ErrInvalid, "not sent to a solicited-node group"},
		{"solicited advertisement to all nodes", edit(func(s *ndpSpec) {
			s.typ, s.flags, s.dst, s.ethDst = wire.TypeNeighborAdvertisement, 0x40, wire.AllNodes, wire.GroupMAC(wire.AllNodes)
		}), wire.Capture, wire.ErrInvalid, "solicited advertisement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := wire.Parse(tt.frame, tt.mode)
			if !errors.Is(err, tt.class) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("got %+v, %v; want an error wrapping %q that says %q", f, err, tt.class, tt.why)
			}
			if f != (wire.Frame{}) {
				t.Errorf("got %+v with the error, want the zero Frame", f)
			}
		})
	}
}

// TestParseModes: what the capture accepts beyond the responder is
// framing only; the message inside reads the same.
func TestParseModes(t *testing.T) {
	plain := solicitation()
	want, err := wire.Parse(buildNDP(t, plain), wire.Answer)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func(s *ndpSpec)
		vlan uint16
	}{
		{"one tag", func(s *ndpSpec) { s.vlans = []uint16{100} }, 100},
		{"two tags", func(s *ndpSpec) { s.vlans = []uint16{100, 200} }, 100},
		{"hop-by-hop header", func(s *ndpSpec) { s.hopByHop = true }, 0},
		{"tag and hop-by-hop header", func(s *ndpSpec) { s.vlans, s.hopByHop = []uint16{7}, true }, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := solicitation()
			tt.edit(&s)
			frame := buildNDP(t, s)
			if _, err := wire.Parse(frame, wire.Answer); !errors.Is(err, wire.ErrNotNeighbor) {
				t.Errorf("Answer mode: got %v, want ErrNotNeighbor", err)
			}
			got, err := wire.Parse(frame, wire.Capture)
			if err != nil {
				t.Fatalf("Capture mode: %v", err)
			}
			w := want
			w.VLAN = tt.vlan
			if got != w {
				t.Errorf("Capture mode:\n got %+v\nwant %+v", got, w)
			}
		})
	}
}

// TestParseAcceptsPadding: bytes past the IPv6 payload or the ARP packet
// are Ethernet padding.
func TestParseAcceptsPadding(t *testing.T) {
	for _, frame := range [][]byte{
		append(putARP(wire.BroadcastMAC, ourMAC, wire.ARPProbe(ourMAC, vip4)), make([]byte, 18)...),
		append(putND(wire.GroupMAC(snm6), ourMAC, wire.DADProbe(vip6)), 0, 0, 0, 0),
	} {
		if _, err := wire.Parse(frame, wire.Answer); err != nil {
			t.Errorf("padded frame % x: %v", frame, err)
		}
	}
}

func TestBuildersRefuseShortBuffers(t *testing.T) {
	a := wire.ARPProbe(ourMAC, vip4)
	na := wire.Advertisement(ourMAC, vip6, wire.AllNodes, false)
	dad := wire.DADProbe(vip6)
	bogus := wire.ND{Type: 128}
	for _, tt := range []struct {
		name string
		got  int
	}{
		{"ARP", wire.PutARP(make([]byte, wire.ARPLen-1), wire.BroadcastMAC, ourMAC, &a)},
		{"NA with its option", wire.PutND(make([]byte, wire.NDLenWithLinkLayer-1), wire.BroadcastMAC, ourMAC, &na)},
		{"DAD", wire.PutND(make([]byte, wire.NDLen-1), wire.BroadcastMAC, ourMAC, &dad)},
		{"not an ND type", wire.PutND(make([]byte, 100), wire.BroadcastMAC, ourMAC, &bogus)},
	} {
		if tt.got != 0 {
			t.Errorf("%s: wrote %d bytes, want 0", tt.name, tt.got)
		}
	}
}

func TestCodecAllocatesNothing(t *testing.T) {
	arpFrame := putARP(wire.BroadcastMAC, peerMAC, wire.ARP{Op: wire.OpRequest, SenderMAC: peerMAC, SenderIP: peer4, TargetIP: vip4})
	nsFrame := buildNDP(t, solicitation())
	bad := with(nsFrame, func(b []byte) { b[wire.ICMPv6Offset+3] ^= 0xff })
	buf := make([]byte, wire.NDLenWithLinkLayer)
	for _, tt := range []struct {
		name string
		f    func()
	}{
		{"parse ARP", func() { _, _ = wire.Parse(arpFrame, wire.Answer) }},
		{"parse NS", func() { _, _ = wire.Parse(nsFrame, wire.Capture) }},
		{"refuse NS", func() { _, _ = wire.Parse(bad, wire.Answer) }},
		{"build ARP", func() { a := wire.ARPProbe(ourMAC, vip4); wire.PutARP(buf, wire.BroadcastMAC, ourMAC, &a) }},
		{"build NA", func() { n := wire.Advertisement(ourMAC, vip6, peer6, true); wire.PutND(buf, peerMAC, ourMAC, &n) }},
	} {
		if n := testing.AllocsPerRun(100, tt.f); n != 0 {
			t.Errorf("%s: %v allocations, want 0", tt.name, n)
		}
	}
}

func TestSolicitedNode(t *testing.T) {
	for _, tt := range []struct{ a, want string }{
		{"2001:db8::10", "ff02::1:ff00:10"},
		{"2001:db8::abcd:ef12", "ff02::1:ffcd:ef12"},
	} {
		a := netip.MustParseAddr(tt.a)
		got := wire.SolicitedNode(a)
		theirs, err := ndp.SolicitedNodeMulticast(a)
		if err != nil || got.String() != tt.want || got != theirs || !wire.IsSolicitedNode(got) {
			t.Errorf("SolicitedNode(%s) = %s, want %s (mdlayher: %s, %v)", a, got, tt.want, theirs, err)
		}
		if wire.GroupMAC(got) != macOf(t, wiretest.MulticastMAC(got)) {
			t.Errorf("GroupMAC and MulticastMAC of %s differ", got)
		}
	}
}

// BenchmarkParse is the codec's share of the answer path: one request read.
func BenchmarkParse(b *testing.B) {
	arpFrame := putARP(wire.BroadcastMAC, peerMAC, wire.ARP{Op: wire.OpRequest, SenderMAC: peerMAC, SenderIP: peer4, TargetIP: vip4})
	nsFrame := putND(wire.GroupMAC(snm6), peerMAC, wire.ND{Type: wire.TypeNeighborSolicitation, Src: peer6, Dst: snm6, Target: vip6, LinkLayer: peerMAC, HasLinkLayer: true})
	for _, bb := range []struct {
		name  string
		frame []byte
	}{{"arp", arpFrame}, {"ns", nsFrame}} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := wire.Parse(bb.frame, wire.Answer); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
