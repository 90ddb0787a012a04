//go:build !cgo

package sniff_test

import (
	"errors"
	"testing"

	"github.com/vipctl/vip/sniff"
)

// TestWithoutLibpcap checks that a build without cgo says why it cannot
// capture, instead of failing to build.
func TestWithoutLibpcap(t *testing.T) {
	if _, err := sniff.Open("eth0", sniff.Options{}); !errors.Is(err, sniff.ErrNoLibpcap) {
		t.Errorf("Open: got %v, want ErrNoLibpcap", err)
	}
	if _, err := sniff.OpenFile("x.pcap", sniff.Options{}); !errors.Is(err, sniff.ErrNoLibpcap) {
		t.Errorf("OpenFile: got %v, want ErrNoLibpcap", err)
	}
	if _, err := sniff.Filter("arp"); !errors.Is(err, sniff.ErrNoLibpcap) {
		t.Errorf("Filter: got %v, want ErrNoLibpcap", err)
	}
}
