package announce

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"
)

// Documentation addresses only (RFC 5737, RFC 3849, RFC 7042), most of them
// wiretest's.
var (
	linkMAC  = wiretest.OurMAC
	zeroMAC  = wiretest.ZeroMAC
	askerMAC = wiretest.PeerMAC
	// proxyMAC is a source link-layer address that differs from the
	// frame's Ethernet source, to tell which of the two an answer uses.
	proxyMAC = wiretest.OtherMAC

	vipA4   = wiretest.VIP4
	asker4  = wiretest.Peer4
	other4  = netip.MustParseAddr("198.51.100.10")
	vipA6   = wiretest.VIP6
	asker6  = wiretest.Peer6
	other6  = netip.MustParseAddr("2001:db8::99")
	snmA6   = wiretest.SNM6
	unspec4 = netip.IPv4Unspecified()
	unspec6 = netip.IPv6Unspecified()
)

func testInterface() *net.Interface {
	return &net.Interface{Index: 7, Name: "test0", MTU: 1500, HardwareAddr: linkMAC}
}

// linkRig is a Link on fake sockets.
type linkRig struct {
	link     *Link
	arp, ip6 *fakeConn
	joiner   *fakeJoiner
	groups   *fakeGroups
}

func newLinkRig(t *testing.T, hold ...netip.Addr) *linkRig {
	t.Helper()
	r := &linkRig{
		arp:    newFakeConn(),
		ip6:    newFakeConn(),
		joiner: &fakeJoiner{},
	}
	r.groups = &fakeGroups{joiner: r.joiner}
	r.link = NewLink(testInterface(), LinkConfig{
		ARP:    r.arp,
		IPv6:   r.ip6,
		Groups: r.groups.open,
	})
	t.Cleanup(func() { closeLink(t, r.link) })
	for _, a := range hold {
		if err := r.link.Hold(a); err != nil {
			t.Fatalf("Hold(%v): %v", a, err)
		}
	}
	return r
}

// closeLink closes l and fails the test if Close does not return, which
// would mean a reader goroutine did not exit.
func closeLink(t *testing.T, l *Link) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("Close did not return within %v: a reader goroutine is stuck", waitTimeout)
		return nil
	}
}

// serialize builds a frame with gopacket, lengths and checksums computed.
func serialize(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatalf("gopacket serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func ipOf(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

// arpSpec is an ARP frame as a peer sends it.
type arpSpec struct {
	ethDst, ethSrc       net.HardwareAddr
	op                   uint16
	senderMAC, targetMAC net.HardwareAddr
	senderIP, targetIP   netip.Addr
}

// whoHas is the request a peer broadcasts to resolve target.
func whoHas(target netip.Addr) arpSpec {
	return arpSpec{
		ethDst: wire.Broadcast, ethSrc: askerMAC, op: layers.ARPRequest,
		senderMAC: askerMAC, senderIP: asker4, targetMAC: zeroMAC, targetIP: target,
	}
}

func buildARP(t *testing.T, s arpSpec) []byte {
	t.Helper()
	return serialize(t,
		&layers.Ethernet{SrcMAC: s.ethSrc, DstMAC: s.ethDst, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{
			AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
			HwAddressSize: 6, ProtAddressSize: 4, Operation: s.op,
			SourceHwAddress: s.senderMAC, SourceProtAddress: s.senderIP.AsSlice(),
			DstHwAddress: s.targetMAC, DstProtAddress: s.targetIP.AsSlice(),
		})
}

// icmpSpec is an IPv6 frame carrying one ICMPv6 message, as a peer sends it.
type icmpSpec struct {
	ethDst, ethSrc net.HardwareAddr
	src, dst       netip.Addr
	hopLimit       uint8
	typ            uint8
	target         netip.Addr
	sll            net.HardwareAddr // source link-layer address option; nil for none
	badChecksum    bool
	// body, when set, replaces the message after the ICMPv6 header; the
	// checksum still covers it.
	body []byte
}

// solicit is the multicast solicitation a peer's kernel sends to resolve
// target: to its solicited-node group, with a source link-layer address.
func solicit(target netip.Addr) icmpSpec {
	g := solicitedNode(target)
	return icmpSpec{
		ethDst: wiretest.MulticastMAC(g), ethSrc: askerMAC,
		src: asker6, dst: g, hopLimit: 255, typ: wire.TypeNeighborSolicitation,
		target: target, sll: askerMAC,
	}
}

func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 10: 0, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

func buildICMPv6(t *testing.T, s icmpSpec) []byte {
	t.Helper()
	ip6 := &layers.IPv6{Version: 6, HopLimit: s.hopLimit, NextHeader: layers.IPProtocolICMPv6, SrcIP: ipOf(s.src), DstIP: ipOf(s.dst)}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(s.typ, 0)}
	if err := icmp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	var msg gopacket.SerializableLayer
	switch {
	case s.body != nil:
		msg = gopacket.Payload(s.body)
	case s.typ == wire.TypeNeighborSolicitation:
		ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: ipOf(s.target)}
		if s.sll != nil {
			ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: s.sll}}
		}
		msg = ns
	case s.typ == wire.TypeNeighborAdvertisement:
		msg = &layers.ICMPv6NeighborAdvertisement{
			Flags: 0x20, TargetAddress: ipOf(s.target),
			Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: s.ethSrc}},
		}
	default:
		msg = gopacket.Payload{0, 1, 0, 1} // an echo request's identifier and sequence
	}
	b := serialize(t, &layers.Ethernet{SrcMAC: s.ethSrc, DstMAC: s.ethDst, EthernetType: layers.EthernetTypeIPv6}, ip6, icmp, msg)
	if s.badChecksum {
		b[wire.ICMPv6Offset+3] ^= 0xff
	}
	return b
}

