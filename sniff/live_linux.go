//go:build linux

package sniff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// defaultBufferSize is a capture's receive buffer unless Options say
// otherwise: libpcap's default, which captures used before.
const defaultBufferSize = 2 << 20

// liveBatch is how many frames one read takes at most: under a flood one
// system call carries many frames, as a block of libpcap's ring did.
const liveBatch = 64

// Open starts capturing the frames that arrive on the Ethernet interface
// iface, on a packet socket with the capture filter attached in the
// kernel: BaseFilter, built in Go, or with opts.Filter ANDed to it,
// compiled by libpcap (a build without cgo refuses one). Frames this host
// sends are not captured: they are never a competing claim nor traffic to
// count. A reader waits for frames in the Go runtime's poller, which costs
// nothing while none come, and takes up to liveBatch of them per system
// call. It needs CAP_NET_RAW; without it the error wraps os.ErrPermission.
// The caller runs the capture with Run and closes it with Close.
func Open(iface string, opts Options) (*Capture, error) {
	snaplen := opts.SnapLen
	if snaplen == 0 {
		snaplen = DefaultSnapLen
	}
	var base []bpf.Instruction
	var err error
	if strings.TrimSpace(opts.Filter) == "" {
		base, err = baseProgram(uint32(snaplen))
	} else {
		// A user's expression is checked before the interface is touched.
		base, err = userProgram(opts.Filter, snaplen)
	}
	if err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("capture on %s: %w", iface, err)
	}
	src, err := openPacket(ifi, base, snaplen, opts)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("capture on %s: %w; run as root or give vip CAP_NET_RAW", iface, err)
		}
		return nil, fmt.Errorf("capture on %s: %w", iface, err)
	}
	return NewCapture(iface, src), nil
}

// packetSource is a Source on a packet socket (packet(7)) bound to one
// interface.
//
// Frames are read with recvmmsg into buffers of its own, so a frame handed
// to Run is Go memory that Close leaves alone. The kernel adds to each its
// arrival time (SO_TIMESTAMPNS) and the VLAN tag it took off
// (PACKET_AUXDATA), which the frame gets back, as libpcap did: a capture
// on a VLAN's parent sees the tag, and the detector leaves those frames to
// their own segment.
type packetSource struct {
	conn    *packet.Conn
	rc      syscall.RawConn
	base    []bpf.Instruction
	snaplen int

	// The batch read last; only ReadFrame's goroutine uses it. Each
	// frame's buffer starts vlanLen bytes in, to leave room for a tag.
	msgs       [liveBatch]unix.Mmsghdr
	iovs       [liveBatch]unix.Iovec
	ctrl       [liveBatch][ctrlLen]byte
	bufs       []byte
	got, next  int
	errno      syscall.Errno
	readBatch  func(fd uintptr) bool
	frameStart int // the stride of bufs

	mu      sync.Mutex // guards dropped, the socket's statistics and closing
	closed  atomic.Bool
	dropped uint64 // the kernel's count, summed: reading it resets it
}

const (
	vlanLen = 4
	// ctrlLen holds a timestamp's and an auxdata's control messages.
	ctrlLen = 128
)

// openPacket opens and configures the socket. It binds with a filter that
// drops everything, sets the options, and only then attaches base, so that
// no frame is read without them.
func openPacket(ifi *net.Interface, base []bpf.Instruction, snaplen int, opts Options) (*packetSource, error) {
	dropAll, err := bpf.Assemble([]bpf.Instruction{bpf.RetConstant{Val: bpfRetDrop}})
	if err != nil {
		return nil, err
	}
	conn, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_ALL, &packet.Config{Filter: dropAll})
	if err != nil {
		return nil, err
	}
	s := &packetSource{conn: conn, base: base, snaplen: snaplen}
	if err := s.configure(opts); err != nil {
		conn.Close()
		return nil, err
	}
	if err := s.scope(nil, true); err != nil {
		conn.Close()
		return nil, fmt.Errorf("attach filter: %w", err)
	}
	return s, nil
}

func (s *packetSource) configure(opts Options) error {
	var err error
	if s.rc, err = s.conn.SyscallConn(); err != nil {
		return err
	}
	var hatype uint16
	var serr error
	if err := s.rc.Control(func(fd uintptr) {
		sa, err := unix.Getsockname(int(fd))
		if err != nil {
			serr = err
			return
		}
		if ll, ok := sa.(*unix.SockaddrLinklayer); ok {
			hatype = ll.Hatype
		}
		// Best effort, see inboundOnly.
		_ = unix.SetsockoptInt(int(fd), unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
		for _, o := range []struct{ level, name, val int }{
			{unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1},
			{unix.SOL_PACKET, unix.PACKET_AUXDATA, 1},
		} {
			if serr = unix.SetsockoptInt(int(fd), o.level, o.name, o.val); serr != nil {
				return
			}
		}
		n := opts.BufferSize
		if n == 0 {
			n = defaultBufferSize
		}
		// Past net.core.rmem_max when the process may (CAP_NET_ADMIN).
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n); serr != nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, n)
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	// libpcap captures a loopback interface as Ethernet too.
	if hatype != unix.ARPHRD_ETHER && hatype != unix.ARPHRD_LOOPBACK {
		return fmt.Errorf("link type %d, want Ethernet", hatype)
	}
	if opts.Promiscuous {
		if err := s.conn.SetPromiscuous(true); err != nil {
			return err
		}
	}
	s.initBatch()
	s.readBatch = func(fd uintptr) bool {
		for {
			n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&s.msgs[0])), liveBatch, unix.MSG_DONTWAIT, 0, 0)
			switch errno {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // wait in the poller
			}
			s.got, s.errno = int(n), errno
			return true
		}
	}
	return nil
}

