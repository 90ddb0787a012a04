package sniff_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/sniff"
)

// decodeCase is a frame and what Decode must make of it.
type decodeCase struct {
	name  string
	frame []byte
	want  sniff.Observation
	// padded frames have bytes past their last header, so some of their
	// prefixes decode too.
	padded bool
}

// validCases are frames of every kind Decode tells apart, as peers send
// them.
func validCases(t testing.TB) []decodeCase {
	t.Helper()
	arp := func(s arpSpec, k sniff.Kind) sniff.Observation {
		return sniff.Observation{Time: ts0, Kind: k, EthSrc: s.ethSrc, EthDst: s.ethDst,
			Sender: s.sender, SenderMAC: s.senderMAC, Target: s.target, TargetMAC: s.targetMAC}
	}
	ndp := func(s ndpSpec, k sniff.Kind) sniff.Observation {
		o := sniff.Observation{Time: ts0, Kind: k, EthSrc: s.ethSrc, EthDst: s.ethDst,
			Sender: s.src, Dst: s.dst, Target: s.target}
		if s.lla != nil {
			o.LinkLayerOption = true
			if k == sniff.KindAdvertisement {
				o.TargetMAC = *s.lla
			} else {
				o.SenderMAC = *s.lla
			}
		}
		o.Router, o.Solicited, o.Override = s.flags&0x80 != 0, s.flags&0x40 != 0, s.flags&0x20 != 0
		return o
	}
	var cases []decodeCase
	addARP := func(name string, s arpSpec, k sniff.Kind) {
		o := arp(s, k)
		if len(s.vlans) > 0 {
			o.VLAN = s.vlans[0]
		}
		cases = append(cases, decodeCase{name: name, frame: buildARP(t, s), want: o})
	}
	addNDP := func(name string, s ndpSpec, k sniff.Kind) {
		o := ndp(s, k)
		if len(s.vlans) > 0 {
			o.VLAN = s.vlans[0]
		}
		cases = append(cases, decodeCase{name: name, frame: buildNDP(t, s), want: o})
	}

	addARP("arp-who-has", whoHas(), sniff.KindWhoHas)
	addARP("arp-probe", probe(), sniff.KindProbe)
	addARP("arp-announcement", announcement(rogueMAC), sniff.KindAnnouncement)
	bcastAnnouncement := announcement(rogueMAC)
	bcastAnnouncement.targetMAC = bcastMAC
	addARP("arp-announcement-broadcast-target", bcastAnnouncement, sniff.KindAnnouncement)
	addARP("arp-reply", reply(ourMAC), sniff.KindReply)
	addARP("arp-gratuitous-reply", gratuitousReply(ourMAC), sniff.KindGratuitousReply)
	proxied := reply(ourMAC)
	proxied.ethSrc = otherMAC // a proxy answers for a wire.MAC not its own
	addARP("arp-reply-proxied", proxied, sniff.KindReply)
	tagged := whoHas()
	tagged.vlans = []uint16{10}
	addARP("arp-who-has-vlan", tagged, sniff.KindWhoHas)
	qinq := whoHas()
	qinq.vlans = []uint16{100, 10}
	addARP("arp-who-has-qinq", qinq, sniff.KindWhoHas)

	padded := decodeCase{name: "arp-who-has-padded", frame: buildARP(t, whoHas()), want: arp(whoHas(), sniff.KindWhoHas), padded: true}
	padded.frame = append(padded.frame, make([]byte, 60-len(padded.frame))...)
	cases = append(cases, padded)

	addNDP("ns", solicitation(), sniff.KindSolicitation)
	addNDP("ns-unreachability", unreachability(), sniff.KindUnreachability)
	nudSLLA := unreachability()
	nudSLLA.lla = mac(clientMAC)
	addNDP("ns-unreachability-sllao", nudSLLA, sniff.KindUnreachability)
	addNDP("ns-dad", dad(clientMAC), sniff.KindDAD)
	addNDP("na-solicited", advertisement(ourMAC, true), sniff.KindAdvertisement)
	addNDP("na-unsolicited", advertisement(rogueMAC, false), sniff.KindAdvertisement)
	router := advertisement(otherMAC, true)
	router.flags, router.lla = 0xc0, nil
	addNDP("na-router-no-tllao", router, sniff.KindAdvertisement)
	nonce := solicitation()
	nonce.nonce = true
	addNDP("ns-nonce-then-sllao", nonce, sniff.KindSolicitation)
	hbh := solicitation()
	hbh.ext = []layers.IPProtocol{layers.IPProtocolIPv6HopByHop}
	addNDP("ns-hop-by-hop", hbh, sniff.KindSolicitation)
	chain := advertisement(rogueMAC, false)
	chain.ext = []layers.IPProtocol{layers.IPProtocolIPv6HopByHop, layers.IPProtocolIPv6Destination}
	addNDP("na-hop-by-hop-destination", chain, sniff.KindAdvertisement)
	dst := dad(clientMAC)
	dst.ext = []layers.IPProtocol{layers.IPProtocolIPv6Destination}
	addNDP("ns-dad-destination", dst, sniff.KindDAD)
	taggedNS := solicitation()
	taggedNS.vlans = []uint16{10}
	addNDP("ns-vlan", taggedNS, sniff.KindSolicitation)

	paddedNS := decodeCase{name: "ns-padded", frame: buildNDP(t, unreachability()), want: ndp(unreachability(), sniff.KindUnreachability), padded: true}
	paddedNS.frame = append(paddedNS.frame, 0, 0, 0, 0)
	cases = append(cases, paddedNS)
	return cases
}

