//go:build cgo

package sniff_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
	for _, tt := range filterCases(t) {
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

// TestBaseProgramIsBaseFilter runs libpcap's compilation of BaseFilter and
// the base program built in Go over the same frames: the corpus, and
// variations of it on the bytes the filter reads (EtherType, next headers,
// extension header lengths, ICMPv6 types) and on its length. A frame must
// pass one iff it passes the other.
func TestBaseProgramIsBaseFilter(t *testing.T) {
	pcapBPF, err := pcap.NewBPF(layers.LinkTypeEthernet, sniff.DefaultSnapLen, sniff.BaseFilter())
	if err != nil {
		t.Fatal(err)
	}
	vm := baseVM(t)
	check := func(name string, frame []byte) bool {
		t.Helper()
		want := pcapBPF.Matches(gopacket.CaptureInfo{CaptureLength: len(frame), Length: len(frame)}, frame)
		n, err := vm.Run(frame)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := n > 0; got != want {
			t.Errorf("%s (% x): the Go program passes it %v, libpcap's %v", name, frame, got, want)
			return false
		}
		return want
	}
	var corpus [][]byte
	for _, c := range filterCases(t) {
		check(c.name, c.frame)
		corpus = append(corpus, c.frame)
	}
	for _, c := range validCases(t) {
		corpus = append(corpus, c.frame)
	}
	for _, c := range badCases(t) {
		if len(c.frame) > 0 { // gopacket's Matches takes no empty frame
			corpus = append(corpus, c.frame)
		}
	}
	// Values that steer the filter: next headers it follows or stops at,
	// the ICMPv6 types it keeps and others, short extension lengths.
	steer := []byte{0, 1, 2, 6, 17, 43, 44, 58, 59, 60, 128, 133, 135, 136, 143, 255}
	rng := rand.New(rand.NewPCG(1, 2))
	passed, n := 0, 20000
	for i := range n {
		f := slices.Clone(corpus[rng.IntN(len(corpus))])
		if len(f) > 13 && rng.IntN(8) == 0 {
			et := []uint16{0x0806, 0x86dd, 0x0800, 0x8100}[rng.IntN(4)]
			f[12], f[13] = byte(et>>8), byte(et)
		}
		if len(f) > 20 && rng.IntN(2) == 0 {
			f[20] = steer[rng.IntN(len(steer))]
		}
		for range rng.IntN(4) {
			if len(f) > 54 {
				f[54+rng.IntN(min(len(f)-54, 48))] = steer[rng.IntN(len(steer))]
			}
		}
		if rng.IntN(4) == 0 {
			f = f[:1+rng.IntN(len(f))] // gopacket's Matches takes no empty frame
		}
		if check(fmt.Sprintf("variation %d", i), f) {
			passed++
		}
		if t.Failed() {
			break
		}
	}
	// Both outcomes must be common, or the variations test little.
	if passed < n/20 || passed > n-n/20 {
		t.Errorf("%d of %d variations passed: want both outcomes well represented", passed, n)
	}
	t.Logf("%d of %d variations passed both filters", passed, n)
}
