//go:build cgo

package sniff

import (
	"fmt"
	"strings"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"
	"golang.org/x/net/bpf"
)

// maxKernelInsns is the longest classic BPF program Linux accepts
// (BPF_MAXINSNS).
const maxKernelInsns = 4096

// Filter returns the capture filter for a user's libpcap expression: the
// BaseFilter, and the user's expression if not empty. It fails, saying why,
// when the expression does not compile, or compiles to a program the kernel
// cannot run (libpcap would then filter in user space, and every frame on
// the interface would reach the process).
func Filter(user string) (string, error) {
	expr := BaseFilter()
	if strings.TrimSpace(user) == "" {
		return expr, nil
	}
	if _, err := compile(user, DefaultSnapLen); err != nil {
		return "", fmt.Errorf("capture filter %q does not compile: %v; see pcap-filter(7)", user, err)
	}
	expr = "(" + expr + ") and (" + user + ")"
	prog, err := compile(expr, DefaultSnapLen)
	if err != nil {
		return "", fmt.Errorf("capture filter %q does not combine with the base filter: %v", user, err)
	}
	if !kernelSafe(prog) {
		return "", fmt.Errorf("capture filter %q cannot run in the kernel (it compiles to a loop, as protochain does, or is too long); write it without that", user)
	}
	return expr, nil
}

// userProgram is Filter(user) compiled by libpcap, keeping snaplen bytes of
// each frame, for a live capture's socket.
func userProgram(user string, snaplen int) ([]bpf.Instruction, error) {
	expr, err := Filter(user)
	if err != nil {
		return nil, err
	}
	prog, err := compile(expr, snaplen)
	if err != nil {
		return nil, fmt.Errorf("capture filter %q: %v", user, err)
	}
	out := make([]bpf.Instruction, len(prog))
	for i, in := range prog {
		out[i] = bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	return out, nil
}

func compile(expr string, snaplen int) ([]pcap.BPFInstruction, error) {
	return pcap.CompileBPFFilter(layers.LinkTypeEthernet, snaplen, expr)
}

// kernelSafe reports whether Linux's classic BPF checker would accept prog
// as far as its shape goes: no more than BPF_MAXINSNS instructions, and no
// jump backwards or past the end. Conditional jumps only go forwards by
// encoding; an unconditional one (BPF_JMP|BPF_JA) goes pc+1+k, which libpcap
// makes wrap around to jump back.
func kernelSafe(prog []pcap.BPFInstruction) bool {
	const jmpJA = 0x05 // BPF_JMP | BPF_JA
	if len(prog) == 0 || len(prog) > maxKernelInsns {
		return false
	}
	for pc, ins := range prog {
		if ins.Code == jmpJA && uint64(ins.K) >= uint64(len(prog)-pc-1) {
			return false
		}
	}
	return true
}
