//go:build cgo

package sniff_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/vipctl/vip/sniff"
)

// TestOpenFile reads a pcap file through libpcap: the base filter applies,
// and capture timestamps reach the observations.
func TestOpenFile(t *testing.T) {
	frames := []struct {
		name string
		at   time.Duration
	}{
		{"arp-who-has", 0},
		{"ipv4", 100 * time.Millisecond},             // filtered out
		{"icmpv6-echo", 150 * time.Millisecond},      // filtered out
		{"arp-announcement", 200 * time.Millisecond}, // the rogue
		{"ns", 300 * time.Millisecond},
		{"ns-bad-checksum", 400 * time.Millisecond}, // passes, undecodable
		{"na-hop-by-hop-destination", 500 * time.Millisecond},
	}
	path := filepath.Join(t.TempDir(), "segment.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, fr := range frames {
		b := frameNamed(t, fr.name)
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: at(fr.at), CaptureLength: len(b), Length: len(b)}, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		filter string
		want   []sniff.Kind
		stats  sniff.Stats
	}{
		{"", []sniff.Kind{sniff.KindWhoHas, sniff.KindAnnouncement, sniff.KindSolicitation, sniff.KindAdvertisement},
			sniff.Stats{Received: 5, Undecodable: 1}},
		{"ether src " + rogueMAC.String(), []sniff.Kind{sniff.KindAnnouncement, sniff.KindAdvertisement},
			sniff.Stats{Received: 2}},
	}
	for _, tt := range tests {
		c, err := sniff.OpenFile(path, sniff.Options{Filter: tt.filter})
		if err != nil {
			t.Fatalf("OpenFile: %v", err)
		}
		var seen collect
		if err := c.Run(context.Background(), &seen); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if got := seen.kinds(); !equalKinds(got, tt.want) {
			t.Errorf("filter %q: got %v, want %v", tt.filter, got, tt.want)
		}
		if got := c.Stats(); got != tt.stats {
			t.Errorf("filter %q: Stats got %+v, want %+v", tt.filter, got, tt.stats)
		}
		if tt.filter == "" && len(seen.obs) == 4 && !seen.obs[1].Time.Equal(at(200*time.Millisecond)) {
			t.Errorf("announcement: got time %v, want %v", seen.obs[1].Time, at(200*time.Millisecond))
		}
	}

	if _, err := sniff.OpenFile(path, sniff.Options{Filter: "ether hots x"}); err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Errorf("OpenFile with a bad filter: got %v, want it refused", err)
	}
	if _, err := sniff.OpenFile(filepath.Join(t.TempDir(), "none.pcap"), sniff.Options{}); err == nil {
		t.Error("OpenFile of a missing file: got no error")
	}
}

func equalKinds(a, b []sniff.Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOpenRefuses(t *testing.T) {
	// The filter is checked before the interface is touched, so this
	// needs no privileges.
	_, err := sniff.Open("eth0", sniff.Options{Filter: "(arp"})
	if err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Errorf("Open with a bad filter: got %v, want it refused", err)
	}
	if os.Geteuid() != 0 {
		_, err := sniff.Open("lo", sniff.Options{})
		if !errors.Is(err, os.ErrPermission) {
			t.Errorf("Open without privileges: got %v, want an error wrapping os.ErrPermission", err)
		}
		return
	}
	if _, err := sniff.Open("nosuchif0", sniff.Options{}); err == nil || !strings.Contains(err.Error(), "nosuchif0") {
		t.Errorf("Open of a missing interface: got %v, want an error naming it", err)
	}
}
