//go:build cgo

package sniff

/*
#cgo linux LDFLAGS: -lpcap
#include <stdio.h>
#include <stdlib.h>
#include <pcap/pcap.h>

// vip_compile compiles expr, optimised, for Ethernet frames of snaplen
// bytes into prog, which the caller frees with pcap_freecode. On failure it
// returns -1 with libpcap's reason in errbuf.
static int vip_compile(const char *expr, int snaplen, struct bpf_program *prog, char *errbuf, size_t errlen) {
	pcap_t *p = pcap_open_dead(DLT_EN10MB, snaplen);
	if (p == NULL) {
		snprintf(errbuf, errlen, "libpcap could not open a dead handle");
		return -1;
	}
	int rc = pcap_compile(p, prog, expr, 1, PCAP_NETMASK_UNKNOWN);
	if (rc != 0) {
		snprintf(errbuf, errlen, "%s", pcap_geterr(p));
	}
	pcap_close(p);
	return rc;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

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

// insn is one classic BPF instruction as libpcap compiles it (struct
// bpf_insn).
type insn struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

// compile has libpcap compile expr for Ethernet frames of snaplen bytes.
// It calls pcap_compile itself, as gopacket/pcap's CompileBPFFilter did:
// importing gopacket/pcap linked gopacket/layers, whose start-up tables
// cost every vip process 6-8 MB of memory and 3-4 ms before main
// (BENCHMARKS.md). libpcap's compiler is reentrant since 1.8 (Debian ships
// 1.10), so no lock is taken.
func compile(expr string, snaplen int) ([]insn, error) {
	cexpr := C.CString(expr)
	defer C.free(unsafe.Pointer(cexpr))
	var prog C.struct_bpf_program
	var errbuf [C.PCAP_ERRBUF_SIZE]C.char
	if C.vip_compile(cexpr, C.int(snaplen), &prog, &errbuf[0], C.size_t(len(errbuf))) != 0 {
		return nil, errors.New(C.GoString(&errbuf[0]))
	}
	defer C.pcap_freecode(&prog)
	raw := unsafe.Slice(prog.bf_insns, int(prog.bf_len))
	out := make([]insn, len(raw))
	for i, in := range raw {
		out[i] = insn{Code: uint16(in.code), Jt: uint8(in.jt), Jf: uint8(in.jf), K: uint32(in.k)}
	}
	return out, nil
}

// kernelSafe reports whether Linux's classic BPF checker would accept prog
// as far as its shape goes: no more than BPF_MAXINSNS instructions, and no
// jump backwards or past the end. Conditional jumps only go forwards by
// encoding; an unconditional one (BPF_JMP|BPF_JA) goes pc+1+k, which libpcap
// makes wrap around to jump back.
func kernelSafe(prog []insn) bool {
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
