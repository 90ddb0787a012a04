//go:build cgo

package sniff

/*
#cgo linux LDFLAGS: -ldl
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <pcap/pcap.h>

// libpcap is opened at the first compile (dlopen), not linked: linking it
// had every vip process load it and its chain of libraries (libdbus,
// libsystemd, libgcrypt, lz4, zstd, lzma) at start, for a --filter few
// runs give.
static pcap_t *(*vip_open_dead)(int, int);
static int (*vip_pcap_compile)(pcap_t *, struct bpf_program *, const char *, int, bpf_u_int32);
static char *(*vip_geterr)(pcap_t *);
static void (*vip_close)(pcap_t *);
static void (*vip_freecode)(struct bpf_program *);
static pthread_once_t vip_once = PTHREAD_ONCE_INIT;
static char vip_load_err[256];

static void vip_load(void) {
	const char *names[] = {"libpcap.so.0.8", "libpcap.so.1", "libpcap.so", NULL};
	void *h = NULL;
	for (int i = 0; names[i] != NULL && h == NULL; i++) {
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	}
	if (h == NULL) {
		snprintf(vip_load_err, sizeof vip_load_err, "%s", dlerror());
		return;
	}
	vip_open_dead = dlsym(h, "pcap_open_dead");
	vip_pcap_compile = dlsym(h, "pcap_compile");
	vip_geterr = dlsym(h, "pcap_geterr");
	vip_close = dlsym(h, "pcap_close");
	vip_freecode = dlsym(h, "pcap_freecode");
	if (!vip_open_dead || !vip_pcap_compile || !vip_geterr || !vip_close || !vip_freecode) {
		snprintf(vip_load_err, sizeof vip_load_err, "the libpcap found lacks pcap_compile and its kin");
		vip_open_dead = NULL;
	}
}

// vip_compile compiles expr, optimised, for Ethernet frames of snaplen
// bytes into prog, which the caller frees with vip_free. It returns 0; -1
// with libpcap's reason in errbuf; -2 when libpcap cannot be loaded, the
// reason in errbuf.
static int vip_compile(const char *expr, int snaplen, struct bpf_program *prog, char *errbuf, size_t errlen) {
	pthread_once(&vip_once, vip_load);
	if (vip_open_dead == NULL) {
		snprintf(errbuf, errlen, "%s", vip_load_err);
		return -2;
	}
	pcap_t *p = vip_open_dead(DLT_EN10MB, snaplen);
	if (p == NULL) {
		snprintf(errbuf, errlen, "libpcap could not open a dead handle");
		return -1;
	}
	int rc = vip_pcap_compile(p, prog, expr, 1, PCAP_NETMASK_UNKNOWN);
	if (rc != 0) {
		snprintf(errbuf, errlen, "%s", vip_geterr(p));
		rc = -1;
	}
	vip_close(p);
	return rc;
}

static void vip_free(struct bpf_program *prog) { vip_freecode(prog); }
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
	if _, err := compile(user, DefaultSnapLen); errors.Is(err, ErrLibpcapMissing) {
		return "", fmt.Errorf("capture filter %q needs libpcap, and %w: install it (libpcap0.8 on Debian), or leave the filter out", user, err)
	} else if err != nil {
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

// compile has libpcap compile expr for Ethernet frames of snaplen bytes,
// opening libpcap at its first call (an error wrapping ErrLibpcapMissing
// when it is not installed). It calls pcap_compile itself, as
// gopacket/pcap's CompileBPFFilter did: importing gopacket/pcap linked
// gopacket/layers, whose start-up tables cost every vip process 6-8 MB of
// memory and 3-4 ms before main (BENCHMARKS.md). libpcap's compiler is
// reentrant since 1.8 (Debian ships 1.10), so no lock is taken.
func compile(expr string, snaplen int) ([]insn, error) {
	cexpr := C.CString(expr)
	defer C.free(unsafe.Pointer(cexpr))
	var prog C.struct_bpf_program
	var errbuf [C.PCAP_ERRBUF_SIZE]C.char
	switch C.vip_compile(cexpr, C.int(snaplen), &prog, &errbuf[0], C.size_t(len(errbuf))) {
	case 0:
	case -2:
		return nil, fmt.Errorf("%w (%s)", ErrLibpcapMissing, C.GoString(&errbuf[0]))
	default:
		return nil, errors.New(C.GoString(&errbuf[0]))
	}
	defer C.vip_free(&prog)
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
