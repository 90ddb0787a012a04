package announce

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/wire"
)

// TestAnnounceFrames: the frames Announce builds in its own buffer are,
// byte for byte, the ones the wire package builds with mdlayher's
// marshallers, for every frame kind, to the right destination.
func TestAnnounceFrames(t *testing.T) {
	arpc, ip6c := newFakeConn(), newFakeConn()
	l := benchLink(t, arpc, ip6c)
	must := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mac := benchLinkMAC
	n, err := l.Announce(benchVIP4, FrameARPRequest|FrameARPReply)
	if err != nil || n != 2 {
		t.Fatalf("announce %s: %d frames, %v; want 2", benchVIP4, n, err)
	}
	for _, want := range []struct {
		frame []byte
		to    net.HardwareAddr
	}{
		{must(wire.ARPAnnouncement(mac, benchVIP4)), wire.Broadcast},
		{must(wire.ARPGratuitousReply(mac, benchVIP4)), wire.Broadcast},
	} {
		got := <-arpc.out
		if !bytes.Equal(got.frame, want.frame) || got.to.String() != want.to.String() {
			t.Errorf("ARP frame\n got %x to %s\nwant %x to %s", got.frame, got.to, want.frame, want.to)
		}
	}
	n, err = l.Announce(benchVIP6, FrameNA|FrameNARouters)
	if err != nil || n != 2 {
		t.Fatalf("announce %s: %d frames, %v; want 2", benchVIP6, n, err)
	}
	for _, group := range []netip.Addr{wire.AllNodes, wire.AllRouters} {
		want := must(wire.NeighborAdvertisement(wire.MulticastMAC(group), mac, benchVIP6, group, false))
		got := <-ip6c.out
		if !bytes.Equal(got.frame, want) || got.to.String() != wire.MulticastMAC(group).String() {
			t.Errorf("NA to %s\n got %x to %s\nwant %x", group, got.frame, got.to, want)
		}
	}
	// An ARP round after an IPv6 one: no byte of the NA stays behind.
	if _, err := l.Announce(benchVIP4, FrameARPRequest); err != nil {
		t.Fatal(err)
	}
	if got := <-arpc.out; !bytes.Equal(got.frame, must(wire.ARPAnnouncement(mac, benchVIP4))) {
		t.Errorf("ARP after NA: got %x", got.frame)
	}
}

// TestAnnounceAllocatesNothing: a round written to a real socket allocates
// nothing, for either family.
func TestAnnounceAllocatesNothing(t *testing.T) {
	peer4, arpEnd := benchSocketPair(t)
	peer6, ip6End := benchSocketPair(t)
	l := benchLink(t, arpEnd, ip6End)
	buf := make([]byte, 1500)
	for _, tt := range []struct {
		addr   netip.Addr
		frames Frames
		peer   int
	}{{benchVIP4, FrameARPRequest | FrameARPReply, peer4}, {benchVIP6, FrameNA | FrameNARouters, peer6}} {
		allocs := testing.AllocsPerRun(200, func() {
			if n, err := l.Announce(tt.addr, tt.frames); err != nil || n != 2 {
				t.Fatalf("announce %s: %d, %v", tt.addr, n, err)
			}
			for range 2 {
				if _, err := unix.Read(tt.peer, buf); err != nil {
					t.Fatal(err)
				}
			}
		})
		if allocs != 0 {
			t.Errorf("announce %s: %v allocations a round, want 0", tt.addr, allocs)
		}
	}
}

// BenchmarkAnnounce is one gratuitous round of an IPv6 claim (one NA)
// written to a real socket.
func BenchmarkAnnounce(b *testing.B) {
	peer, ip6End := benchSocketPair(b)
	l := benchLink(b, newFakeConn(), ip6End)
	buf := make([]byte, 1500)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Announce(benchVIP6, FrameNA); err != nil {
			b.Fatal(err)
		}
		if _, err := unix.Read(peer, buf); err != nil {
			b.Fatal(err)
		}
	}
}