// initBatch sets up the buffers of a batch for s.snaplen bytes a frame.
func (s *packetSource) initBatch() {
	s.frameStart = vlanLen + s.snaplen
	s.bufs = make([]byte, liveBatch*s.frameStart)
	for i := range s.msgs {
		s.iovs[i].Base = &s.bufs[i*s.frameStart+vlanLen]
		s.iovs[i].SetLen(s.snaplen)
		s.msgs[i].Hdr.Iov = &s.iovs[i]
		s.msgs[i].Hdr.SetIovlen(1)
		s.msgs[i].Hdr.Control = &s.ctrl[i][0]
	}
}

// ReadFrame returns the next frame of the batch read last, reading a new
// batch when it is used up. It waits without a deadline; interrupt ends the
// wait.
func (s *packetSource) ReadFrame() ([]byte, time.Time, error) {
	for s.next == s.got {
		if err := s.fill(); err != nil {
			return nil, time.Time{}, err
		}
	}
	i := s.next
	s.next++
	return s.frame(i)
}

func (s *packetSource) fill() error {
	s.got, s.next, s.errno = 0, 0, 0
	for i := range s.msgs {
		s.msgs[i].Hdr.SetControllen(ctrlLen)
		s.msgs[i].Hdr.Flags = 0
	}
	err := s.rc.Read(s.readBatch)
	if s.closed.Load() {
		return io.EOF
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return os.ErrDeadlineExceeded
	case err != nil:
		return err
	case s.errno != 0:
		// ENETDOWN or ENODEV: the interface went down or away.
		return s.errno
	}
	return nil
}

// frame returns the i-th frame of the batch, with its VLAN tag put back.
func (s *packetSource) frame(i int) ([]byte, time.Time, error) {
	m := &s.msgs[i]
	n := min(int(m.Len), s.snaplen)
	start := i*s.frameStart + vlanLen
	b := s.bufs[start : start+n]
	var ts time.Time
	tagged, tpid, tci := false, uint16(0), uint16(0)
	ctrl := s.ctrl[i][:min(int(m.Hdr.Controllen), ctrlLen)]
	for len(ctrl) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(ctrl) {
			break
		}
		data := ctrl[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && len(data) >= int(unsafe.Sizeof(unix.Timespec{})):
			t := (*unix.Timespec)(unsafe.Pointer(&data[0]))
			ts = time.Unix(int64(t.Sec), int64(t.Nsec))
		case h.Level == unix.SOL_PACKET && h.Type == unix.PACKET_AUXDATA && len(data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})):
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&data[0]))
			// As libpcap: a tag is there if the kernel says so, or
			// has a TCI on an older kernel that does not say.
			if aux.Vlan_tci != 0 || aux.Status&unix.TP_STATUS_VLAN_VALID != 0 {
				tagged, tci, tpid = true, aux.Vlan_tci, unix.ETH_P_8021Q
				if aux.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
					tpid = aux.Vlan_tpid
				}
			}
		}
		sp := unix.CmsgSpace(l - unix.CmsgLen(0))
		if sp > len(ctrl) {
			break
		}
		ctrl = ctrl[sp:]
	}
	if ts.IsZero() {
		// Only if the kernel gave no time, which it does once asked.
		ts = time.Now()
	}
	if tagged && n >= 12 {
		b = s.bufs[start-vlanLen : start+n]
		copy(b[:12], b[vlanLen:vlanLen+12])
		binary.BigEndian.PutUint16(b[12:], tpid)
		binary.BigEndian.PutUint16(b[14:], tci)
	}
	return b, ts, nil
}

// scope attaches the base filter, narrowed to the frames about addrs
// unless all, behind inboundOnly.
func (s *packetSource) scope(addrs []netip.Addr, all bool) error {
	next := s.base
	if !all {
		var err error
		if next, err = scopeProgram(addrs, s.base); err != nil {
			return err
		}
	}
	raw, err := bpf.Assemble(inboundOnly(next))
	if err != nil {
		return err
	}
	if len(raw) > maxKernelInsns {
		return fmt.Errorf("the filter for %d addresses is %d instructions, more than the kernel's %d", len(addrs), len(raw), maxKernelInsns)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	return s.conn.SetBPF(raw)
}

// interrupt ends a wait under way, and makes every later read return at
// once, until resume.
func (s *packetSource) interrupt() { _ = s.conn.SetReadDeadline(time.Unix(1, 0)) }

func (s *packetSource) resume() { _ = s.conn.SetReadDeadline(time.Time{}) }

func (s *packetSource) Dropped() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return s.dropped, nil
	}
	return s.droppedLocked()
}

func (s *packetSource) droppedLocked() (uint64, error) {
	st, err := s.conn.Stats()
	if err != nil {
		return 0, err
	}
	s.dropped += uint64(st.Drops)
	return s.dropped, nil
}

// Close closes the socket, which ends a read waiting in the poller.
func (s *packetSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	// Keep the last count, so that Stats after Close still has it.
	_, _ = s.droppedLocked()
	s.closed.Store(true)
	return s.conn.Close()
}