func udp6Frame(t *testing.T) []byte {
	t.Helper()
	ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: ipOf(asker6), DstIP: ipOf(vipA6)}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 53}
	if err := udp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	return serialize(t, &layers.Ethernet{SrcMAC: askerMAC, DstMAC: linkMAC, EthernetType: layers.EthernetTypeIPv6}, ip6, udp, gopacket.Payload("query"))
}

func udp4Frame(t *testing.T) []byte {
	t.Helper()
	ip4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: ipOf(asker4), DstIP: ipOf(vipA4)}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 53}
	if err := udp.SetNetworkLayerForChecksum(ip4); err != nil {
		t.Fatal(err)
	}
	return serialize(t, &layers.Ethernet{SrcMAC: askerMAC, DstMAC: linkMAC, EthernetType: layers.EthernetTypeIPv4}, ip4, udp, gopacket.Payload("query"))
}

// arpView is an ARP frame as gopacket reads it.
type arpView struct {
	ethDst, ethSrc       net.HardwareAddr
	op                   uint16
	senderMAC, targetMAC net.HardwareAddr
	senderIP, targetIP   netip.Addr
}

func readARP(t *testing.T, b []byte) arpView {
	t.Helper()
	p := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	a, _ := p.Layer(layers.LayerTypeARP).(*layers.ARP)
	if eth == nil || a == nil {
		t.Fatalf("not an ARP frame: % x", b)
	}
	if a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || a.HwAddressSize != 6 || a.ProtAddressSize != 4 {
		t.Errorf("ARP header: got %v %v %d %d, want Ethernet IPv4 6 4", a.AddrType, a.Protocol, a.HwAddressSize, a.ProtAddressSize)
	}
	spa, _ := netip.AddrFromSlice(a.SourceProtAddress)
	tpa, _ := netip.AddrFromSlice(a.DstProtAddress)
	return arpView{
		ethDst: eth.DstMAC, ethSrc: eth.SrcMAC, op: a.Operation,
		senderMAC: a.SourceHwAddress, senderIP: spa, targetMAC: a.DstHwAddress, targetIP: tpa,
	}
}

// checkARP compares an ARP frame against want, field by field.
func checkARP(t *testing.T, b []byte, want arpView) {
	t.Helper()
	got := readARP(t, b)
	macs := []struct {
		name      string
		got, want net.HardwareAddr
	}{
		{"eth dst", got.ethDst, want.ethDst},
		{"eth src", got.ethSrc, want.ethSrc},
		{"sender MAC", got.senderMAC, want.senderMAC},
		{"target MAC", got.targetMAC, want.targetMAC},
	}
	for _, m := range macs {
		if !bytes.Equal(m.got, m.want) {
			t.Errorf("%s: got %v, want %v", m.name, m.got, m.want)
		}
	}
	if got.op != want.op {
		t.Errorf("op: got %d, want %d", got.op, want.op)
	}
	if got.senderIP != want.senderIP {
		t.Errorf("sender IP: got %v, want %v", got.senderIP, want.senderIP)
	}
	if got.targetIP != want.targetIP {
		t.Errorf("target IP: got %v, want %v", got.targetIP, want.targetIP)
	}
}

// naView is a neighbor advertisement as gopacket reads it.
type naView struct {
	ethDst, ethSrc net.HardwareAddr
	src, dst       netip.Addr
	hopLimit       uint8
	router         bool
	solicited      bool
	override       bool
	target         netip.Addr
	tll            net.HardwareAddr
}

func checkNA(t *testing.T, b []byte, want naView) {
	t.Helper()
	p := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip6, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	na, _ := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if eth == nil || ip6 == nil || na == nil {
		t.Fatalf("not a neighbor advertisement: % x", b)
	}
	src, _ := netip.AddrFromSlice(ip6.SrcIP)
	dst, _ := netip.AddrFromSlice(ip6.DstIP)
	target, _ := netip.AddrFromSlice(na.TargetAddress)
	got := naView{
		ethDst: eth.DstMAC, ethSrc: eth.SrcMAC, src: src, dst: dst, hopLimit: ip6.HopLimit,
		router: na.Router(), solicited: na.Solicited(), override: na.Override(), target: target,
	}
	for _, o := range na.Options {
		if o.Type == layers.ICMPv6OptTargetAddress {
			got.tll = net.HardwareAddr(o.Data)
		}
	}
	if !bytes.Equal(got.ethDst, want.ethDst) || !bytes.Equal(got.ethSrc, want.ethSrc) {
		t.Errorf("eth: got %v > %v, want %v > %v", got.ethSrc, got.ethDst, want.ethSrc, want.ethDst)
	}
	if got.src != want.src || got.dst != want.dst || got.hopLimit != want.hopLimit {
		t.Errorf("IPv6: got %v > %v hop limit %d, want %v > %v hop limit %d", got.src, got.dst, got.hopLimit, want.src, want.dst, want.hopLimit)
	}
	if got.router != want.router || got.solicited != want.solicited || got.override != want.override {
		t.Errorf("flags: got R=%t S=%t O=%t, want R=%t S=%t O=%t", got.router, got.solicited, got.override, want.router, want.solicited, want.override)
	}
	if got.target != want.target {
		t.Errorf("target: got %v, want %v", got.target, want.target)
	}
	if !bytes.Equal(got.tll, want.tll) {
		t.Errorf("target link-layer address: got %v, want %v", got.tll, want.tll)
	}
	if sum := wire.Checksum(src, dst, b[wire.ICMPv6Offset:]); sum != 0 {
		t.Errorf("ICMPv6 checksum does not verify: sum %#04x", sum)
	}
}

