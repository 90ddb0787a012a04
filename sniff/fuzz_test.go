package sniff_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipctl/vip/sniff"
)

var update = flag.Bool("update", false, "rewrite the seed corpus in testdata/fuzz/FuzzDecode from the decoder's test tables")

// seedDir holds FuzzDecode's committed seeds, which go test runs as cases.
var seedDir = filepath.Join("testdata", "fuzz", "FuzzDecode")

// FuzzDecode feeds arbitrary frames to Decode. It must never panic; what it
// accepts must be consistent (checkDecoded) and agree with gopacket's
// reading of the same bytes. Random bytes seldom carry a right ICMPv6
// checksum, so each frame is tried a second time with its checksum put
// right, to reach the message and option parsing.
//
// The seeds in testdata/fuzz/FuzzDecode are the frames of the decoder
// tables, valid and refused; TestSeedCorpus keeps them in step.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, frame []byte) {
		for _, b := range [][]byte{frame, withChecksum(frame)} {
			if b == nil {
				continue
			}
			checkDecoded(t, b)
			crossCheck(t, b)
		}
	})
}

// withChecksum returns a copy of frame with its ICMPv6 checksum put right,
// or nil unless frame is untagged IPv6 with ICMPv6 right after the header.
func withChecksum(frame []byte) []byte {
	if len(frame) < icmpOffset+4 || frame[12] != 0x86 || frame[13] != 0xdd || frame[14+6] != 58 {
		return nil
	}
	plen := int(binary.BigEndian.Uint16(frame[14+4:]))
	if plen < 4 || icmpOffset+plen > len(frame) {
		return nil
	}
	b := append([]byte(nil), frame[:icmpOffset+plen]...)
	setChecksum(b)
	return append(b, frame[icmpOffset+plen:]...)
}

// crossCheck compares what Decode accepted with gopacket's decoding of the
// same frame. Only untagged frames are compared: gopacket does not know
// every VLAN EtherType Decode reads.
func crossCheck(t *testing.T, frame []byte) {
	t.Helper()
	o, err := sniff.Decode(frame, ts0)
	if err != nil || len(frame) < 14 {
		return
	}
	if et := binary.BigEndian.Uint16(frame[12:]); et != 0x0806 && et != 0x86dd {
		return
	}
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	addr := func(b []byte) netip.Addr {
		a, _ := netip.AddrFromSlice(b)
		return a
	}
	if o.Kind.IsARP() {
		a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
		if !ok {
			t.Fatalf("Decode accepted %+v, gopacket finds no ARP in % x", o, frame)
		}
		if addr(a.SourceProtAddress) != o.Sender || addr(a.DstProtAddress) != o.Target ||
			!bytes.Equal(a.SourceHwAddress, o.SenderMAC[:]) || !bytes.Equal(a.DstHwAddress, o.TargetMAC[:]) {
			t.Fatalf("Decode and gopacket disagree:\n got %+v\ngopacket %+v", o, a)
		}
		return
	}
	ip6, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	ns, _ := p.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	na, _ := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if ip6 == nil || (ns == nil && na == nil) {
		// gopacket gives up on some extension headers Decode walks
		// (a routing header of an unknown type, for one).
		if frame[14+6] == 58 {
			t.Fatalf("Decode accepted %+v, gopacket finds no solicitation or advertisement in % x", o, frame)
		}
		return
	}
	if addr(ip6.SrcIP) != o.Sender || addr(ip6.DstIP) != o.Dst {
		t.Fatalf("Decode and gopacket disagree on addresses: got %v > %v, gopacket %v > %v", o.Sender, o.Dst, ip6.SrcIP, ip6.DstIP)
	}
	var target netip.Addr
	var opts layers.ICMPv6Options
	want := layers.ICMPv6OptSourceAddress
	if ns != nil {
		target, opts = addr(ns.TargetAddress), ns.Options
	} else {
		target, opts, want = addr(na.TargetAddress), na.Options, layers.ICMPv6OptTargetAddress
		if na.Router() != o.Router || na.Solicited() != o.Solicited || na.Override() != o.Override {
			t.Fatalf("Decode and gopacket disagree on flags: got %+v, gopacket %#x", o, na.Flags)
		}
	}
	if target != o.Target {
		t.Fatalf("Decode and gopacket disagree on the target: got %v, gopacket %v", o.Target, target)
	}
	var lla []byte
	for _, opt := range opts {
		if opt.Type == want && len(opt.Data) >= 6 {
			lla = opt.Data[:6]
			break
		}
	}
	got := o.SenderMAC
	if na != nil {
		got = o.TargetMAC
	}
	if (lla != nil) != o.LinkLayerOption || (lla != nil && !bytes.Equal(lla, got[:])) {
		t.Fatalf("Decode and gopacket disagree on the link-layer option: got %v (present %v), gopacket % x", got, o.LinkLayerOption, lla)
	}
}

// TestSeedCorpus checks that the committed seeds are the frames of the
// decoder tables, one file per case, and rewrites them under -update.
func TestSeedCorpus(t *testing.T) {
	want := map[string][]byte{}
	for _, c := range validCases(t) {
		want[c.name] = c.frame
	}
	for _, c := range badCases(t) {
		want["bad-"+c.name] = c.frame
	}
	if *update {
		if err := os.RemoveAll(seedDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(seedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, frame := range want {
			if err := os.WriteFile(filepath.Join(seedDir, name), seedFile(frame), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(seedDir)
	if err != nil {
		t.Fatalf("read seeds (run go test -run TestSeedCorpus -update to write them): %v", err)
	}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Name()] = true
		frame, ok := want[e.Name()]
		if !ok {
			t.Errorf("seed %s is no case of the decoder tables; run go test -run TestSeedCorpus -update", e.Name())
			continue
		}
		got, err := os.ReadFile(filepath.Join(seedDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, seedFile(frame)) {
			t.Errorf("seed %s differs from its case; run go test -run TestSeedCorpus -update", e.Name())
		}
	}
	for name := range want {
		if !have[name] {
			t.Errorf("case %s has no seed; run go test -run TestSeedCorpus -update", name)
		}
	}
}

// seedFile is a frame in the corpus file format of go test -fuzz.
func seedFile(frame []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(frame)))
}
