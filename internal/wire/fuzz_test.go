package wire_test

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/vipctl/vip/internal/wire"
)

// FuzzParse feeds arbitrary frames to the codec in both modes. It may not
// panic; what it refuses it refuses with the zero Frame and exactly one
// class of error; what the responder's mode accepts the capture's accepts
// the same; and whatever parses survives being built again from its fields
// and parsed a second time unchanged. The seeds in testdata/fuzz/FuzzParse
// are frames as peers send them (arping, the kernel's neighbor discovery,
// tagged and with extension headers); the ones added here are vip's own.
func FuzzParse(f *testing.F) {
	for _, tt := range arpCases() {
		f.Add(putARP(tt.dst, tt.src, tt.a))
	}
	for _, tt := range ndCases() {
		f.Add(putND(tt.dst, tt.src, tt.n))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		// Random bytes almost never carry a right checksum, so parse each
		// frame a second time with its checksum fixed, to reach the
		// message and option checks.
		for _, b := range [][]byte{frame, fixChecksum(frame)} {
			if b == nil {
				continue
			}
			answer, aerr := wire.Parse(b, wire.Answer)
			capture, cerr := wire.Parse(b, wire.Capture)
			checkRefusal(t, answer, aerr)
			checkRefusal(t, capture, cerr)
			if aerr == nil && (cerr != nil || capture != answer) {
				t.Fatalf("the responder accepts % x as %+v, the capture as %+v (%v)", b, answer, capture, cerr)
			}
			if cerr == nil {
				checkRoundTrip(t, b, capture)
			}
		}
	})
}

var classes = []error{wire.ErrNotNeighbor, wire.ErrTruncated, wire.ErrMalformed, wire.ErrInvalid}

func checkRefusal(t *testing.T, f wire.Frame, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if f != (wire.Frame{}) {
		t.Fatalf("Parse returned %+v with error %v", f, err)
	}
	n := 0
	for _, c := range classes {
		if errors.Is(err, c) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %q wraps %d classes, want 1", err, n)
	}
}

// checkRoundTrip builds f again and parses the result: the same frame, as
// the builders write it untagged.
func checkRoundTrip(t *testing.T, frame []byte, f wire.Frame) {
	t.Helper()
	buf := make([]byte, wire.NDLenWithLinkLayer)
	var n int
	switch f.EtherType {
	case wire.EtherTypeARP:
		n = wire.PutARP(buf, f.EthDst, f.EthSrc, &f.ARP)
	case wire.EtherTypeIPv6:
		n = wire.PutND(buf, f.EthDst, f.EthSrc, &f.ND)
	default:
		t.Fatalf("Parse accepted EtherType %#04x", f.EtherType)
	}
	if n == 0 {
		t.Fatalf("Parse accepted % x as %+v, but the builder refuses it", frame, f)
	}
	again, err := wire.Parse(buf[:n], wire.Answer)
	if err != nil {
		t.Fatalf("Parse refuses the builder's % x (from %+v): %v", buf[:n], f, err)
	}
	want := f
	want.VLAN = 0
	if again != want {
		t.Fatalf("round trip changed the frame:\n got %+v\nwant %+v", again, want)
	}
	// An untagged ARP frame is the same bytes as its rebuild.
	if f.EtherType == wire.EtherTypeARP && binary.BigEndian.Uint16(frame[12:]) == wire.EtherTypeARP &&
		string(frame[:wire.ARPLen]) != string(buf[:n]) {
		t.Fatalf("round trip changed the bytes:\n got % x\nwant % x", buf[:n], frame[:wire.ARPLen])
	}
}

// fixChecksum returns a copy of frame with the ICMPv6 checksum put right,
// or nil when frame is no untagged IPv6 frame carrying ICMPv6 right after
// its header.
func fixChecksum(frame []byte) []byte {
	const ip6 = wire.EthernetHeaderLen
	if len(frame) < wire.ICMPv6Offset+4 || binary.BigEndian.Uint16(frame[12:]) != wire.EtherTypeIPv6 || frame[ip6+6] != 58 {
		return nil
	}
	plen := int(binary.BigEndian.Uint16(frame[ip6+4:]))
	if plen < 4 || wire.ICMPv6Offset+plen > len(frame) {
		return nil
	}
	b := append([]byte(nil), frame...)
	src := netip.AddrFrom16([16]byte(b[ip6+8 : ip6+24]))
	dst := netip.AddrFrom16([16]byte(b[ip6+24 : ip6+40]))
	icmp := b[wire.ICMPv6Offset : wire.ICMPv6Offset+plen]
	icmp[2], icmp[3] = 0, 0
	binary.BigEndian.PutUint16(icmp[2:], wire.Checksum(src, dst, icmp))
	return b
}