func TestLinkAnswersARP(t *testing.T) {
	reply := func(ethDst net.HardwareAddr, targetIP netip.Addr) *arpView {
		return &arpView{
			ethDst: ethDst, ethSrc: linkMAC, op: layers.ARPReply,
			senderMAC: linkMAC, senderIP: vipA4, targetMAC: askerMAC, targetIP: targetIP,
		}
	}
	tests := []struct {
		name    string
		request func(s *arpSpec)
		want    *arpView // nil: no answer
	}{
		{"who-has", func(s *arpSpec) {}, reply(askerMAC, asker4)},
		{"who-has sent unicast (NUD)", func(s *arpSpec) { s.ethDst = linkMAC }, reply(askerMAC, asker4)},
		// RFC 5227 2.1.1: the prober learns the address is taken.
		{"probe from 0.0.0.0", func(s *arpSpec) { s.senderIP = unspec4 }, reply(askerMAC, unspec4)},
		{"address not held", func(s *arpSpec) { s.targetIP = other4 }, nil},
		{"sender MAC is ours", func(s *arpSpec) { s.senderMAC = linkMAC }, nil},
		{"Ethernet source is ours", func(s *arpSpec) { s.ethSrc = linkMAC }, nil},
		{"a reply, not a request", func(s *arpSpec) {
			s.op, s.ethDst, s.targetMAC = layers.ARPReply, linkMAC, linkMAC
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newLinkRig(t, vipA4)
			s := whoHas(vipA4)
			tt.request(&s)
			r.arp.deliver(t, buildARP(t, s))

			got := r.arp.sent()
			if stray := r.ip6.sent(); len(stray) != 0 {
				t.Errorf("IPv6 socket: got %d frames, want none", len(stray))
			}
			if tt.want == nil {
				if len(got) != 0 {
					t.Fatalf("got %d answers, want none; first: %+v", len(got), readARP(t, got[0].frame))
				}
				if n := r.link.Answered(vipA4); n != 0 {
					t.Errorf("Answered(%v): got %d, want 0", vipA4, n)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("got %d answers, want exactly 1", len(got))
			}
			checkARP(t, got[0].frame, *tt.want)
			if !bytes.Equal(got[0].to, tt.want.ethDst) {
				t.Errorf("socket destination: got %v, want %v", got[0].to, tt.want.ethDst)
			}
			if n := r.link.Answered(vipA4); n != 1 {
				t.Errorf("Answered(%v): got %d, want 1", vipA4, n)
			}
			if st := r.link.Stats(); st.ARPRequests != 1 || st.Answered != 1 || st.Malformed != 0 || st.SendErrors != 0 {
				t.Errorf("Stats: got %+v, want 1 request, 1 answered", st)
			}
		})
	}
}

func TestLinkARPAfterDrop(t *testing.T) {
	r := newLinkRig(t, vipA4)
	r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	if got := len(r.arp.sent()); got != 1 {
		t.Fatalf("while held: got %d answers, want 1", got)
	}
	if err := r.link.LetGo(vipA4); err != nil {
		t.Fatalf("LetGo: %v", err)
	}
	r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	if got := r.arp.sent(); len(got) != 0 {
		t.Errorf("after LetGo: got %d answers, want none", len(got))
	}
	if n := r.link.Answered(vipA4); n != 0 {
		t.Errorf("Answered after LetGo: got %d, want 0", n)
	}
	if err := r.link.LetGo(vipA4); err != nil {
		t.Errorf("second LetGo: got %v, want nil", err)
	}
}

func TestLinkAnsweredCounts(t *testing.T) {
	r := newLinkRig(t, vipA4, vipA6)
	for range 3 {
		r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	}
	r.ip6.deliver(t, buildICMPv6(t, solicit(vipA6)))
	r.arp.deliver(t, buildARP(t, whoHas(other4)))
	tests := []struct {
		addr netip.Addr
		want uint64
	}{
		{vipA4, 3},
		{vipA6, 1},
		{other4, 0},
		{other6, 0},
	}
	for _, tt := range tests {
		if got := r.link.Answered(tt.addr); got != tt.want {
			t.Errorf("Answered(%v): got %d, want %d", tt.addr, got, tt.want)
		}
	}
	want := LinkStats{ARPRequests: 4, Solicitations: 1, Answered: 4}
	if got := r.link.Stats(); got != want {
		t.Errorf("Stats: got %+v, want %+v", got, want)
	}
}

func TestLinkMalformedARPDoesNotStopReader(t *testing.T) {
	r := newLinkRig(t, vipA4)
	good := buildARP(t, whoHas(vipA4))
	with := func(off int, v ...byte) []byte {
		b := append([]byte(nil), good...)
		copy(b[off:], v)
		return b
	}
	garbage := [][]byte{
		nil,
		{0xde, 0xad, 0xbe, 0xef},
		good[:13],       // no whole Ethernet header
		good[:14+20],    // ARP packet cut short
		with(14, 0, 6),  // IEEE 802 hardware type
		with(16, 0, 0),  // protocol type 0
		with(12, 8, 0),  // IPv4 ethertype
		with(19, 16, 0), // 16-byte protocol addresses
	}
	for _, g := range garbage {
		r.arp.deliver(t, g)
	}
	if got := r.arp.sent(); len(got) != 0 {
		t.Fatalf("got %d answers to garbage, want none", len(got))
	}
	if got := r.link.Stats().Malformed; got != uint64(len(garbage)) {
		t.Errorf("Malformed: got %d, want %d", got, len(garbage))
	}
	r.arp.deliver(t, good)
	if got := r.arp.sent(); len(got) != 1 {
		t.Fatalf("valid request after garbage: got %d answers, want 1", len(got))
	}
}

func TestLinkAnswersNDP(t *testing.T) {
	solicitedNA := func(ethDst net.HardwareAddr) *naView {
		return &naView{
			ethDst: ethDst, ethSrc: linkMAC, src: vipA6, dst: asker6, hopLimit: 255,
			solicited: true, override: true, target: vipA6, tll: linkMAC,
		}
	}
	tests := []struct {
		name          string
		ns            func(s *icmpSpec)
		want          *naView // nil: no answer
		wantMalformed uint64
	}{
		{"multicast with source link-layer address", func(s *icmpSpec) { s.sll = proxyMAC }, solicitedNA(proxyMAC), 0},
		{"unicast NUD without options", func(s *icmpSpec) {
			s.dst, s.ethDst, s.sll = vipA6, linkMAC, nil
		}, solicitedNA(askerMAC), 0},
		{"DAD", func(s *icmpSpec) { s.src, s.sll = unspec6, nil }, &naView{
			ethDst: net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, ethSrc: linkMAC, src: vipA6, dst: wire.AllNodes, hopLimit: 255,
			solicited: false, override: true, target: vipA6, tll: linkMAC,
		}, 0},
		// RFC 4861 7.1.1: a DAD solicitation has no source link-layer
		// address option and goes to a solicited-node group.
		{"DAD with a source link-layer address", func(s *icmpSpec) { s.src = unspec6 }, nil, 1},
		{"DAD to the address itself", func(s *icmpSpec) {
			s.src, s.sll, s.dst, s.ethDst = unspec6, nil, vipA6, linkMAC
		}, nil, 1},
		{"hop limit 254", func(s *icmpSpec) { s.hopLimit = 254 }, nil, 1},
		{"bad checksum", func(s *icmpSpec) { s.badChecksum = true }, nil, 1},
		{"multicast target", func(s *icmpSpec) { s.target = snmA6 }, nil, 1},
		// Checksum right, message broken: the frame is NDP and did not
		// parse, so it counts as malformed like any other bad solicitation.
		{"option of length 0", func(s *icmpSpec) {
			s.body = append(append(make([]byte, 4), vipA6.AsSlice()...), 1, 0, 0, 0, 0, 0, 0, 0)
		}, nil, 1},
		{"no room for the target", func(s *icmpSpec) { s.body = make([]byte, 12) }, nil, 1},
		{"address not held", func(s *icmpSpec) {
			s.target, s.dst, s.ethDst = other6, solicitedNode(other6), wiretest.MulticastMAC(solicitedNode(other6))
		}, nil, 0},
		{"from our own MAC", func(s *icmpSpec) { s.ethSrc, s.sll = linkMAC, linkMAC }, nil, 0},
		{"an advertisement, not a solicitation", func(s *icmpSpec) {
			s.typ, s.dst, s.ethDst = wire.TypeNeighborAdvertisement, wire.AllNodes, wiretest.MulticastMAC(wire.AllNodes)
		}, nil, 0},
		{"echo request", func(s *icmpSpec) { s.typ, s.dst, s.ethDst = 128, vipA6, linkMAC }, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newLinkRig(t, vipA6)
			s := solicit(vipA6)
			tt.ns(&s)
			r.ip6.deliver(t, buildICMPv6(t, s))

			got := r.ip6.sent()
			if stray := r.arp.sent(); len(stray) != 0 {
				t.Errorf("ARP socket: got %d frames, want none", len(stray))
			}
			if m := r.link.Stats().Malformed; m != tt.wantMalformed {
				t.Errorf("Malformed: got %d, want %d", m, tt.wantMalformed)
			}
			if tt.want == nil {
				if len(got) != 0 {
					t.Errorf("got %d answers, want none; first: % x", len(got), got[0].frame)
				}
				if n := r.link.Answered(vipA6); n != 0 {
					t.Errorf("Answered(%v): got %d, want 0", vipA6, n)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("got %d answers, want exactly 1", len(got))
			}
			checkNA(t, got[0].frame, *tt.want)
			if !bytes.Equal(got[0].to, tt.want.ethDst) {
				t.Errorf("socket destination: got %v, want %v", got[0].to, tt.want.ethDst)
			}
			if n := r.link.Answered(vipA6); n != 1 {
				t.Errorf("Answered(%v): got %d, want 1", vipA6, n)
			}
		})
	}
}

func TestLinkNonNDPIsNotMalformed(t *testing.T) {
	// The IPv6 socket sees ordinary traffic when the filter is missing or
	// loose; that is not bad input.
	r := newLinkRig(t, vipA6)
	r.ip6.deliver(t, udp6Frame(t))
	r.ip6.deliver(t, buildICMPv6(t, solicit(vipA6)))
	if st := r.link.Stats(); st.Malformed != 0 || st.Answered != 1 {
		t.Errorf("Stats: got %+v, want 0 malformed and 1 answered", st)
	}
}

func TestLinkSendErrorsCounted(t *testing.T) {
	r := newLinkRig(t, vipA4)
	r.arp.failWrites.Store(true)
	r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	if st := r.link.Stats(); st.SendErrors != 2 || st.Answered != 0 {
		t.Errorf("Stats: got %+v, want 2 send errors and 0 answered", st)
	}
	if n := r.link.Answered(vipA4); n != 0 {
		t.Errorf("Answered: got %d for answers the socket refused, want 0", n)
	}
	r.arp.failWrites.Store(false)
	r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	if n := r.link.Answered(vipA4); n != 1 {
		t.Errorf("Answered after the socket recovered: got %d, want 1", n)
	}
}

func TestLinkGroups(t *testing.T) {
	// Both end in 12:3456, so they share ff02::1:ff12:3456.
	a := netip.MustParseAddr("2001:db8::12:3456")
	b := netip.MustParseAddr("2001:db8:1::abcd:ef12:3456")
	group := netip.MustParseAddr("ff02::1:ff12:3456")
	r := newLinkRig(t)

	type state struct {
		refs   map[netip.Addr]int
		joins  []netip.Addr
		leaves []netip.Addr
	}
	steps := []struct {
		name string
		do   func() error
		want state
	}{
		{"hold a", func() error { return r.link.Hold(a) }, state{map[netip.Addr]int{group: 1}, []netip.Addr{group}, nil}},
		{"hold a again", func() error { return r.link.Hold(a) }, state{map[netip.Addr]int{group: 1}, []netip.Addr{group}, nil}},
		{"hold b", func() error { return r.link.Hold(b) }, state{map[netip.Addr]int{group: 2}, []netip.Addr{group}, nil}},
		{"drop a", func() error { return r.link.LetGo(a) }, state{map[netip.Addr]int{group: 1}, []netip.Addr{group}, nil}},
		{"drop a again", func() error { return r.link.LetGo(a) }, state{map[netip.Addr]int{group: 1}, []netip.Addr{group}, nil}},
		{"drop b", func() error { return r.link.LetGo(b) }, state{map[netip.Addr]int{}, []netip.Addr{group}, []netip.Addr{group}}},
		{"hold b back", func() error { return r.link.Hold(b) }, state{map[netip.Addr]int{group: 1}, []netip.Addr{group, group}, []netip.Addr{group}}},
	}
	// Steps build on each other, so they run in order in one test.
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := r.link.Groups(); !mapsEqual(got, st.want.refs) {
			t.Errorf("%s: Groups() got %v, want %v", st.name, got, st.want.refs)
		}
		joins, leaves, _ := r.joiner.calls()
		if !slices.Equal(joins, st.want.joins) || !slices.Equal(leaves, st.want.leaves) {
			t.Errorf("%s: got joins %v leaves %v, want joins %v leaves %v", st.name, joins, leaves, st.want.joins, st.want.leaves)
		}
	}
	if n := r.groups.opens.Load(); n != 1 {
		t.Errorf("Groups opener: got %d calls, want 1", n)
	}
}

