//go:build cgo

package sniff_test

import (
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"

	"github.com/vipctl/vip/sniff"
)

// matches runs the capture filter for user over frame in libpcap's BPF
// interpreter, the same program the kernel runs.
func matches(t *testing.T, user string, frame []byte) bool {
	t.Helper()
	expr, err := sniff.Filter(user)
	if err != nil {
		t.Fatal(err)
	}
	bpf, err := pcap.NewBPF(layers.LinkTypeEthernet, sniff.DefaultSnapLen, expr)
	if err != nil {
		t.Fatalf("compile %q: %v", expr, err)
	}
	return bpf.Matches(gopacket.CaptureInfo{CaptureLength: len(frame), Length: len(frame)}, frame)
}

func TestFilterPasses(t *testing.T) {
	valid := map[string][]byte{}
	for _, c := range validCases(t) {
		valid[c.name] = c.frame
	}
	bad := map[string][]byte{}
	for _, c := range badCases(t) {
		bad[c.name] = c.frame
	}
	tests := []struct {
		frame []byte
		name  string
		want  bool
	}{
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
		if got := matches(t, "", tt.frame); got != tt.want {
			t.Errorf("%s: filter passes it %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFilterUser(t *testing.T) {
	rogueOnly := "ether src " + rogueMAC.String()
	if !matches(t, rogueOnly, buildARP(t, announcement(rogueMAC))) {
		t.Errorf("filter %q: refuses the rogue's announcement", rogueOnly)
	}
	if matches(t, rogueOnly, buildARP(t, announcement(ourMAC))) {
		t.Errorf("filter %q: passes our announcement", rogueOnly)
	}
	// ANDed with the base filter: the user cannot widen it.
	if !matches(t, "ip or arp", buildARP(t, announcement(ourMAC))) {
		t.Error(`filter "ip or arp": refuses ARP`)
	}
	for _, c := range badCases(t) {
		if c.name == "ipv4" && matches(t, "ip or arp", c.frame) {
			t.Error(`filter "ip or arp": passes IPv4, which the base filter refuses`)
		}
	}

	tests := []struct {
		user string
		want string // in the error
	}{
		{"ether hots 00:00:5e:00:53:01", "does not compile"},
		{"(arp", "does not compile"},
		{"ip6 protochain 58", "cannot run in the kernel"},
	}
	for _, tt := range tests {
		_, err := sniff.Filter(tt.user)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.user) {
			t.Errorf("Filter(%q): got error %v, want one quoting the filter and saying %q", tt.user, err, tt.want)
		}
	}
	if got, err := sniff.Filter("  "); err != nil || got != sniff.BaseFilter() {
		t.Errorf("Filter of blanks: got %q, %v; want the base filter", got, err)
	}
}
