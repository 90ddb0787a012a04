package sniff_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/sniff"
)

// baseRaw is the base filter as a live capture without a user's
// expression runs it.
func baseRaw(t *testing.T) []bpf.RawInstruction {
	t.Helper()
	raw, err := sniff.BaseProgram(sniff.DefaultSnapLen)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// scopeVM is the base filter narrowed to held, in x/net/bpf's interpreter.
func scopeVM(t *testing.T, held ...netip.Addr) *bpf.VM {
	t.Helper()
	raw, err := sniff.ScopeProgram(held, baseRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	return vmFor(t, raw)
}

func vmFor(t *testing.T, raw []bpf.RawInstruction) *bpf.VM {
	t.Helper()
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the scope program has instructions x/net/bpf cannot decode")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("the scope program does not load: %v", err)
	}
	return vm
}

func TestScopeProgram(t *testing.T) {
	other4 := netip.MustParseAddr("192.0.2.99")
	other6 := netip.MustParseAddr("2001:db8::99")
	// Same last 32 bits as vip6: the kernel lets it through, Run does not.
	alias6 := netip.MustParseAddr("2001:db8:1::10")
	vm := scopeVM(t, vip4, vip6, netip.MustParseAddr("198.51.100.7"))

	valid := func(name string) []byte { return frameNamed(t, name) }
	bad := valid
	whoHasOther := whoHas()
	whoHasOther.target = other4
	fromHeld := whoHas() // we ask, from the held address, about someone else
	fromHeld.sender, fromHeld.target = vip4, other4
	nsOther := solicitation()
	nsOther.dst, nsOther.target = netip.MustParseAddr("ff02::1:ff00:99"), other6
	naOther := advertisement(rogueMAC, false)
	naOther.src, naOther.target = other6, other6
	nsAlias := solicitation()
	nsAlias.target = alias6

	tests := []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"who-has for a held address", valid("arp-who-has"), true},
		{"probe for a held address", valid("arp-probe"), true},
		{"announcement of a held address by a rogue", valid("arp-announcement"), true},
		{"reply from a held address", valid("arp-reply"), true},
		{"gratuitous reply", valid("arp-gratuitous-reply"), true},
		{"who-has for another address", buildARP(t, whoHasOther), false},
		{"who-has from a held address", buildARP(t, fromHeld), true},
		{"solicitation for a held address", valid("ns"), true},
		{"DAD for a held address", valid("ns-dad"), true},
		{"advertisement for a held address", valid("na-unsolicited"), true},
		{"solicitation for another address", buildNDP(t, nsOther), false},
		{"advertisement for another address", buildNDP(t, naOther), false},
		{"solicitation for the same last word, another address", buildNDP(t, nsAlias), true},
		{"solicitation behind hop-by-hop", valid("ns-hop-by-hop"), true},
		// What the base filter drops stays dropped.
		{"IPv4", bad("ipv4"), false},
		{"echo request", bad("icmpv6-echo"), false},
		{"MLD report behind hop-by-hop", bad("mld-report-hop-by-hop"), false},
		{"truncated", []byte{0xff, 0xff}, false},
	}
	for _, tt := range tests {
		if tt.frame == nil {
			t.Fatalf("%s: no frame", tt.name)
		}
		n, err := vm.Run(tt.frame)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := n > 0; got != tt.want {
			t.Errorf("%s: passes %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestScopeProgramSize(t *testing.T) {
	next := baseRaw(t)
	many := func(n int) []netip.Addr {
		var out []netip.Addr
		for i := range n / 2 {
			out = append(out, netip.AddrFrom4([4]byte{198, 51, byte(100 + i/250), byte(1 + i%250)}))
		}
		for i := len(out); i < n; i++ {
			out = append(out, netip.MustParseAddr(fmt.Sprintf("2001:db8:1::%x", i+1)))
		}
		return out
	}
	raw, err := sniff.ScopeProgram(many(sniff.MaxScopeAddrs), next)
	if err != nil {
		t.Fatalf("%d addresses: %v", sniff.MaxScopeAddrs, err)
	}
	// Room for the drop of outgoing frames and a short user expression.
	if len(raw) > 4096-100 {
		t.Errorf("%d addresses: %d instructions, want room under the kernel's 4096", sniff.MaxScopeAddrs, len(raw))
	}
	if _, err := sniff.ScopeProgram(many(sniff.MaxScopeAddrs+1), next); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("%d addresses: err %v, want one saying there are too many", sniff.MaxScopeAddrs+1, err)
	}
	// The last address of a long list still matches: every jump lands.
	addrs := many(sniff.MaxScopeAddrs)
	vm := vmFor(t, raw)
	for _, a := range []netip.Addr{addrs[0], addrs[len(addrs)/2-1], addrs[len(addrs)/2], addrs[len(addrs)-1]} {
		var frame []byte
		if a.Is4() {
			s := whoHas()
			s.target = a
			frame = buildARP(t, s)
		} else {
			s := solicitation()
			s.target = a
			frame = buildNDP(t, s)
		}
		if n, err := vm.Run(frame); err != nil || n == 0 {
			t.Errorf("request for %s: passes %d (%v), want it through", a, n, err)
		}
	}
}

// TestCaptureWatch narrows a capture whose source cannot filter: Run checks
// whole addresses, counts what it leaves out, and Widen widens it again.
func TestCaptureWatch(t *testing.T) {
	nsAlias := solicitation()
	nsAlias.target = netip.MustParseAddr("2001:db8:1::10") // vip6's last word
	whoHasOther := whoHas()
	whoHasOther.target = netip.MustParseAddr("192.0.2.99")
	frames := [][]byte{
		frameNamed(t, "arp-who-has"),    // vip4: in scope
		buildARP(t, whoHasOther),        // out
		frameNamed(t, "na-unsolicited"), // vip6: in scope
		buildNDP(t, nsAlias),            // out
		frameNamed(t, "arp-reply"),      // from vip4: in scope
	}
	src := newFakeSource(frames...)
	c := sniff.NewCapture("fake", src)
	if err := c.Narrow([]netip.Addr{vip4, vip6}); err != nil {
		t.Fatalf("Watch on a source that cannot filter in the kernel: %v, want the capture narrowed in Run without complaint", err)
	}
	var got collect
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, &got) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5s; stats %+v, kinds %v", what, c.Stats(), got.kinds())
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("the first frames read", func() bool { return c.Stats().Received == 5 })
	if k := got.kinds(); len(k) != 3 || k[0] != sniff.KindWhoHas || k[1] != sniff.KindAdvertisement || k[2] != sniff.KindReply {
		t.Errorf("narrowed: observed %v, want who-has, advertisement, reply", k)
	}
	if s := c.Stats(); s.OutOfScope != 2 {
		t.Errorf("narrowed: OutOfScope %d, want 2", s.OutOfScope)
	}
	if err := c.Widen(); err != nil {
		t.Fatal(err)
	}
	src.frames <- buildARP(t, whoHasOther)
	waitFor("a frame about another address after Widen", func() bool { return len(got.kinds()) == 4 })
	if err := c.Narrow(nil); err != nil {
		t.Fatal(err)
	}
	src.frames <- frameNamed(t, "arp-who-has")
	waitFor("a frame with nothing watched", func() bool { return c.Stats().OutOfScope == 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(got.kinds()); n != 4 {
		t.Errorf("observed %d frames in all, want 4", n)
	}
}

// claimFrames are frames about vip4 and vip6 (or from them), and whether
// each claims or comes from the address, which a Claims scope passes,
// rather than asks for it, which it leaves out.
func claimFrames(t *testing.T) []struct {
	name   string
	frame  []byte
	claims bool
} {
	other4, other6 := netip.MustParseAddr("192.0.2.99"), netip.MustParseAddr("2001:db8::99")
	fromHeld := whoHas() // a rival asks, from the held address, about someone else
	fromHeld.sender, fromHeld.target = vip4, other4
	nsFromHeld := solicitation()
	nsFromHeld.src, nsFromHeld.dst, nsFromHeld.target = vip6, netip.MustParseAddr("ff02::1:ff00:99"), other6
	naNoSrc := advertisement(rogueMAC, false) // a rival's advertisement from its link-local address
	naNoSrc.src = netip.MustParseAddr("fe80::99")
	unreach := unreachability()
	return []struct {
		name   string
		frame  []byte
		claims bool
	}{
		{"who-has for a held address", frameNamed(t, "arp-who-has"), false},
		{"probe for a held address", frameNamed(t, "arp-probe"), false},
		{"announcement of a held address by a rogue", frameNamed(t, "arp-announcement"), true},
		{"reply from a held address", frameNamed(t, "arp-reply"), true},
		{"gratuitous reply", frameNamed(t, "arp-gratuitous-reply"), true},
		{"who-has from a held address", buildARP(t, fromHeld), true},
		{"solicitation for a held address", frameNamed(t, "ns"), false},
		{"unicast solicitation for a held address", buildNDP(t, unreach), false},
		{"DAD for a held address", frameNamed(t, "ns-dad"), false},
		{"solicitation from a held address", buildNDP(t, nsFromHeld), true},
		{"advertisement for a held address", frameNamed(t, "na-unsolicited"), true},
		{"advertisement for a held address from a link-local source", buildNDP(t, naNoSrc), true},
	}
}

// TestScopeProgramClaims: narrowed to the claims of the held addresses,
// the kernel filter leaves out the requests for them (an in-kernel
// responder answers those and remembers who asked) and keeps every frame
// that claims them or comes from them, so that competing claimers are
// still seen; an address narrowed to whole keeps its requests beside.
func TestScopeProgramClaims(t *testing.T) {
	whole := netip.MustParseAddr("198.51.100.7")
	raw, err := sniff.ScopeProgramOf(sniff.Scope{Addrs: []netip.Addr{whole}, Claims: []netip.Addr{vip4, vip6}}, baseRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	vm := vmFor(t, raw)
	run := func(name string, frame []byte, want bool) {
		t.Helper()
		n, err := vm.Run(frame)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := n > 0; got != want {
			t.Errorf("%s: passes %v, want %v", name, got, want)
		}
	}
	for _, f := range claimFrames(t) {
		run(f.name, f.frame, f.claims)
	}
	w := whoHas()
	w.target = whole
	run("who-has for an address in Addrs", buildARP(t, w), true)
	ns := solicitation()
	ns.target = netip.MustParseAddr("2001:db8::99")
	run("solicitation for another address", buildNDP(t, ns), false)

	// An address in both lists keeps all its frames.
	raw, err = sniff.ScopeProgramOf(sniff.Scope{Addrs: []netip.Addr{vip4, vip6}, Claims: []netip.Addr{vip4, vip6}}, baseRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	vm = vmFor(t, raw)
	for _, f := range claimFrames(t) {
		run(f.name+", in both", f.frame, true)
	}
}

// TestCaptureNarrowToClaims: Run applies a Claims scope to whole addresses
// too, on a source that cannot filter in the kernel.
func TestCaptureNarrowToClaims(t *testing.T) {
	cases := claimFrames(t)
	var frames [][]byte
	want := 0
	for _, f := range cases {
		frames = append(frames, f.frame)
		if f.claims {
			want++
		}
	}
	src := newFakeSource(frames...)
	c := sniff.NewCapture("fake", src)
	if err := c.NarrowTo(sniff.Scope{Claims: []netip.Addr{vip4, vip6}}); err != nil {
		t.Fatal(err)
	}
	var got collect
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, &got) }()
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Received < uint64(len(frames)) {
		if time.Now().After(deadline) {
			t.Fatalf("not all %d frames read within 5s: %+v", len(frames), c.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, k := range got.kinds() {
		if k.IsRequest() && k != sniff.KindWhoHas && k != sniff.KindSolicitation {
			t.Errorf("observed a %v for a held address, want the requests for it left out", k)
		}
	}
	if n := len(got.kinds()); n != want {
		t.Errorf("observed %d frames (%v), want the %d that claim a held address or come from it", n, got.kinds(), want)
	}
	if s := c.Stats(); s.OutOfScope != uint64(len(frames)-want) {
		t.Errorf("OutOfScope %d, want %d", s.OutOfScope, len(frames)-want)
	}
}