// badCase is a frame Decode must refuse, and the class of the error.
type badCase struct {
	name  string
	frame []byte
	want  error
	// detail is part of the error message, saying what exactly is wrong.
	detail string
}

func badCases(t testing.TB) []badCase {
	t.Helper()
	var cases []badCase
	add := func(name string, frame []byte, want error, detail string) {
		cases = append(cases, badCase{name, frame, want, detail})
	}
	arpWith := func(f func(b []byte)) []byte {
		b := buildARP(t, whoHas())
		f(b[14:])
		return b
	}
	ndpWith := func(s ndpSpec, f func(*ndpSpec)) []byte {
		f(&s)
		return buildNDP(t, s)
	}

	add("empty", nil, sniff.ErrTruncated, "shorter than an Ethernet header")
	add("ethernet-short", make([]byte, 13), sniff.ErrTruncated, "shorter than an Ethernet header")
	ipv4 := serialize(t, &layers.Ethernet{DstMAC: hw(ourMAC), SrcMAC: hw(clientMAC), EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: ip(client4), DstIP: ip(vip4)})
	add("ipv4", ipv4, sniff.ErrNotNeighbor, "EtherType")
	threeTags := whoHas()
	threeTags.vlans = []uint16{1, 2, 3}
	add("arp-three-vlan-tags", buildARP(t, threeTags), sniff.ErrNotNeighbor, "more than two VLAN tags")
	tagOnly := buildARP(t, arpSpec{ethDst: bcastMAC, ethSrc: clientMAC, vlans: []uint16{10}})[:16]
	add("vlan-tag-cut", tagOnly, sniff.ErrTruncated, "inside a VLAN tag")
	add("arp-ieee802", arpWith(func(b []byte) { b[1] = 6 }), sniff.ErrNotNeighbor, "another hardware or protocol")
	add("arp-for-ipv6", arpWith(func(b []byte) { b[2], b[3] = 0x86, 0xdd }), sniff.ErrNotNeighbor, "another hardware or protocol")
	add("arp-hlen-8", arpWith(func(b []byte) { b[4] = 8 }), sniff.ErrMalformed, "address lengths")
	add("arp-plen-16", arpWith(func(b []byte) { b[5] = 16 }), sniff.ErrMalformed, "address lengths")
	add("arp-op-rarp", arpWith(func(b []byte) { b[7] = 3 }), sniff.ErrMalformed, "operation")

	add("ipv6-version-4", func() []byte {
		b := buildNDP(t, solicitation())
		b[14] = 0x40
		return b
	}(), sniff.ErrMalformed, "version")
	add("ipv6-payload-past-frame", func() []byte {
		b := buildNDP(t, solicitation())
		b[14+5] += 8
		return b
	}(), sniff.ErrTruncated, "payload longer than the frame")
	add("ipv6-payload-zero", func() []byte {
		b := buildNDP(t, solicitation())
		b[14+4], b[14+5] = 0, 0
		return b
	}(), sniff.ErrMalformed, "payload length 0")
	ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: ip(client6), DstIP: ip(vip6)}
	udp := &layers.UDP{SrcPort: 5353, DstPort: 5353}
	if err := udp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	udp6 := serialize(t, &layers.Ethernet{DstMAC: hw(ourMAC), SrcMAC: hw(clientMAC), EthernetType: layers.EthernetTypeIPv6}, ip6, udp)
	add("ipv6-udp", udp6, sniff.ErrNotNeighbor, "without ICMPv6")
	add("icmpv6-echo", ndpWith(solicitation(), func(s *ndpSpec) { s.typ, s.body = layers.ICMPv6TypeEchoRequest, []byte{0, 1, 0, 1} }), sniff.ErrNotNeighbor, "ICMPv6 other than")
	add("mld-report-hop-by-hop", ndpWith(solicitation(), func(s *ndpSpec) {
		s.typ, s.hopLimit, s.body = 143, 1, make([]byte, 4)
		s.ext = []layers.IPProtocol{layers.IPProtocolIPv6HopByHop}
	}), sniff.ErrNotNeighbor, "ICMPv6 other than")
	add("router-solicitation", ndpWith(solicitation(), func(s *ndpSpec) { s.typ, s.body = layers.ICMPv6TypeRouterSolicitation, make([]byte, 4) }), sniff.ErrNotNeighbor, "ICMPv6 other than")
	add("icmpv6-cut", func() []byte {
		b := ndpWith(solicitation(), func(s *ndpSpec) { s.body = []byte{} })
		b[14+4], b[14+5] = 0, 2
		return b[:icmpOffset+2]
	}(), sniff.ErrTruncated, "shorter than its header")

	add("ns-hop-limit-64", ndpWith(solicitation(), func(s *ndpSpec) { s.hopLimit = 64 }), sniff.ErrInvalid, "hop limit")
	add("na-hop-limit-1", ndpWith(advertisement(rogueMAC, false), func(s *ndpSpec) { s.hopLimit = 1 }), sniff.ErrInvalid, "hop limit")
	add("ns-code-1", ndpWith(solicitation(), func(s *ndpSpec) { s.code = 1 }), sniff.ErrInvalid, "code")
	add("ns-bad-checksum", func() []byte {
		b := buildNDP(t, solicitation())
		b[icmpOffset+2] ^= 0xff
		return b
	}(), sniff.ErrInvalid, "checksum")
	add("ns-short-body", ndpWith(solicitation(), func(s *ndpSpec) { s.body = make([]byte, 16) }), sniff.ErrInvalid, "shorter than 24 bytes")
	add("ns-multicast-target", ndpWith(solicitation(), func(s *ndpSpec) { s.target = allNodes }), sniff.ErrInvalid, "multicast target")
	add("na-multicast-target", ndpWith(advertisement(rogueMAC, false), func(s *ndpSpec) { s.target = snm6 }), sniff.ErrInvalid, "multicast target")
	add("ns-dad-to-all-nodes", ndpWith(dad(clientMAC), func(s *ndpSpec) { s.dst = allNodes }), sniff.ErrInvalid, "not sent to a solicited-node group")
	add("ns-dad-with-sllao", ndpWith(dad(clientMAC), func(s *ndpSpec) { s.lla = mac(clientMAC) }), sniff.ErrInvalid, "with a source link-layer address")
	add("na-solicited-to-all-nodes", ndpWith(advertisement(rogueMAC, false), func(s *ndpSpec) { s.flags = 0x60 }), sniff.ErrInvalid, "solicited advertisement sent to a multicast group")
	// A solicitation body by hand: reserved word, target, then options.
	nsBody := func(opts ...byte) []byte {
		b := append(make([]byte, 4), vip6.AsSlice()...)
		return append(b, opts...)
	}
	add("ns-option-length-0", ndpWith(solicitation(), func(s *ndpSpec) { s.body = nsBody(1, 0, 0, 0, 0, 0, 0, 0) }), sniff.ErrInvalid, "length 0")
	add("ns-option-past-end", ndpWith(solicitation(), func(s *ndpSpec) { s.body = nsBody(1, 2, 0, 0, 0x5e, 0, 0x53, 2) }), sniff.ErrMalformed, "runs past the message")
	add("ns-option-one-byte", ndpWith(solicitation(), func(s *ndpSpec) { s.body = nsBody(1) }), sniff.ErrMalformed, "runs past the message")
	add("ns-fragment", ndpWith(solicitation(), func(s *ndpSpec) { s.ext = []layers.IPProtocol{layers.IPProtocolIPv6Fragment} }), sniff.ErrInvalid, "fragmented")
	add("ns-hop-by-hop-second", ndpWith(solicitation(), func(s *ndpSpec) {
		s.ext = []layers.IPProtocol{layers.IPProtocolIPv6Destination, layers.IPProtocolIPv6HopByHop}
	}), sniff.ErrMalformed, "not first")
	add("ns-long-chain", ndpWith(solicitation(), func(s *ndpSpec) {
		for range 5 {
			s.ext = append(s.ext, layers.IPProtocolIPv6Destination)
		}
	}), sniff.ErrMalformed, "more IPv6 extension headers")
	add("ns-extension-past-payload", func() []byte {
		b := ndpWith(solicitation(), func(s *ndpSpec) { s.ext = []layers.IPProtocol{layers.IPProtocolIPv6Destination} })
		b[icmpOffset+1] = 200 // the header"s length, in 8-byte units
		return b
	}(), sniff.ErrTruncated, "extension header runs past")
	return cases
}

