package bpfresp

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/mdlayher/arp"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"
)

func whoHas(t *testing.T, target netip.Addr) []byte {
	t.Helper()
	asker := net.HardwareAddr{0x02, 0x00, 0x5e, 0x00, 0x53, 0x03}
	f, err := wiretest.ARPFrame(wire.Broadcast, asker, arp.OperationRequest, asker, netip.MustParseAddr("192.0.2.3"), make(net.HardwareAddr, 6), target)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func corpusFrame(t *testing.T, name string) []byte {
	t.Helper()
	for _, c := range wiretest.Corpus() {
		if c.Name == name {
			return c.Frame
		}
	}
	t.Fatalf("no corpus frame %q", name)
	return nil
}

func runOK(t *testing.T, r *Responder, frame []byte) []byte {
	t.Helper()
	out, err := runProgram(t, r, frame)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCounters: each answer counts once for its address, and traffic to
// an address counts its packets and bytes, whatever the protocol; a frame
// for an address not held counts nowhere.
func TestCounters(t *testing.T) {
	for _, hook := range []Hook{TCX, XDPGeneric} {
		t.Run(hook.String(), func(t *testing.T) {
			r := requireBPF(t, hook)
			for range 3 {
				runOK(t, r, corpusFrame(t, "ARP who-has"))
			}
			runOK(t, r, corpusFrame(t, "DAD probe"))
			nud := corpusFrame(t, "unicast solicitation (NUD)")
			runOK(t, r, nud)
			udp := corpusFrame(t, "IPv4 packet to the held address")
			runOK(t, r, udp)
			runOK(t, r, udp)
			runOK(t, r, corpusFrame(t, "ARP who-has for another address"))
			if got := r.Answered(wiretest.CorpusHeld4); got != 3 {
				t.Errorf("answered for %v: got %d, want 3", wiretest.CorpusHeld4, got)
			}
			if got := r.Answered(wiretest.CorpusHeld6); got != 2 {
				t.Errorf("answered for %v: got %d, want 2", wiretest.CorpusHeld6, got)
			}
			if p, b := r.Traffic(wiretest.CorpusHeld4); p != 2 || b != uint64(2*len(udp)) {
				t.Errorf("traffic to %v: got %d packets, %d bytes; want 2, %d", wiretest.CorpusHeld4, p, b, 2*len(udp))
			}
			// The unicast solicitation is traffic to the address too; the
			// multicast ones are not.
			if p, b := r.Traffic(wiretest.CorpusHeld6); p != 1 || b != uint64(len(nud)) {
				t.Errorf("traffic to %v: got %d packets, %d bytes; want 1, %d", wiretest.CorpusHeld6, p, b, len(nud))
			}
			other := netip.MustParseAddr("192.0.2.99")
			if got := r.Answered(other); got != 0 {
				t.Errorf("answered for an address not held: got %d", got)
			}
			if p, b := r.Traffic(other); p != 0 || b != 0 {
				t.Errorf("traffic to an address not held: got %d packets, %d bytes", p, b)
			}
		})
	}
}

// TestHoldDrop: a dropped address is no longer answered and its counters
// go; held again, it starts from zero. Hold is all or none.
func TestHoldDrop(t *testing.T) {
	r := requireBPF(t, TCX)
	req := whoHas(t, wiretest.CorpusHeld4)
	runOK(t, r, req)
	if err := r.LetGo(wiretest.CorpusHeld4, netip.MustParseAddr("198.51.100.1")); err != nil {
		t.Fatalf("drop: %v", err)
	}
	if out := runOK(t, r, req); out != nil {
		t.Errorf("a dropped address was answered: % x", out)
	}
	if got := r.Answered(wiretest.CorpusHeld4); got != 0 {
		t.Errorf("answered for a dropped address: got %d, want 0", got)
	}
	if err := r.Hold(wiretest.CorpusHeld4); err != nil {
		t.Fatal(err)
	}
	if got := r.Answered(wiretest.CorpusHeld4); got != 0 {
		t.Errorf("answered when held again: got %d, want 0", got)
	}
	if runOK(t, r, req) == nil || r.Answered(wiretest.CorpusHeld4) != 1 {
		t.Errorf("held again: got answered %d, want an answer and 1", r.Answered(wiretest.CorpusHeld4))
	}

	fresh := netip.MustParseAddr("198.51.100.7")
	if err := r.Hold(fresh, netip.Addr{}); err == nil {
		t.Fatal("Hold of an invalid address: got no error")
	}
	if out := runOK(t, r, whoHas(t, fresh)); out != nil {
		t.Errorf("Hold failed, yet %v is answered", fresh)
	}
	// Holding twice keeps the counts.
	if err := r.Hold(wiretest.CorpusHeld4); err != nil {
		t.Fatal(err)
	}
	if got := r.Answered(wiretest.CorpusHeld4); got != 1 {
		t.Errorf("answered after holding twice: got %d, want 1", got)
	}
}

// TestOnlyItsInterface: an address held on another interface is not
// answered on this one (the test runs on the loopback device).
func TestOnlyItsInterface(t *testing.T) {
	r := requireBPF(t, TCX)
	r.ifindex = testIfindex + 1
	a := netip.MustParseAddr("203.0.113.5")
	if err := r.Hold(a); err != nil {
		t.Fatal(err)
	}
	if out := runOK(t, r, whoHas(t, a)); out != nil {
		t.Errorf("answered for an address held on interface %d: % x", r.ifindex, out)
	}
}

// TestSetMAC: after a MAC change, answers come from the new MAC.
func TestSetMAC(t *testing.T) {
	r := requireBPF(t, XDPGeneric)
	mac := net.HardwareAddr{0x02, 0x00, 0x5e, 0x00, 0x53, 0x42}
	if err := r.SetMAC(mac); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ARP who-has", "solicitation"} {
		out := runOK(t, r, corpusFrame(t, name))
		if out == nil {
			t.Errorf("%s: got no answer", name)
		} else if !bytes.Equal(out[6:12], mac) {
			t.Errorf("%s: got an answer from % x, want %v", name, out[6:12], mac)
		}
	}
	if err := r.SetMAC(net.HardwareAddr{1, 2, 3}); err == nil {
		t.Error("SetMAC of a 3-byte address: got no error")
	}
}

func TestParseHook(t *testing.T) {
	for _, h := range []Hook{TCX, XDPGeneric, XDPNative} {
		got, err := ParseHook(h.String())
		if err != nil || got != h {
			t.Errorf("ParseHook(%q): got %v, %v; want %v", h.String(), got, err, h)
		}
	}
	if _, err := ParseHook("tc"); err == nil {
		t.Error(`ParseHook("tc"): got no error`)
	}
}

// TestCountWithoutAnswering: an address counted (the kernel owns it) has
// its traffic counted and its requests left to the kernel; held later, it
// is answered; dropped, it is neither.
func TestCountWithoutAnswering(t *testing.T) {
	r := requireBPF(t, TCX)
	a := wiretest.CorpusHeld4
	if err := r.LetGo(a); err != nil {
		t.Fatal(err)
	}
	if err := r.Count(a); err != nil {
		t.Fatalf("count: %v", err)
	}
	if out := runOK(t, r, whoHas(t, a)); out != nil {
		t.Errorf("a counted address was answered: % x", out)
	}
	udp := corpusFrame(t, "IPv4 packet to the held address")
	runOK(t, r, udp)
	if p, b := r.Traffic(a); p != 1 || b != uint64(len(udp)) {
		t.Errorf("traffic to a counted address: got %d packets, %d bytes; want 1, %d", p, b, len(udp))
	}
	if got := r.Answered(a); got != 0 {
		t.Errorf("answered for a counted address: got %d", got)
	}
	if err := r.Hold(a); err != nil {
		t.Fatal(err)
	}
	if runOK(t, r, whoHas(t, a)) == nil {
		t.Error("a counted address held later is not answered")
	}
	// The kernel gave it up and vip answers now: still the same claim,
	// whose traffic goes on counting from where it was.
	if p, _ := r.Traffic(a); p != 1 {
		t.Errorf("traffic of a counted address once held: %d packets, want the 1 counted before", p)
	}
	if err := r.LetGo(a); err != nil {
		t.Fatal(err)
	}
	if err := r.Count(a); err != nil {
		t.Fatal(err)
	}
	if err := r.LetGo(a); err != nil {
		t.Fatal(err)
	}
	runOK(t, r, udp)
	if p, _ := r.Traffic(a); p != 0 {
		t.Errorf("traffic counted after the drop: %d packets", p)
	}
}

// TestSnapshot: one pass reads every address's counts, those held and
// those counted only, as Answered and Traffic read them one by one.
func TestSnapshot(t *testing.T) {
	r := requireBPF(t, TCX)
	counted := netip.MustParseAddr("192.0.2.77")
	if err := r.Count(counted); err != nil {
		t.Fatal(err)
	}
	runOK(t, r, corpusFrame(t, "ARP who-has"))
	runOK(t, r, corpusFrame(t, "ARP who-has"))
	udp := corpusFrame(t, "IPv4 packet to the held address")
	runOK(t, r, udp)
	got := map[netip.Addr][3]uint64{}
	if err := r.Snapshot(func(a netip.Addr, answered, packets, bytes uint64) {
		got[a] = [3]uint64{answered, packets, bytes}
	}); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	for _, a := range []netip.Addr{wiretest.CorpusHeld4, wiretest.CorpusHeld6, counted} {
		p, b := r.Traffic(a)
		want := [3]uint64{r.Answered(a), p, b}
		if got[a] != want {
			t.Errorf("snapshot of %v: got %v, want %v (as read one by one)", a, got[a], want)
		}
	}
	if c := got[wiretest.CorpusHeld4]; c[0] != 2 || c[1] != 1 {
		t.Errorf("snapshot of %v: got %v, want 2 answered and 1 packet", wiretest.CorpusHeld4, c)
	}
	if len(got) != 3 {
		t.Errorf("snapshot read %d addresses, want 3: %v", len(got), got)
	}
	// Many addresses: more than one batch.
	var many []netip.Addr
	for i := range 2*snapshotBatch + 5 {
		b := netip.MustParseAddr("2001:db8:5::").As16()
		b[14], b[15] = byte(i>>8), byte(i)
		many = append(many, netip.AddrFrom16(b))
	}
	if err := r.Hold(many...); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := r.Snapshot(func(netip.Addr, uint64, uint64, uint64) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != len(many)+3 {
		t.Errorf("snapshot of %d addresses read %d", len(many)+3, n)
	}
}

// TestHoldManyInBatches: ten thousand addresses held in one call (a few
// batch updates) are all answered and counted, dropped in one call none
// is, and a Hold that fails part way (an invalid address) holds none.
func TestHoldManyInBatches(t *testing.T) {
	r := requireBPF(t, TCX)
	var many []netip.Addr
	for i := range 10_000 {
		many = append(many, netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}))
	}
	if err := r.Hold(many...); err != nil {
		t.Fatal(err)
	}
	for _, a := range []netip.Addr{many[0], many[4999], many[9999]} {
		if runOK(t, r, whoHas(t, a)) == nil || r.Answered(a) != 1 {
			t.Errorf("%v: not answered, or answered %d times; want once", a, r.Answered(a))
		}
	}
	n := 0
	if err := r.Snapshot(func(netip.Addr, uint64, uint64, uint64) { n++ }); err != nil {
		t.Fatal(err)
	}
	if want := len(many) + 2; n != want {
		t.Errorf("counters of %d addresses, want %d", n, want)
	}
	if err := r.LetGo(many...); err != nil {
		t.Fatal(err)
	}
	if runOK(t, r, whoHas(t, many[4999])) != nil {
		t.Errorf("%v answered after the drop", many[4999])
	}
	n = 0
	if err := r.Snapshot(func(netip.Addr, uint64, uint64, uint64) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("counters of %d addresses after the drop, want the corpus's 2", n)
	}
	if err := r.Hold(many[0], netip.Addr{}); err == nil {
		t.Fatal("Hold with an invalid address: no error")
	}
	if runOK(t, r, whoHas(t, many[0])) != nil {
		t.Errorf("%v answered after a Hold that failed", many[0])
	}
}
