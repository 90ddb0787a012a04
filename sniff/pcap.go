//go:build cgo

package sniff

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"
	"golang.org/x/net/bpf"
)

// maxKernelInsns is the longest classic BPF program Linux accepts
// (BPF_MAXINSNS).
const maxKernelInsns = 4096

// OpenFile reads a capture file (pcap or pcapng) with libpcap as a
// Capture, applying Filter(opts.Filter); opts.SnapLen and the interface
// options do not apply. Run returns once the file is read.
func OpenFile(path string, opts Options) (*Capture, error) {
	expr, err := Filter(opts.Filter)
	if err != nil {
		return nil, err
	}
	h, err := pcap.OpenOffline(path)
	if err != nil {
		return nil, fmt.Errorf("read capture %s: %w", path, err)
	}
	if lt := h.LinkType(); lt != layers.LinkTypeEthernet {
		h.Close()
		return nil, fmt.Errorf("read capture %s: link type %v, want Ethernet", path, lt)
	}
	if err := h.SetBPFFilter(expr); err != nil {
		h.Close()
		return nil, fmt.Errorf("read capture %s: filter: %w", path, err)
	}
	return NewCapture(path, &fileSource{h: h}), nil
}

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

// fileSource is a Source on a libpcap handle reading a file.
//
// libpcap hands out frames in its own buffer, which pcap_close frees, and
// crashes on a closed handle. So a read copies the frame into buf under
// mu, and Close takes mu before closing.
type fileSource struct {
	mu     sync.Mutex
	h      *pcap.Handle
	buf    []byte
	closed bool
}

func (s *fileSource) ReadFrame() ([]byte, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, time.Time{}, io.EOF
	}
	data, ci, err := s.h.ZeroCopyReadPacketData()
	switch {
	case err == nil:
		s.buf = append(s.buf[:0], data...)
		return s.buf, ci.Timestamp, nil
	case errors.Is(err, io.EOF):
		return nil, time.Time{}, io.EOF
	default:
		return nil, time.Time{}, err
	}
}

// Dropped is always zero: nothing drops frames from a file.
func (s *fileSource) Dropped() (uint64, error) { return 0, nil }

func (s *fileSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.h.Close()
	}
	return nil
}
