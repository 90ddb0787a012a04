//go:build cgo

package sniff

import (
	"testing"
)

func TestBaseFilterRunsInKernel(t *testing.T) {
	prog, err := compile(BaseFilter(), DefaultSnapLen)
	if err != nil {
		t.Fatalf("compile the base filter: %v", err)
	}
	if !kernelSafe(prog) {
		t.Errorf("the base filter (%d instructions) would not run in the kernel", len(prog))
	}
	// protochain is what the base filter avoids: libpcap compiles it to a
	// jump backwards.
	prog, err = compile("ip6 protochain 58", DefaultSnapLen)
	if err != nil {
		t.Fatalf("compile protochain: %v", err)
	}
	if kernelSafe(prog) {
		t.Error("protochain: got kernel-safe, want refused for its backward jump")
	}
	if kernelSafe(nil) || kernelSafe(make([]insn, maxKernelInsns+1)) {
		t.Error("an empty or overlong program: got kernel-safe")
	}
}
