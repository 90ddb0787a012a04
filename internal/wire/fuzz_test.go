package wire_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"

	"github.com/vipctl/vip/internal/wire"
)

// FuzzParse feeds arbitrary frames to both parsers. Neither may panic, and
// whatever one accepts must survive being built again from the parsed
// fields and parsed a second time unchanged. The seeds in
// testdata/fuzz/FuzzParse are frames as peers send them (arping, the
// kernel's neighbor discovery); the ones added here are vip's own.
func FuzzParse(f *testing.F) {
	for _, b := range [][]byte{
		must(wire.ARPAnnouncement(ourMAC, vip4)),
		must(wire.ARPGratuitousReply(ourMAC, vip4)),
		must(wire.NeighborAdvertisement(wire.MulticastMAC(wire.AllNodes), ourMAC, vip6, wire.AllNodes, false)),
		must(wire.NeighborAdvertisement(peerMAC, ourMAC, vip6, peer6, true)),
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if info, err := wire.ParseARP(frame); err == nil {
			checkARPRoundTrip(t, frame, info)
		}
		// Random bytes almost never carry a right checksum, so parse each
		// frame a second time with its checksum fixed, to reach the NDP
		// message and option parsers.
		for _, b := range [][]byte{frame, fixChecksum(frame)} {
			if b == nil {
				continue
			}
			if info, err := wire.ParseNDP(b); err == nil {
				checkNDPRoundTrip(t, info)
			} else if info.Message != nil {
				t.Errorf("ParseNDP returned message %+v with error %v", info.Message, err)
			}
		}
	})
}

// fixChecksum returns a copy of frame with the ICMPv6 checksum put right,
// or nil when frame is no untagged IPv6 frame carrying ICMPv6.
func fixChecksum(frame []byte) []byte {
	const ip6 = wire.EthernetHeaderLen
	if len(frame) < wire.ICMPv6Offset+4 || frame[12] != 0x86 || frame[13] != 0xdd || frame[ip6+6] != 58 {
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

func checkARPRoundTrip(t *testing.T, frame []byte, info wire.ARPFrameInfo) {
	t.Helper()
	p := info.Packet
	b, err := wire.ARPFrame(info.EthDst, info.EthSrc, p.Operation, p.SenderHardwareAddr, p.SenderIP, p.TargetHardwareAddr, p.TargetIP)
	if err != nil {
		t.Fatalf("ParseARP accepted % x, but ARPFrame refuses its fields: %v", frame, err)
	}
	again, err := wire.ParseARP(b)
	if err != nil {
		t.Fatalf("ParseARP refuses ARPFrame's % x: %v", b, err)
	}
	if !reflect.DeepEqual(again, info) {
		t.Fatalf("round trip changed the frame:\n got %+v\nwant %+v", again, info)
	}
	// Without a VLAN tag the header and packet are the same bytes.
	const arpEnd = 14 + 28
	if frame[12] == 0x08 && frame[13] == 0x06 && !bytes.Equal(b[:arpEnd], frame[:arpEnd]) {
		t.Fatalf("round trip changed the bytes:\n got % x\nwant % x", b[:arpEnd], frame[:arpEnd])
	}
}

func checkNDPRoundTrip(t *testing.T, info wire.NDPFrameInfo) {
	t.Helper()
	if info.HopLimit != 255 {
		t.Fatalf("ParseNDP accepted hop limit %d", info.HopLimit)
	}
	if !info.Src.Is6() || !info.Dst.Is6() {
		t.Fatalf("ParseNDP returned addresses %v > %v, want plain IPv6", info.Src, info.Dst)
	}
	b, err := wire.NDPFrame(info.EthDst, info.EthSrc, info.Src, info.Dst, info.Message)
	if err != nil {
		t.Fatalf("ParseNDP accepted %+v, but NDPFrame refuses it: %v", info, err)
	}
	again, err := wire.ParseNDP(b)
	if err != nil {
		t.Fatalf("ParseNDP refuses NDPFrame's % x: %v", b, err)
	}
	if !reflect.DeepEqual(again, info) {
		t.Fatalf("round trip changed the frame:\n got %+v\nwant %+v", again, info)
	}
	if got := wire.Checksum(info.Src, info.Dst, b[wire.ICMPv6Offset:]); got != 0 {
		t.Fatalf("NDPFrame's checksum does not verify: sum %#04x", got)
	}
}