var classes = []error{sniff.ErrNotNeighbor, sniff.ErrTruncated, sniff.ErrMalformed, sniff.ErrInvalid}

// checkClass fails unless err wraps exactly one class of decode error.
func checkClass(t testing.TB, err error) {
	t.Helper()
	n := 0
	for _, c := range classes {
		if errors.Is(err, c) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %q wraps %d of the error classes, want exactly 1", err, n)
	}
}

func TestDecode(t *testing.T) {
	for _, tt := range validCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sniff.Decode(tt.frame, ts0)
			if err != nil {
				t.Fatalf("Decode: %v\n% x", err, tt.frame)
			}
			if got != tt.want {
				t.Errorf("Decode:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, tt := range badCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sniff.Decode(tt.frame, ts0)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode: got %+v, error %v; want an error wrapping %q\n% x", got, err, tt.want, tt.frame)
			}
			checkClass(t, err)
			if !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("Decode: got error %q, want one saying %q", err, tt.detail)
			}
			if got != (sniff.Observation{}) {
				t.Errorf("Decode returned %+v with its error, want the zero Observation", got)
			}
		})
	}
}

// TestDecodeTruncated cuts every frame at every length: each cut is refused
// as truncated, none panics.
func TestDecodeTruncated(t *testing.T) {
	for _, tt := range validCases(t) {
		if tt.padded {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			for n := range len(tt.frame) {
				got, err := sniff.Decode(tt.frame[:n], ts0)
				if !errors.Is(err, sniff.ErrTruncated) {
					t.Errorf("Decode of the first %d of %d bytes: got %+v, error %v; want ErrTruncated", n, len(tt.frame), got, err)
				}
			}
		})
	}
}