func mapsEqual(a, b map[netip.Addr]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestLinkGroupsOpenedLazily(t *testing.T) {
	r := newLinkRig(t, vipA4, netip.MustParseAddr("203.0.113.5"))
	if n := r.groups.opens.Load(); n != 0 {
		t.Fatalf("after IPv4 holds: opener called %d times, want 0", n)
	}
	r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	if n := r.groups.opens.Load(); n != 0 {
		t.Fatalf("after answering ARP: opener called %d times, want 0", n)
	}
	if err := r.link.Hold(vipA6); err != nil {
		t.Fatalf("Hold(%v): %v", vipA6, err)
	}
	if err := r.link.Hold(asker6); err != nil {
		t.Fatalf("Hold(%v): %v", asker6, err)
	}
	if n := r.groups.opens.Load(); n != 1 {
		t.Errorf("after two IPv6 holds: opener called %d times, want 1", n)
	}
	if got := len(r.link.Groups()); got != 2 {
		t.Errorf("Groups: got %d groups, want 2", got)
	}
}

func TestLinkHoldFailsWhenGroupsFail(t *testing.T) {
	errNoIPv6 := errors.New("IPv6 is disabled")
	errJoin := errors.New("join refused")
	tests := []struct {
		name    string
		setup   func(r *linkRig)
		wantErr error
	}{
		{"opener fails", func(r *linkRig) { r.groups.setErr(errNoIPv6) }, errNoIPv6},
		{"join fails", func(r *linkRig) { r.joiner.joinErr = errJoin }, errJoin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newLinkRig(t, vipA4)
			tt.setup(r)
			err := r.link.Hold(vipA6)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Hold: got %v, want %v", err, tt.wantErr)
			}
			if g := r.link.Groups(); len(g) != 0 {
				t.Errorf("Groups: got %v, want none", g)
			}
			r.ip6.deliver(t, buildICMPv6(t, solicit(vipA6)))
			if got := r.ip6.sent(); len(got) != 0 {
				t.Errorf("got %d answers for an address Hold refused, want none", len(got))
			}
			// IPv4 is unaffected.
			r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
			if got := r.arp.sent(); len(got) != 1 {
				t.Errorf("IPv4: got %d answers, want 1", len(got))
			}

			// Once the cause is gone, Hold works.
			r.groups.setErr(nil)
			r.joiner.mu.Lock()
			r.joiner.joinErr = nil
			r.joiner.mu.Unlock()
			if err := r.link.Hold(vipA6); err != nil {
				t.Fatalf("Hold after recovery: %v", err)
			}
			r.ip6.deliver(t, buildICMPv6(t, solicit(vipA6)))
			if got := r.ip6.sent(); len(got) != 1 {
				t.Errorf("after recovery: got %d answers, want 1", len(got))
			}
		})
	}
}

