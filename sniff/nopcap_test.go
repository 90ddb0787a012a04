//go:build !cgo

package sniff_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vipctl/vip/sniff"
)

// TestWithoutLibpcap checks that a build without cgo says why it cannot
// compile a user's filter, and captures without one.
func TestWithoutLibpcap(t *testing.T) {
	_, err := sniff.Filter("arp")
	if !errors.Is(err, sniff.ErrNoLibpcap) || !strings.Contains(err.Error(), "CGO_ENABLED=1") {
		t.Errorf("Filter: got %v, want ErrNoLibpcap, naming CGO_ENABLED=1", err)
	}
	// Refused before the interface is touched.
	if _, err := sniff.Open("nosuchif0", sniff.Options{Filter: "arp"}); !errors.Is(err, sniff.ErrNoLibpcap) {
		t.Errorf("Open with a filter: got %v, want ErrNoLibpcap", err)
	}
	if got, err := sniff.Filter(" "); err != nil || got != sniff.BaseFilter() {
		t.Errorf("Filter without an expression: got %q, %v; want the base filter", got, err)
	}
	if _, err := sniff.Open("nosuchif0", sniff.Options{}); err == nil || errors.Is(err, sniff.ErrNoLibpcap) || !strings.Contains(err.Error(), "nosuchif0") {
		t.Errorf("Open without a filter: got %v, want an error naming the missing interface, not one about libpcap", err)
	}
}
