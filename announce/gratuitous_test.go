package announce

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"
)

// TestAnnounceFrames: the frames Announce builds in its own buffer are,
// byte for byte, the ones wiretest builds with mdlayher's
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
		{must(wiretest.ARPAnnouncement(mac, benchVIP4)), wire.Broadcast},
		{must(wiretest.ARPGratuitousReply(mac, benchVIP4)), wire.Broadcast},
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
		want := must(wiretest.NeighborAdvertisement(wiretest.MulticastMAC(group), mac, benchVIP6, group, false))
		got := <-ip6c.out
		if !bytes.Equal(got.frame, want) || got.to.String() != wiretest.MulticastMAC(group).String() {
			t.Errorf("NA to %s\n got %x to %s\nwant %x", group, got.frame, got.to, want)
		}
	}
	// An ARP round after an IPv6 one: no byte of the NA stays behind.
	if _, err := l.Announce(benchVIP4, FrameARPRequest); err != nil {
		t.Fatal(err)
	}
	if got := <-arpc.out; !bytes.Equal(got.frame, must(wiretest.ARPAnnouncement(mac, benchVIP4))) {
		t.Errorf("ARP after NA: got %x", got.frame)
	}
}

// TestSenderAllocatesNothing: a round, and a probe, written to a real
// socket allocate nothing, for either family.
func TestSenderAllocatesNothing(t *testing.T) {
	peer4, arpEnd := benchSocketPair(t)
	peer6, ip6End := benchSocketPair(t)
	l := benchLink(t, arpEnd, ip6End)
	buf := make([]byte, 1500)
	round := func(frames FrameKinds) func(netip.Addr) (int, error) {
		return func(a netip.Addr) (int, error) { return l.Announce(a, frames) }
	}
	for _, tt := range []struct {
		name string
		addr netip.Addr
		send func(netip.Addr) (int, error)
		want int
		peer int
	}{
		{"round", benchVIP4, round(FrameARPRequest | FrameARPReply), 2, peer4},
		{"round", benchVIP6, round(FrameNA | FrameNARouters), 2, peer6},
		{"probe", benchVIP4, l.Probe, 1, peer4},
		{"probe", benchVIP6, l.Probe, 1, peer6},
	} {
		allocs := testing.AllocsPerRun(200, func() {
			if n, err := tt.send(tt.addr); err != nil || n != tt.want {
				t.Fatalf("%s of %s: %d frames, %v; want %d", tt.name, tt.addr, n, err, tt.want)
			}
			for range tt.want {
				if _, err := unix.Read(tt.peer, buf); err != nil {
					t.Fatal(err)
				}
			}
		})
		if allocs != 0 {
			t.Errorf("%s of %s: %v allocations, want 0", tt.name, tt.addr, allocs)
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

// TestProbeFrames: the probes Probe builds in the sender's buffer are, byte
// for byte, the ones wiretest builds with mdlayher's marshallers, to the
// right destination.
func TestProbeFrames(t *testing.T) {
	arpc, ip6c := newFakeConn(), newFakeConn()
	l := benchLink(t, arpc, ip6c)
	for _, tt := range []struct {
		addr   netip.Addr
		conn   *fakeConn
		want   func() ([]byte, error)
		wantTo net.HardwareAddr
	}{
		{benchVIP4, arpc, func() ([]byte, error) { return wiretest.ARPProbe(benchLinkMAC, benchVIP4) }, wire.Broadcast},
		{benchVIP6, ip6c, func() ([]byte, error) { return wiretest.DADSolicitation(benchLinkMAC, benchVIP6) }, wiretest.MulticastMAC(wire.SolicitedNode(benchVIP6))},
	} {
		if n, err := l.Probe(tt.addr); err != nil || n != 1 {
			t.Fatalf("probe %s: %d frames, %v; want 1", tt.addr, n, err)
		}
		want, err := tt.want()
		if err != nil {
			t.Fatal(err)
		}
		got := <-tt.conn.out
		if !bytes.Equal(got.frame, want) || got.to.String() != tt.wantTo.String() {
			t.Errorf("probe %s: got %x to %v, want %x to %v", tt.addr, got.frame, got.to, want, tt.wantTo)
		}
	}
}
