package sniff_test

import (
	"testing"

	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/sniff"
)

// filterCase is a frame and whether the base filter passes it.
type filterCase struct {
	frame []byte
	name  string
	want  bool
}

// filterCases are the frames the base filter must pass and drop, as
// libpcap's compilation of BaseFilter and baseProgram both run it.
func filterCases(t testing.TB) []filterCase {
	t.Helper()
	valid := map[string][]byte{}
	for _, c := range validCases(t) {
		valid[c.name] = c.frame
	}
	bad := map[string][]byte{}
	for _, c := range badCases(t) {
		bad[c.name] = c.frame
	}
	tests := []filterCase{
		{valid["arp-who-has"], "who-has", true},
		{valid["arp-who-has-padded"], "padded who-has", true},
		{valid["arp-gratuitous-reply"], "gratuitous reply", true},
		{valid["ns"], "solicitation", true},
		{valid["ns-dad"], "DAD", true},
		{valid["na-solicited"], "advertisement", true},
		{valid["ns-hop-by-hop"], "solicitation behind hop-by-hop", true},
		{valid["na-hop-by-hop-destination"], "advertisement behind hop-by-hop and destination options", true},
		{valid["ns-dad-destination"], "DAD behind destination options", true},
		// Invalid neighbor discovery still passes, to be counted.
		{bad["ns-bad-checksum"], "solicitation with a bad checksum", true},
		{bad["ns-hop-limit-64"], "solicitation with hop limit 64", true},

		{bad["ipv4"], "IPv4", false},
		{bad["ipv6-udp"], "UDP over IPv6", false},
		{bad["icmpv6-echo"], "echo request", false},
		{bad["router-solicitation"], "router solicitation", false},
		{bad["mld-report-hop-by-hop"], "MLD report behind hop-by-hop", false},
		{bad["ns-long-chain"], "solicitation behind five headers", false},
		// The tag is in the frame's bytes here; on Linux the kernel has
		// taken it off before the filter runs, on the VLAN's interface
		// and on its parent alike.
		{valid["arp-who-has-vlan"], "who-has with a VLAN tag in its bytes", false},
	}
	for _, tt := range tests {
		if tt.frame == nil {
			t.Fatalf("%s: no frame", tt.name)
		}
	}
	return tests
}

// baseVM is the base filter as a live capture runs it, in x/net/bpf's
// interpreter, which drops a frame where a load falls past its end, as the
// kernel does.
func baseVM(t testing.TB) *bpf.VM {
	t.Helper()
	raw, err := sniff.BaseProgram(sniff.DefaultSnapLen)
	if err != nil {
		t.Fatalf("build the base program: %v", err)
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the base program has instructions x/net/bpf cannot decode")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("the base program does not load: %v", err)
	}
	return vm
}

func TestBaseProgram(t *testing.T) {
	vm := baseVM(t)
	for _, tt := range filterCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			n, err := vm.Run(tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			if got := n > 0; got != tt.want {
				t.Errorf("passes it %v, want %v", got, tt.want)
			}
		})
	}
	// The snap length is what the program keeps of a longer frame.
	raw, err := sniff.BaseProgram(64)
	if err != nil {
		t.Fatal(err)
	}
	prog, _ := bpf.Disassemble(raw)
	short, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	long := append(frameNamed(t, "ns"), make([]byte, 100)...)
	if n, err := short.Run(long); err != nil || n != 64 {
		t.Errorf("snap length 64, a %d-byte solicitation: keeps %d (%v), want 64", len(long), n, err)
	}
}