// TestDecodeCorrupted changes every byte of every frame in turn: whatever
// Decode makes of it is either a consistent observation or a classified
// error, and never a panic.
func TestDecodeCorrupted(t *testing.T) {
	for _, tt := range validCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, len(tt.frame))
			for i := range tt.frame {
				for _, x := range []byte{0x01, 0x80, 0xff} {
					copy(b, tt.frame)
					b[i] ^= x
					checkDecoded(t, b)
				}
			}
		})
	}
}

// checkDecoded decodes frame and checks what every result must satisfy.
func checkDecoded(t testing.TB, frame []byte) {
	t.Helper()
	o, err := sniff.Decode(frame, ts0)
	if err != nil {
		checkClass(t, err)
		if o != (sniff.Observation{}) {
			t.Fatalf("Decode returned %+v with error %v", o, err)
		}
		return
	}
	if o.Kind == sniff.KindUnknown || o.Kind.String() == fmt.Sprintf("kind(%d)", o.Kind) {
		t.Fatalf("Decode returned kind %v for % x", o.Kind, frame)
	}
	if !o.Time.Equal(ts0) {
		t.Fatalf("Decode returned time %v, want %v", o.Time, ts0)
	}
	if o.Kind.IsARP() {
		if !o.Sender.Is4() || !o.Target.Is4() || o.Dst.IsValid() || o.LinkLayerOption {
			t.Fatalf("ARP observation with IPv6 fields: %+v", o)
		}
		return
	}
	if !o.Sender.Is6() || !o.Target.Is6() || !o.Dst.Is6() || o.Target.IsMulticast() {
		t.Fatalf("NDP observation with wrong addresses: %+v", o)
	}
	if o.Kind == sniff.KindDAD && (!o.Sender.IsUnspecified() || o.LinkLayerOption) {
		t.Fatalf("DAD observation from %v, link-layer option %v", o.Sender, o.LinkLayerOption)
	}
	if o.Kind == sniff.KindAdvertisement && o.Solicited && o.Dst.IsMulticast() {
		t.Fatalf("solicited advertisement to %v accepted", o.Dst)
	}
}

