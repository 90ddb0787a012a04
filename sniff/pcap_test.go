//go:build cgo

package sniff_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/vipctl/vip/sniff"
)

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