func TestLinkHoldAllOrNone(t *testing.T) {
	// shares vipA6's group; refused is the only group the joiner refuses.
	shares := netip.MustParseAddr("2001:db8:1::10")
	refused := netip.MustParseAddr("2001:db8::77")
	r := newLinkRig(t)
	r.joiner.mu.Lock()
	r.joiner.refuse = solicitedNode(refused)
	r.joiner.mu.Unlock()

	err := r.link.Hold(vipA4, vipA6, shares, refused)
	if !errors.Is(err, errRefused) {
		t.Fatalf("Hold: got %v, want %v", err, errRefused)
	}
	if g := r.link.Groups(); len(g) != 0 {
		t.Errorf("Groups after a failed Hold: got %v, want none", g)
	}
	joins, leaves, _ := r.joiner.calls()
	if !slices.Equal(joins, []netip.Addr{snmA6}) || !slices.Equal(leaves, []netip.Addr{snmA6}) {
		t.Errorf("got joins %v leaves %v, want %v joined once and left once", joins, leaves, snmA6)
	}
	r.arp.deliver(t, buildARP(t, whoHas(vipA4)))
	r.ip6.deliver(t, buildICMPv6(t, solicit(vipA6)))
	if a, n := r.arp.sent(), r.ip6.sent(); len(a)+len(n) != 0 {
		t.Errorf("got %d ARP and %d NDP answers after a failed Hold, want none", len(a), len(n))
	}

	// Without the refused address the same call holds them all.
	if err := r.link.Hold(vipA4, vipA6, shares); err != nil {
		t.Fatalf("Hold: %v", err)
	}
	if got, want := r.link.Groups(), map[netip.Addr]int{snmA6: 2}; !mapsEqual(got, want) {
		t.Errorf("Groups: got %v, want %v", got, want)
	}
	if err := r.link.LetGo(vipA6, shares, vipA4); err != nil {
		t.Fatalf("LetGo: %v", err)
	}
	if g := r.link.Groups(); len(g) != 0 {
		t.Errorf("Groups after LetGo of all: got %v, want none", g)
	}
}