func TestKinds(t *testing.T) {
	tests := []struct {
		kind                 sniff.Kind
		name                 string
		arp, request, answer bool
	}{
		{sniff.KindWhoHas, "who-has", true, true, false},
		{sniff.KindProbe, "probe", true, true, false},
		{sniff.KindAnnouncement, "announcement", true, false, true},
		{sniff.KindReply, "reply", true, false, true},
		{sniff.KindGratuitousReply, "gratuitous-reply", true, false, true},
		{sniff.KindSolicitation, "solicitation", false, true, false},
		{sniff.KindUnreachability, "unreachability", false, true, false},
		{sniff.KindDAD, "dad", false, true, false},
		{sniff.KindAdvertisement, "advertisement", false, false, true},
		{sniff.KindUnknown, "unknown", false, false, false},
		{sniff.Kind(200), "kind(200)", false, false, false},
	}
	for _, tt := range tests {
		if got := tt.kind.String(); got != tt.name {
			t.Errorf("Kind(%d).String(): got %q, want %q", tt.kind, got, tt.name)
		}
		if got := [3]bool{tt.kind.IsARP(), tt.kind.IsRequest(), tt.kind.IsAnswer()}; got != [3]bool{tt.arp, tt.request, tt.answer} {
			t.Errorf("%v: got IsARP, IsRequest, IsAnswer %v, want %v", tt.kind, got, [3]bool{tt.arp, tt.request, tt.answer})
		}
	}
}

// TestClaim checks which binding each kind of frame asserts.
func TestClaim(t *testing.T) {
	byName := map[string]decodeCase{}
	for _, c := range validCases(t) {
		byName[c.name] = c
	}
	tests := []struct {
		frame string
		ok    bool
		addr  string
		mac   wire.MAC
	}{
		{"arp-who-has", true, "192.0.2.3", clientMAC},
		{"arp-probe", false, "", wire.MAC{}},
		{"arp-announcement", true, "192.0.2.10", rogueMAC},
		{"arp-reply", true, "192.0.2.10", ourMAC},
		// The ARP sender hardware address is what neighbours learn,
		// whoever sent the frame.
		{"arp-reply-proxied", true, "192.0.2.10", ourMAC},
		{"arp-gratuitous-reply", true, "192.0.2.10", ourMAC},
		{"ns", true, "2001:db8::3", clientMAC},
		{"ns-unreachability", true, "2001:db8::3", clientMAC},
		{"ns-dad", false, "", wire.MAC{}},
		{"na-solicited", true, "2001:db8::10", ourMAC},
		{"na-unsolicited", true, "2001:db8::10", rogueMAC},
		{"na-router-no-tllao", true, "2001:db8::10", otherMAC},
	}
	for _, tt := range tests {
		c, ok := byName[tt.frame]
		if !ok {
			t.Fatalf("no frame %q", tt.frame)
		}
		addr, m, ok := c.want.Claim()
		if ok != tt.ok || (ok && (addr.String() != tt.addr || m != tt.mac)) {
			t.Errorf("%s: Claim() = %v, %v, %v; want %v, %v, %v", tt.frame, addr, m, ok, tt.addr, tt.mac, tt.ok)
		}
	}
	// A reply from 0.0.0.0 claims nothing either.
	o := byName["arp-reply"].want
	o.Sender = zero4
	if addr, m, ok := o.Claim(); ok {
		t.Errorf("reply from 0.0.0.0: Claim() = %v, %v, true; want nothing", addr, m)
	}
}

func TestDecodeAllocatesNothing(t *testing.T) {
	cases := validCases(t)
	allocs := testing.AllocsPerRun(100, func() {
		for _, c := range cases {
			if _, err := sniff.Decode(c.frame, ts0); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("Decode of %d frames: got %v allocations, want 0", len(cases), allocs)
	}
	bad := badCases(t)
	allocs = testing.AllocsPerRun(100, func() {
		for _, c := range bad {
			_, _ = sniff.Decode(c.frame, ts0)
		}
	})
	if allocs != 0 {
		t.Errorf("Decode refusing %d frames: got %v allocations, want 0", len(bad), allocs)
	}
}

// BenchmarkDecode decodes the frames a busy segment carries most: who-has,
// replies, solicitations and advertisements, one of them behind a
// hop-by-hop header.
func BenchmarkDecode(b *testing.B) {
	var frames [][]byte
	for _, c := range validCases(b) {
		switch c.name {
		case "arp-who-has", "arp-reply", "arp-announcement", "ns", "ns-unreachability", "na-solicited", "ns-hop-by-hop":
			frames = append(frames, c.frame)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := sniff.Decode(frames[i%len(frames)], ts0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkDecodeKind decodes one kind of frame at a time.
func BenchmarkDecodeKind(b *testing.B) {
	for _, c := range validCases(b) {
		switch c.name {
		case "arp-who-has", "ns", "na-solicited", "na-hop-by-hop-destination":
		default:
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sniff.Decode(c.frame, ts0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
