package loadgen

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"
)

// Documentation addresses only (RFC 5737, RFC 3849, RFC 7042).
var (
	askerMAC     = wiretest.OurMAC
	responderMAC = wiretest.PeerMAC
	target4      = wiretest.VIP4
	sender4      = netip.MustParseAddr("192.0.2.3")
	target6      = wiretest.VIP6
	sender6      = netip.MustParseAddr("2001:db8::f000:0")
)

func newTestRequest(t *testing.T, target, sender netip.Addr) *request {
	t.Helper()
	cfg := Config{Interface: "test0", Target: target, Sender: sender, Rate: 1000, Count: 10, Run: 7}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	r, err := newRequest(&cfg, askerMAC)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSeqMAC(t *testing.T) {
	for _, seq := range []uint32{0, 1, 255, 256, 1 << 24, 1<<32 - 1} {
		mac := seqMAC(9, seq)
		if mac[0]&1 != 0 || mac[0]&2 == 0 {
			t.Errorf("seqMAC(9, %d) = %x: want a locally administered unicast address", seq, mac)
		}
		got, ok := seqFrom(9, mac[:])
		if !ok || got != seq {
			t.Errorf("seqFrom(seqMAC(9, %d)): got %d, %v", seq, got, ok)
		}
		if _, ok := seqFrom(8, mac[:]); ok {
			t.Errorf("seqFrom of run 8 accepted run 9's %x", mac)
		}
	}
}

func TestARPRequest(t *testing.T) {
	r := newTestRequest(t, target4, sender4)
	for _, seq := range []uint32{0, 1, 70000} {
		f, err := wiretest.ParseARP(r.set(seq))
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		want := seqMAC(7, seq)
		p := f.Packet
		if p.Operation != arp.OperationRequest || p.SenderHardwareAddr.String() != net.HardwareAddr(want[:]).String() ||
			p.SenderIP != sender4 || p.TargetIP != target4 || f.EthSrc.String() != askerMAC.String() || f.EthDst.String() != wire.Broadcast.String() {
			t.Errorf("seq %d: got %+v from %s to %s, want a broadcast request for %s from %s carrying %x", seq, p, f.EthSrc, f.EthDst, target4, sender4, want)
		}
		if got, ok := r.seqOfRequest(r.frame); !ok || got != seq {
			t.Errorf("seqOfRequest: got %d, %v, want %d", got, ok, seq)
		}
	}
}

func TestNeighborSolicitation(t *testing.T) {
	r := newTestRequest(t, target6, sender6)
	group := netip.MustParseAddr("ff02::1:ff00:10")
	for _, seq := range []uint32{0, 1, 63, 64, 70001} {
		f, err := wiretest.ParseNDP(r.set(seq)) // checks hop limit and checksum
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		ns, ok := f.Message.(*ndp.NeighborSolicitation)
		if !ok {
			t.Fatalf("seq %d: got %T, want a neighbor solicitation", seq, f.Message)
		}
		want := seqMAC(7, seq)
		wantSrc := sender6.As16()
		wantSrc[15] += byte(seq % DefaultSources)
		if ns.TargetAddress != target6 || f.Dst != group || f.Src != netip.AddrFrom16(wantSrc) ||
			wiretest.SourceLinkLayer(ns.Options).String() != net.HardwareAddr(want[:]).String() ||
			f.EthDst.String() != wiretest.MulticastMAC(group).String() {
			t.Errorf("seq %d: got %+v from %s to %s (%s), want target %s from %s to %s with option %x",
				seq, ns, f.Src, f.Dst, f.EthDst, target6, netip.AddrFrom16(wantSrc), group, want)
		}
		if got, ok := r.seqOfRequest(r.frame); !ok || got != seq {
			t.Errorf("seqOfRequest: got %d, %v, want %d", got, ok, seq)
		}
	}
}

func TestSetAllocatesNothing(t *testing.T) {
	for _, r := range []*request{newTestRequest(t, target4, sender4), newTestRequest(t, target6, sender6)} {
		seq := uint32(0)
		if n := testing.AllocsPerRun(1000, func() { r.set(seq); seq++ }); n != 0 {
			t.Errorf("v6 %v: got %v allocations per request, want 0", r.v6, n)
		}
	}
}

func arpReply(t *testing.T, run uint8, seq uint32, from netip.Addr) []byte {
	t.Helper()
	mac := seqMAC(run, seq)
	f, err := wiretest.ARPFrame(mac[:], responderMAC, arp.OperationReply, responderMAC, from, mac[:], sender4)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func naReply(t *testing.T, r *request, seq uint32, to netip.Addr, solicited bool) []byte {
	t.Helper()
	mac := seqMAC(r.run, seq)
	f, err := wiretest.NeighborAdvertisement(mac[:], responderMAC, target6, to, solicited)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParseReply(t *testing.T) {
	r4 := newTestRequest(t, target4, sender4)
	r6 := newTestRequest(t, target6, sender6)
	src := func(seq uint32) netip.Addr { return netip.AddrFrom16(r6.source(seq)) }
	wrongTHA := arpReply(t, 7, 5, target4)
	copy(wrongTHA[wire.EthernetHeaderLen+18:], []byte{2, 7, 0, 0, 0, 6})
	tests := []struct {
		name       string
		r          *request
		frame      []byte
		ok, agrees bool
		seq        uint32
	}{
		{"arp reply", r4, arpReply(t, 7, 5, target4), true, true, 5},
		{"arp reply of another run", r4, arpReply(t, 8, 5, target4), false, false, 0},
		{"arp reply for another address", r4, arpReply(t, 7, 5, netip.MustParseAddr("192.0.2.11")), false, false, 0},
		{"arp reply naming another request", r4, wrongTHA, true, false, 5},
		{"arp request", r4, r4.set(5), false, false, 0},
		{"na", r6, naReply(t, r6, 70, src(70), true), true, true, 70},
		{"na to another source", r6, naReply(t, r6, 70, src(71), true), true, false, 70},
		{"na unsolicited", r6, naReply(t, r6, 70, src(70), false), true, false, 70},
		{"na for arp", r4, naReply(t, r6, 70, src(70), true), false, false, 0},
		{"short", r4, []byte{2, 7, 0}, false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := append([]byte(nil), tt.frame...)
			target := target4
			if tt.r.v6 {
				target = target6
			}
			got, ok := tt.r.parseReply(frame, target)
			if ok != tt.ok || (ok && (got.agrees != tt.agrees || got.seq != tt.seq)) {
				t.Errorf("got %+v, %v; want ok %v, seq %d, agrees %v", got, ok, tt.ok, tt.seq, tt.agrees)
			}
			if ok && net.HardwareAddr(got.from[:]).String() != responderMAC.String() {
				t.Errorf("got responder %x, want %s", got.from, responderMAC)
			}
		})
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

func TestReplyFilter(t *testing.T) {
	r4 := newTestRequest(t, target4, sender4)
	r6 := newTestRequest(t, target6, sender6)
	gratuitous, _ := wiretest.ARPGratuitousReply(responderMAC, target4)
	unsolicited, _ := wiretest.NeighborAdvertisement(wiretest.MulticastMAC(wire.AllNodes), responderMAC, target6, wire.AllNodes, false)
	tests := []struct {
		name  string
		v6    bool
		frame []byte
		want  bool
	}{
		{"arp reply", false, arpReply(t, 7, 1, target4), true},
		{"arp reply of another run", false, arpReply(t, 6, 1, target4), false},
		{"arp request", false, r4.set(1), false},
		{"gratuitous arp", false, gratuitous, false},
		{"na on the arp socket", false, naReply(t, r6, 1, netip.AddrFrom16(r6.source(1)), true), false},
		{"na", true, naReply(t, r6, 1, netip.AddrFrom16(r6.source(1)), true), true},
		{"ns", true, r6.set(1), false},
		{"unsolicited na to all nodes", true, unsolicited, false},
		{"arp on the ipv6 socket", true, arpReply(t, 7, 1, target4), false},
	}
	for _, tt := range tests {
		if got := runFilter(t, replyFilter(tt.v6, 7), tt.frame); got != tt.want {
			t.Errorf("%s: filter accepts %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestAnnouncementOf(t *testing.T) {
	announce, _ := wiretest.ARPAnnouncement(responderMAC, target4)
	gratuitous, _ := wiretest.ARPGratuitousReply(responderMAC, target4)
	probe, _ := wiretest.ARPProbe(responderMAC, target4)
	unsolicited, _ := wiretest.NeighborAdvertisement(wiretest.MulticastMAC(wire.AllNodes), responderMAC, target6, wire.AllNodes, false)
	solicited, _ := wiretest.NeighborAdvertisement(askerMAC, responderMAC, target6, sender6, true)
	tests := []struct {
		name  string
		frame []byte
		addr  netip.Addr
		want  bool
	}{
		{"arp announcement", announce, target4, true},
		{"gratuitous arp reply", gratuitous, target4, true},
		{"announcement of another address", announce, netip.MustParseAddr("192.0.2.11"), false},
		{"probe", probe, target4, false},
		{"request", newTestRequest(t, target4, sender4).set(3), target4, false},
		{"unsolicited na", unsolicited, target6, true},
		{"solicited na", solicited, target6, false},
		{"na for ipv4", unsolicited, target4, false},
	}
	for _, tt := range tests {
		if got := announcementOf(tt.frame, tt.addr); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of four", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"median of five", ms(1, 2, 3, 4, 5), 0.5, 3 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"max", ms(hundred...), 1, 100 * time.Millisecond},
		{"min", ms(hundred...), 0, time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.in, tt.p); got != tt.want {
			t.Errorf("%s: percentile(%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Interface: "eth0", Target: target4, Sender: sender4, Rate: 1000, Count: 1000}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"ok", func(*Config) {}, ""},
		{"no interface", func(c *Config) { c.Interface = "" }, "interface"},
		{"no target", func(c *Config) { c.Target = netip.Addr{} }, "target"},
		{"mixed families", func(c *Config) { c.Sender = sender6 }, "family"},
		{"zero rate", func(c *Config) { c.Rate = 0 }, "rate"},
		{"rate too high", func(c *Config) { c.Rate = MaxRate + 1 }, "rate"},
		{"too many", func(c *Config) { c.Count = MaxCount + 1 }, "count"},
		{"wait too long", func(c *Config) { c.Wait = time.Minute }, "wait"},
		{"sources overflow", func(c *Config) {
			c.Target, c.Sender, c.Sources = target6, netip.MustParseAddr("2001:db8::ffff"), 2
		}, "sources"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			err := c.validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if err == nil && (c.Wait != DefaultWait || c.Sources != DefaultSources || c.Tick != time.Millisecond) {
				t.Errorf("defaults: got wait %v, sources %d, tick %v; want %v, %d, 1ms", c.Wait, c.Sources, c.Tick, DefaultWait, DefaultSources)
			}
		})
	}
	c := ok
	c.Rate = 100000
	if err := c.validate(); err != nil || c.Tick != MinTick {
		t.Errorf("tick at 100,000/s: got %v (%v), want %v", c.Tick, err, MinTick)
	}
}