func TestLinkClose(t *testing.T) {
	tests := []struct {
		name       string
		hold       []netip.Addr
		wantJoiner int // joiner Close calls
	}{
		{"IPv4 only: no joiner to close", []netip.Addr{vipA4}, 0},
		{"with IPv6", []netip.Addr{vipA4, vipA6}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newLinkRig(t, tt.hold...)
			if err := closeLink(t, r.link); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if got := r.arp.closes.Load(); got != 1 {
				t.Errorf("ARP conn: got %d Close calls, want 1", got)
			}
			if got := r.ip6.closes.Load(); got != 1 {
				t.Errorf("IPv6 conn: got %d Close calls, want 1", got)
			}
			if _, _, closes := r.joiner.calls(); closes != tt.wantJoiner {
				t.Errorf("joiner: got %d Close calls, want %d", closes, tt.wantJoiner)
			}
			if g := r.link.Groups(); len(g) != 0 {
				t.Errorf("Groups after Close: got %v, want none", g)
			}
			if err := r.link.Hold(vipA4); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Hold after Close: got %v, want net.ErrClosed", err)
			}
			if err := closeLink(t, r.link); err != nil {
				t.Errorf("second Close: got %v, want nil", err)
			}
			if got := r.arp.closes.Load() + r.ip6.closes.Load(); got != 2 {
				t.Errorf("second Close closed the conns again: %d Close calls in all, want 2", got)
			}
		})
	}
}

