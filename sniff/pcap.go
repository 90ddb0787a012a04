//go:build cgo

package sniff

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"
	"golang.org/x/net/bpf"
)

// maxKernelInsns is the longest classic BPF program Linux accepts
// (BPF_MAXINSNS).
const maxKernelInsns = 4096

// Open starts capturing frames that arrive on the Ethernet interface iface
// with libpcap, with Filter(opts.Filter) attached in the kernel. Frames are
// handed over in blocks, at the latest a tenth of a second after they came:
// one wake-up per block rather than per frame keeps a flood cheap, and a
// competing claimer is still seen well within a second. Frames this host
// sends are not captured: they are never a competing claim nor traffic to
// count. It needs CAP_NET_RAW; without
// it the error wraps os.ErrPermission. The caller runs the capture with Run
// and closes it with Close.
func Open(iface string, opts Options) (*Capture, error) {
	expr, err := Filter(opts.Filter)
	if err != nil {
		return nil, err
	}
	snaplen := opts.SnapLen
	if snaplen == 0 {
		snaplen = DefaultSnapLen
	}
	in, err := pcap.NewInactiveHandle(iface)
	if err != nil {
		return nil, fmt.Errorf("capture on %s: %w", iface, err)
	}
	defer in.CleanUp()
	for _, set := range []func() error{
		func() error { return in.SetSnapLen(snaplen) },
		func() error { return in.SetPromisc(opts.Promiscuous) },
		func() error { return in.SetTimeout(pollInterval) },
		func() error { return in.SetImmediateMode(false) },
		func() error {
			if opts.BufferSize == 0 {
				return nil
			}
			return in.SetBufferSize(opts.BufferSize)
		},
	} {
		if err := set(); err != nil {
			return nil, fmt.Errorf("capture on %s: %w", iface, err)
		}
	}
	h, err := in.Activate()
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "permission") {
			return nil, fmt.Errorf("capture on %s: %w (%v); run as root or give vip CAP_NET_RAW", iface, os.ErrPermission, err)
		}
		return nil, fmt.Errorf("capture on %s: %w", iface, err)
	}
	if lt := h.LinkType(); lt != layers.LinkTypeEthernet {
		h.Close()
		return nil, fmt.Errorf("capture on %s: link type %v, want Ethernet", iface, lt)
	}
	base, err := h.CompileBPFFilter(expr)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("capture on %s: compile filter: %w", iface, err)
	}
	src := &pcapSource{h: h, base: base}
	if src.poll, err = newPollReader(h); err != nil {
		// Still a capture: gopacket's reads wait in C, at a cost.
		src.pollErr = err
	}
	if err := src.scope(nil, true); err != nil {
		h.Close()
		return nil, fmt.Errorf("capture on %s: attach filter: %w", iface, err)
	}
	// libpcap leaves out what this host sends in user space. (The kernel
	// could drop it, with the packet type's ancillary load, but after a
	// filter change libpcap runs the new filter itself over the frames
	// already in its ring, and its interpreter has no such load.)
	if err := h.SetDirection(pcap.DirectionIn); err != nil {
		h.Close()
		return nil, fmt.Errorf("capture on %s: capture only what arrives: %w", iface, err)
	}
	return NewCapture(iface, src), nil
}

// OpenFile reads a capture file (pcap or pcapng) as a Capture, applying
// Filter(opts.Filter) as Open does; opts.SnapLen and the interface options
// do not apply. Run returns once the file is read.
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
	return NewCapture(path, &pcapSource{h: h}), nil
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
	if _, err := compile(user); err != nil {
		return "", fmt.Errorf("capture filter %q does not compile: %v; see pcap-filter(7)", user, err)
	}
	expr = "(" + expr + ") and (" + user + ")"
	prog, err := compile(expr)
	if err != nil {
		return "", fmt.Errorf("capture filter %q does not combine with the base filter: %v", user, err)
	}
	if !kernelSafe(prog) {
		return "", fmt.Errorf("capture filter %q cannot run in the kernel (it compiles to a loop, as protochain does, or is too long); write it without that", user)
	}
	return expr, nil
}

