package e2e_test

import (
	"debug/elf"
	"strings"
	"testing"

	"github.com/vipctl/vip/test/labtest"
)

// TestBinaryLoadsNoLibpcapAtStart: the vip binary needs only the C
// library at start; libpcap, for a --filter, is opened when one is
// compiled (sniff/pcap.go). Linked, it had every vip process load it and
// its chain of libraries (libdbus, libsystemd, libgcrypt, lz4, zstd, lzma):
// 1.3 MB of each agent's resident set.
func TestBinaryLoadsNoLibpcapAtStart(t *testing.T) {
	labtest.SkipShort(t) // short mode builds no binary
	f, err := elf.Open(vipBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range libs {
		if strings.Contains(l, "pcap") {
			t.Errorf("vip links %s (all: %v): open it when a filter is compiled", l, libs)
		}
	}
}