func TestLinkAnnounce(t *testing.T) {
	allNodesMAC := net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	allRoutersMAC := net.HardwareAddr{0x33, 0x33, 0, 0, 0, 2}
	unsolicited := func(ethDst net.HardwareAddr, dst netip.Addr) naView {
		return naView{
			ethDst: ethDst, ethSrc: linkMAC, src: vipA6, dst: dst, hopLimit: 255,
			override: true, target: vipA6, tll: linkMAC,
		}
	}
	tests := []struct {
		name   string
		addr   netip.Addr
		frames FrameKinds
		arp    []arpView
		na     []naView
	}{
		{"IPv4 both forms", vipA4, FrameARPRequest | FrameARPReply, []arpView{
			{ethDst: wire.Broadcast, ethSrc: linkMAC, op: layers.ARPRequest, senderMAC: linkMAC, senderIP: vipA4, targetMAC: zeroMAC, targetIP: vipA4},
			{ethDst: wire.Broadcast, ethSrc: linkMAC, op: layers.ARPReply, senderMAC: linkMAC, senderIP: vipA4, targetMAC: wire.Broadcast, targetIP: vipA4},
		}, nil},
		{"IPv4 reply form only", vipA4, FrameARPReply, []arpView{
			{ethDst: wire.Broadcast, ethSrc: linkMAC, op: layers.ARPReply, senderMAC: linkMAC, senderIP: vipA4, targetMAC: wire.Broadcast, targetIP: vipA4},
		}, nil},
		{"IPv6 all nodes and all routers", vipA6, FrameNA | FrameNARouters, nil, []naView{
			unsolicited(allNodesMAC, wire.AllNodes),
			unsolicited(allRoutersMAC, wire.AllRouters),
		}},
		{"IPv4 ignores NA kinds", vipA4, FrameNA, nil, nil},
		{"IPv6 ignores ARP kinds", vipA6, FrameARPRequest | FrameARPReply, nil, nil},
		{"IPv4 default", vipA4, DefaultFrameKinds, []arpView{
			{ethDst: wire.Broadcast, ethSrc: linkMAC, op: layers.ARPRequest, senderMAC: linkMAC, senderIP: vipA4, targetMAC: zeroMAC, targetIP: vipA4},
			{ethDst: wire.Broadcast, ethSrc: linkMAC, op: layers.ARPReply, senderMAC: linkMAC, senderIP: vipA4, targetMAC: wire.Broadcast, targetIP: vipA4},
		}, nil},
		{"IPv6 default", vipA6, DefaultFrameKinds, nil, []naView{unsolicited(allNodesMAC, wire.AllNodes)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Announcing does not need the address held.
			r := newLinkRig(t)
			n, err := r.link.Announce(tt.addr, tt.frames)
			if err != nil {
				t.Fatalf("Announce: %v", err)
			}
			want := len(tt.arp) + len(tt.na)
			if n != want {
				t.Errorf("Announce returned %d, want %d", n, want)
			}
			if per := tt.frames.PerRound(tt.addr.Is4()); n != per {
				t.Errorf("Announce returned %d, but Frames.PerRound says %d", n, per)
			}
			arps, nas := r.arp.sent(), r.ip6.sent()
			if len(arps) != len(tt.arp) || len(nas) != len(tt.na) {
				t.Fatalf("got %d ARP and %d IPv6 frames, want %d and %d", len(arps), len(nas), len(tt.arp), len(tt.na))
			}
			for i, w := range tt.arp {
				checkARP(t, arps[i].frame, w)
				if !bytes.Equal(arps[i].to, wire.Broadcast) {
					t.Errorf("ARP frame %d: socket destination %v, want broadcast", i, arps[i].to)
				}
			}
			for i, w := range tt.na {
				checkNA(t, nas[i].frame, w)
				if !bytes.Equal(nas[i].to, w.ethDst) {
					t.Errorf("NA %d: socket destination %v, want %v", i, nas[i].to, w.ethDst)
				}
			}
			if st := r.link.Stats(); st.Answered != 0 {
				t.Errorf("Stats.Answered: got %d, want 0 (announcements are not answers)", st.Answered)
			}
		})
	}
}

func TestLinkAnnounceWriteError(t *testing.T) {
	r := newLinkRig(t)
	r.arp.failWrites.Store(true)
	n, err := r.link.Announce(vipA4, FrameARPRequest|FrameARPReply)
	if n != 0 || !errors.Is(err, errFakeWrite) {
		t.Fatalf("got %d, %v; want 0 and %v", n, err, errFakeWrite)
	}
	for _, frag := range []string{vipA4.String(), "test0"} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("error %q does not name %q", err, frag)
		}
	}
}

func TestFilters(t *testing.T) {
	ns := buildICMPv6(t, solicit(vipA6))
	dad := solicit(vipA6)
	dad.src, dad.sll = unspec6, nil
	na := solicit(vipA6)
	na.typ, na.dst, na.ethDst = wire.TypeNeighborAdvertisement, wire.AllNodes, wiretest.MulticastMAC(wire.AllNodes)
	echo := solicit(vipA6)
	echo.typ, echo.dst, echo.ethDst = 128, vipA6, linkMAC
	reply := whoHas(vipA4)
	reply.op, reply.ethDst, reply.targetMAC = layers.ARPReply, linkMAC, linkMAC
	probe := whoHas(vipA4)
	probe.senderIP = unspec4
	arpReq := buildARP(t, whoHas(vipA4))
	ieee802 := append([]byte(nil), arpReq...)
	ieee802[15] = 6
	hopByHop := append([]byte(nil), ns...)
	hopByHop[wire.EthernetHeaderLen+6] = 0

	frames := []struct {
		name       string
		frame      []byte
		arp, solic bool // accepted by arpRequestFilter, solicitationFilter
	}{
		{"ARP request", arpReq, true, false},
		{"ARP probe", buildARP(t, probe), true, false},
		{"ARP reply", buildARP(t, reply), false, false},
		{"ARP over IEEE 802", ieee802, false, false},
		{"multicast NS", ns, false, true},
		{"DAD NS", buildICMPv6(t, dad), false, true},
		{"NA", buildICMPv6(t, na), false, false},
		{"ICMPv6 echo", buildICMPv6(t, echo), false, false},
		{"NS behind a hop-by-hop header", hopByHop, false, false},
		{"UDP over IPv6", udp6Frame(t), false, false},
		{"UDP over IPv4", udp4Frame(t), false, false},
		{"runt", []byte{0xff, 0xff, 0xff}, false, false},
	}
	filters := []struct {
		name   string
		prog   []bpf.Instruction
		accept func(i int) bool
	}{
		{"arpRequestFilter", arpRequestFilter(), func(i int) bool { return frames[i].arp }},
		{"solicitationFilter", solicitationFilter(), func(i int) bool { return frames[i].solic }},
	}
	for _, f := range filters {
		vm, err := bpf.NewVM(f.prog)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if _, err := bpf.Assemble(f.prog); err != nil {
			t.Fatalf("%s does not assemble: %v", f.name, err)
		}
		for i, fr := range frames {
			t.Run(f.name+"/"+fr.name, func(t *testing.T) {
				n, err := vm.Run(fr.frame)
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				if got, want := n > 0, f.accept(i); got != want {
					t.Errorf("accepted: got %t (returned %d), want %t", got, n, want)
				}
				if n > 0 && n < len(fr.frame) {
					t.Errorf("accepted only %d of %d bytes, want the whole frame", n, len(fr.frame))
				}
			})
		}
	}
}