func compile(expr string) ([]pcap.BPFInstruction, error) {
	return pcap.CompileBPFFilter(layers.LinkTypeEthernet, DefaultSnapLen, expr)
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

// pcapSource is a Source on a libpcap handle.
//
// libpcap hands out frames in its own ring buffer, which pcap_close unmaps,
// and crashes on a closed handle. So a read copies the frame into buf under
// mu, and Close takes mu before closing: a frame handed to Run is Go memory,
// and no call reaches a closed handle.
type pcapSource struct {
	mu   sync.Mutex
	h    *pcap.Handle
	base []pcap.BPFInstruction // the filter as compiled; nil for a file
	// poll reads a live capture without waiting in C; nil for a file, or
	// where it cannot (pollErr says why).
	poll    *pollReader
	pollErr error
	// drained is set once poll found no frame: the next read waits in the
	// poller first. Only ReadFrame's goroutine uses it.
	drained bool
	// interrupted makes a wait in the poller return at once (Run's
	// context is done).
	interrupted atomic.Bool
	buf         []byte
	closed      bool
	dropped     uint64 // the kernel's count as Close found it
}

func (s *pcapSource) ReadFrame() ([]byte, time.Time, error) {
	if s.poll != nil {
		return s.pollFrame()
	}
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
	case err == pcap.NextErrorTimeoutExpired:
		return nil, time.Time{}, os.ErrDeadlineExceeded
	case errors.Is(err, io.EOF):
		return nil, time.Time{}, io.EOF
	default:
		return nil, time.Time{}, err
	}
}

// scope attaches to a live capture the base filter, narrowed to the frames
// about addrs unless all.
func (s *pcapSource) scope(addrs []netip.Addr, all bool) error {
	if s.base == nil {
		return errors.New("a capture file cannot be filtered in the kernel")
	}
	next := make([]bpf.Instruction, len(s.base))
	for i, in := range s.base {
		next[i] = bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	if !all {
		var err error
		if next, err = scopeProgram(addrs, next); err != nil {
			return err
		}
	}
	raw, err := bpf.Assemble(next)
	if err != nil {
		return err
	}
	if len(raw) > maxKernelInsns {
		return fmt.Errorf("the filter for %d addresses is %d instructions, more than the kernel's %d", len(addrs), len(raw), maxKernelInsns)
	}
	prog := make([]pcap.BPFInstruction, len(raw))
	for i, r := range raw {
		prog[i] = pcap.BPFInstruction{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return s.h.SetBPFInstructionFilter(prog)
}

// pollFrame is ReadFrame through the poller: frames are taken while there
// are some, then the reader waits until the kernel hands over more, without
// a deadline, so that an idle capture costs no wake-up at all; interrupt
// ends the wait.
func (s *pcapSource) pollFrame() ([]byte, time.Time, error) {
	for {
		if s.drained {
			switch err := s.poll.wait(&s.interrupted); {
			case errors.Is(err, os.ErrDeadlineExceeded):
				return nil, time.Time{}, os.ErrDeadlineExceeded
			case errors.Is(err, os.ErrClosed):
				return nil, time.Time{}, io.EOF
			case err != nil:
				return nil, time.Time{}, err
			}
			s.drained = false
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, time.Time{}, io.EOF
		}
		data, ts, err := s.poll.next()
		if err == nil && data != nil {
			s.buf = append(s.buf[:0], data...)
		}
		s.mu.Unlock()
		switch {
		case err != nil:
			return nil, time.Time{}, err
		case data == nil:
			s.drained = true
		default:
			return s.buf, ts, nil
		}
	}
}

func (s *pcapSource) interrupt() {
	s.interrupted.Store(true)
	if s.poll != nil {
		s.poll.interrupt()
	}
}

func (s *pcapSource) resume() { s.interrupted.Store(false) }

func (s *pcapSource) Dropped() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.dropped, nil
	}
	return s.droppedLocked()
}

func (s *pcapSource) droppedLocked() (uint64, error) {
	st, err := s.h.Stats()
	if err != nil {
		return 0, err
	}
	return uint64(st.PacketsDropped), nil
}

func (s *pcapSource) Close() error {
	if s.poll != nil {
		s.poll.close() // wakes a reader waiting in the poller
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		// Keep the last count, so that Stats after Close still has it.
		s.dropped, _ = s.droppedLocked()
		s.closed = true
		s.h.Close()
	}
	return nil
}
