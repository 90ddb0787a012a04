package announce

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"
)

// discardIO is a frameIO that keeps the last frame written.
type discardIO struct {
	last   []byte
	writes int
}

func (d *discardIO) Read([]byte) (int, error) { return 0, net.ErrClosed }
func (d *discardIO) Write(f []byte, _ net.HardwareAddr) error {
	d.last = f
	d.writes++
	return nil
}

var (
	ourMAC = net.HardwareAddr{2, 0, 0, 0, 0, 7}
	heldV4 = netip.MustParseAddr("192.0.2.10")
	heldV6 = netip.MustParseAddr("2001:db8::10")
)

func answerRig(t testing.TB) (*Link, *answerer, *discardIO) {
	t.Helper()
	l := NewLink(&net.Interface{Index: 7, Name: "test0", HardwareAddr: ourMAC}, LinkConfig{
		ARP: newFakeConn(), IPv6: newFakeConn(),
		Groups: func() (GroupJoiner, error) { return &countingJoiner{}, nil },
	})
	t.Cleanup(func() { l.Close() })
	if err := l.Hold(heldV4, heldV6); err != nil {
		t.Fatal(err)
	}
	d := &discardIO{}
	return l, &answerer{io: d}, d
}

func arpWhoHas(t testing.TB, target netip.Addr) []byte {
	t.Helper()
	f, err := wiretest.ARPFrame(wire.Broadcast, askerMAC, arp.OperationRequest, askerMAC, netip.MustParseAddr("192.0.2.3"), net.HardwareAddr{0, 0, 0, 0, 0, 0}, target)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func nsFor(t testing.TB, target netip.Addr) []byte {
	t.Helper()
	g, _ := ndp.SolicitedNodeMulticast(target)
	ns := &ndp.NeighborSolicitation{TargetAddress: target, Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: askerMAC}}}
	f, err := wiretest.NDPFrame(wiretest.MulticastMAC(g), askerMAC, netip.MustParseAddr("2001:db8::3"), g, ns)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAnswerAllocatesNothing: the hot path, request in and reply out,
// allocates nothing, for ARP and for NDP.
func TestAnswerAllocatesNothing(t *testing.T) {
	l, a, d := answerRig(t)
	for _, tt := range []struct {
		name   string
		frame  []byte
		answer func(*answerer, []byte)
	}{
		{"ARP", arpWhoHas(t, heldV4), l.resp.(*socketResponder).answerARP},
		{"NDP", nsFor(t, heldV6), l.resp.(*socketResponder).answerNS},
	} {
		before := d.writes
		if n := testing.AllocsPerRun(1000, func() { tt.answer(a, tt.frame) }); n != 0 {
			t.Errorf("%s: got %v allocations per answer, want 0", tt.name, n)
		}
		if d.writes-before < 1000 {
			t.Errorf("%s: got %d answers for 1000+ requests", tt.name, d.writes-before)
		}
	}
}

// TestAnswerFramesParse: the replies built in place are what the
// independent decoders expect.
func TestAnswerFramesParse(t *testing.T) {
	l, a, d := answerRig(t)
	l.resp.(*socketResponder).answerARP(a, arpWhoHas(t, heldV4))
	r, err := wiretest.ParseARP(d.last)
	if err != nil || r.Packet.Operation != arp.OperationReply || r.Packet.SenderIP != heldV4 ||
		r.Packet.SenderHardwareAddr.String() != ourMAC.String() || r.EthDst.String() != askerMAC.String() {
		t.Errorf("ARP reply: got %+v, %v", r, err)
	}
	l.resp.(*socketResponder).answerNS(a, nsFor(t, heldV6))
	n, err := wiretest.ParseNDP(d.last)
	if err != nil {
		t.Fatalf("NA: %v", err)
	}
	na, ok := n.Message.(*ndp.NeighborAdvertisement)
	if !ok || !na.Solicited || !na.Override || na.TargetAddress != heldV6 || wiretest.TargetLinkLayer(na.Options).String() != ourMAC.String() ||
		n.Src != heldV6 || n.Dst != netip.MustParseAddr("2001:db8::3") || n.EthDst.String() != askerMAC.String() {
		t.Errorf("NA: got %+v from %v to %v", na, n.Src, n.Dst)
	}
}

func BenchmarkAnswerARP(b *testing.B) {
	l, a, _ := answerRig(b)
	f := arpWhoHas(b, heldV4)
	b.ReportAllocs()
	for b.Loop() {
		l.resp.(*socketResponder).answerARP(a, f)
	}
}

func BenchmarkAnswerNS(b *testing.B) {
	l, a, _ := answerRig(b)
	f := nsFor(b, heldV6)
	b.ReportAllocs()
	for b.Loop() {
		l.resp.(*socketResponder).answerNS(a, f)
	}
}

func runFilter(t *testing.T, prog []bpf.Instruction, frame []byte) bool {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	n, err := vm.Run(frame)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestTargetFilters: with addresses held, the kernel filter lets in
// requests for them and nothing else, however many are held.
func TestTargetFilters(t *testing.T) {
	for _, count := range []int{1, 3, 300, maxFilterAddrs} {
		t.Run(fmt.Sprint(count), func(t *testing.T) {
			var v4, v6 []uint32
			for i := range count {
				v4 = append(v4, 0xc0000200|uint32(i%250)+uint32(i/250)<<16)
				v6 = append(v6, uint32(0x10000+i))
			}
			v4[count-1] = 0xc000020a // 192.0.2.10, last: the farthest jump
			v6[count-1] = 0x10       // 2001:db8::10
			arpProg := targetFilter(arpRequestChecks, wire.ARPTargetIPOffset, v4)
			nsProg := targetFilter(solicitationChecks, wire.NDTargetOffset+12, v6)
			if !runFilter(t, arpProg, arpWhoHas(t, heldV4)) {
				t.Error("a request for a held IPv4 address was filtered out")
			}
			if runFilter(t, arpProg, arpWhoHas(t, netip.MustParseAddr("203.0.113.99"))) {
				t.Error("a request for an address not held got through")
			}
			reply, _ := wiretest.ARPGratuitousReply(askerMAC, heldV4)
			if runFilter(t, arpProg, reply) {
				t.Error("an ARP reply got through")
			}
			if !runFilter(t, nsProg, nsFor(t, heldV6)) {
				t.Error("a solicitation for a held IPv6 address was filtered out")
			}
			if runFilter(t, nsProg, nsFor(t, netip.MustParseAddr("2001:db8::99"))) {
				t.Error("a solicitation for an address not held got through")
			}
			if runFilter(t, nsProg, arpWhoHas(t, heldV4)) {
				t.Error("an ARP frame got through the IPv6 filter")
			}
			if _, err := bpf.Assemble(arpProg); err != nil {
				t.Errorf("assemble: %v", err)
			}
		})
	}
}