func TestLinkShardsGroupsAcrossSockets(t *testing.T) {
	var opened int
	var mu sync.Mutex
	l := NewLink(&net.Interface{Index: 7, Name: "test0", HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 7}}, LinkConfig{
		ARP:  newFakeConn(),
		IPv6: newFakeConn(),
		Groups: func() (GroupJoiner, error) {
			mu.Lock()
			defer mu.Unlock()
			opened++
			return &countingJoiner{}, nil
		},
	})
	defer l.Close()
	addrs := make([]netip.Addr, groupsPerSocket+10)
	for i := range addrs {
		addrs[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)})
	}
	if err := l.Hold(addrs...); err != nil {
		t.Fatal(err)
	}
	if opened != 2 || len(l.Groups()) != len(addrs) {
		t.Errorf("got %d sockets for %d groups, want 2 sockets (at most %d groups each)", opened, len(l.Groups()), groupsPerSocket)
	}
}

// countingJoiner accepts every join.
type countingJoiner struct{}

func (*countingJoiner) JoinGroup(netip.Addr) error  { return nil }
func (*countingJoiner) LeaveGroup(netip.Addr) error { return nil }
func (*countingJoiner) Close() error                { return nil }

// allMultiFake is a fake IPv6 socket that records all-multicast requests.
type allMultiFake struct {
	*fakeConn
	mu      sync.Mutex
	on      bool
	changes int
}

func (c *allMultiFake) SetAllMulti(on bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = on
	c.changes++
	return nil
}

func (c *allMultiFake) state() (bool, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.on, c.changes
}

// recordingJoiner counts the groups joined.
type recordingJoiner struct {
	mu     sync.Mutex
	joined map[netip.Addr]bool
}

func (j *recordingJoiner) JoinGroup(g netip.Addr) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.joined[g] = true
	return nil
}

func (j *recordingJoiner) LeaveGroup(g netip.Addr) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.joined, g)
	return nil
}

func (j *recordingJoiner) Close() error { return nil }

func (j *recordingJoiner) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.joined)
}

func TestLinkLargeHoldJoinsInTheBackground(t *testing.T) {
	ip6 := &allMultiFake{fakeConn: newFakeConn()}
	j := &recordingJoiner{joined: map[netip.Addr]bool{}}
	l := NewLink(&net.Interface{Index: 7, Name: "test0", HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 7}}, LinkConfig{
		ARP:    newFakeConn(),
		IPv6:   ip6,
		Groups: func() (GroupJoiner, error) { return j, nil },
	})
	defer l.Close()
	addrs := make([]netip.Addr, syncJoins*3)
	for i := range addrs {
		addrs[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
	}
	if err := l.Hold(addrs...); err != nil {
		t.Fatal(err)
	}
	if on, _ := ip6.state(); !on && j.count() < len(addrs) {
		t.Fatal("a large hold returned with groups still to join and all-multicast reception off: solicitations would be lost")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		on, changes := ip6.state()
		if j.count() == len(addrs) && !on && changes == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d of %d groups joined, all-multicast %v after %d changes; want every group joined and all-multicast off again", j.count(), len(addrs), on, changes)
		}
		time.Sleep(time.Millisecond)
	}
	if err := l.LetGo(addrs...); err != nil {
		t.Fatal(err)
	}
	if n := j.count(); n != 0 {
		t.Errorf("after LetGo: %d groups still joined, want 0", n)
	}
	// A small hold joins before it returns, without all-multicast.
	if err := l.Hold(addrs[:2]...); err != nil {
		t.Fatal(err)
	}
	if _, changes := ip6.state(); j.count() != 2 || changes != 2 {
		t.Errorf("small hold: got %d groups joined and %d all-multicast changes, want 2 joined at once and no change", j.count(), changes)
	}
}

// TestLinkWithAnotherResponder: the answering part of a Link can be
// another Responder (an in-kernel one): it holds what the Link holds, the
// sockets are not read, and the rounds, probes and groups are the Link's as
// before; Close closes the sockets.
func TestLinkWithAnotherResponder(t *testing.T) {
	arp, ip6, joiner := newFakeConn(), newFakeConn(), &fakeJoiner{}
	groups := &fakeGroups{joiner: joiner}
	resp := newCountingResponder()
	l := NewLink(testInterface(), LinkConfig{ARP: arp, IPv6: ip6, Groups: groups.open, Responder: resp})
	if err := l.Hold(vipA4, vipA6); err != nil {
		t.Fatal(err)
	}
	if !resp.held[vipA4] || !resp.held[vipA6] || l.Answered(vipA4) != 7 {
		t.Errorf("the responder holds %v, answered %d; want both addresses and its own count", resp.held, l.Answered(vipA4))
	}
	if joins, _, _ := joiner.calls(); len(joins) != 1 || joins[0] != snmA6 {
		t.Errorf("got joins %v, want the Link to join %s itself", joins, snmA6)
	}
	if n, err := l.Announce(vipA4, FrameARPRequest); n != 1 || err != nil || len(arp.sent()) != 1 {
		t.Errorf("Announce: got %d, %v and %d frames written; want the round on the ARP socket", n, err, len(arp.sent()))
	}
	if err := l.LetGo(vipA4); err != nil || resp.held[vipA4] {
		t.Errorf("LetGo: %v, the responder still holds %v", err, resp.held)
	}
	if err := closeLink(t, l); err != nil || !resp.closed || arp.closes.Load() != 1 || ip6.closes.Load() != 1 {
		t.Errorf("Close: %v; want the responder and both sockets closed once", err)
	}
}
