//go:build linux

package sniff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/batchio"
	"github.com/vipctl/vip/internal/wire"
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
// count. A reader waits for frames in poll(2) (batchio), which costs
// nothing while none come, and takes up to liveBatch of them per system
// call; a capture that keeps up reads at most every readPace. It needs
// CAP_NET_RAW; without it the error wraps os.ErrPermission. The caller
// runs the capture with Run and closes it with Close.
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
// Frames are read in batches (batchio) into buffers of its own, so a
// frame handed to Run is Go memory that Close leaves alone. The kernel
// adds to each its arrival time (SO_TIMESTAMPNS) and the VLAN tag it took
// off (PACKET_AUXDATA), which the frame gets back, as libpcap did: a
// capture on a VLAN's parent sees the tag, and the detector leaves those
// frames to their own segment.
type packetSource struct {
	// fds are the sockets, made with socket(2) rather than through the Go
	// runtime's poller: a socket in the poller's epoll set wakes the
	// poller for frames nobody waits for (see readPace). One tap of
	// every frame, or an ARP and an IPv6 socket after tc ingress
	// (Options.AfterIngress). wake is the batchio wake that interrupt
	// and Close poke to end a wait in poll(2).
	fds         []int
	wake        int
	readMu      sync.Mutex // held by the reader; Close takes it to close the fds
	interrupted atomic.Bool
	base        []bpf.Instruction
	snaplen     int
	// ifindex is the interface's, which a socket bound to a protocol
	// checks each frame against (wire.OwnFramesOnly); 0 for a tap.
	ifindex int

	// rd reads the sockets in batches; only ReadFrame's goroutine uses it
	// and the batch read last. Each frame's buffer in bufs starts vlanLen
	// bytes in, to leave room for a tag.
	rd         *batchio.Reader
	bufs       []byte
	got, next  int
	frameStart int // the stride of bufs
	// lastFill is when the batch read last was asked for (see readPace).
	lastFill time.Time

	mu      sync.Mutex // guards dropped, the socket's statistics and closing
	closed  atomic.Bool
	dropped uint64 // the kernel's count, summed: reading it resets it
}

const (
	vlanLen = 4
	// ctrlLen holds a timestamp's and an auxdata's control messages.
	ctrlLen = 128
)

// openPacket opens and configures the sockets. It binds each with a
// filter that drops everything, sets the options, and only then attaches
// base, so that no frame is read without them.
func openPacket(ifi *net.Interface, base []bpf.Instruction, snaplen int, opts Options) (*packetSource, error) {
	dropAll, err := bpf.Assemble(wire.DropAll())
	if err != nil {
		return nil, err
	}
	wake, err := batchio.NewWake()
	if err != nil {
		return nil, err
	}
	s := &packetSource{wake: wake, base: base, snaplen: snaplen}
	if opts.AfterIngress {
		s.ifindex = ifi.Index
	}
	fail := func(err error) (*packetSource, error) {
		for _, fd := range s.fds {
			unix.Close(fd)
		}
		unix.Close(wake)
		return nil, err
	}
	protocols := []uint16{unix.ETH_P_ALL}
	if opts.AfterIngress {
		protocols = []uint16{unix.ETH_P_ARP, unix.ETH_P_IPV6}
	}
	for _, proto := range protocols {
		// Protocol 0 until bind: a socket made with its protocol takes
		// frames from every interface before its filter and bind are on.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			return fail(os.NewSyscallError("socket", err))
		}
		s.fds = append(s.fds, fd)
		if err := attach(fd, dropAll); err != nil {
			return fail(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: ifi.Index}); err != nil {
			return fail(os.NewSyscallError("bind", err))
		}
		if err := configure(fd, opts); err != nil {
			return fail(err)
		}
	}
	s.initBatch()
	if err := s.scope(Scope{}, true); err != nil {
		return fail(fmt.Errorf("attach filter: %w", err))
	}
	return s, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// attach puts a classic BPF program on the socket.
func attach(fd int, raw []bpf.RawInstruction) error {
	if len(raw) == 0 {
		return errors.New("an empty filter")
	}
	prog := unix.SockFprog{Len: uint16(len(raw)), Filter: (*unix.SockFilter)(unsafe.Pointer(&raw[0]))}
	return os.NewSyscallError("setsockopt", unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog))
}

func configure(fd int, opts Options) error {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return os.NewSyscallError("getsockname", err)
	}
	var hatype uint16
	if ll, ok := sa.(*unix.SockaddrLinklayer); ok {
		hatype = ll.Hatype
	}
	// Best effort, see wire.InboundOnly.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	for _, o := range []struct{ level, name, val int }{
		{unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1},
		{unix.SOL_PACKET, unix.PACKET_AUXDATA, 1},
	} {
		if err := unix.SetsockoptInt(fd, o.level, o.name, o.val); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
	}
	n := opts.BufferSize
	if n == 0 {
		n = defaultBufferSize
	}
	// Past net.core.rmem_max when the process may (CAP_NET_ADMIN).
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n); err != nil {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, n); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
	}
	// libpcap captures a loopback interface as Ethernet too.
	if hatype != unix.ARPHRD_ETHER && hatype != unix.ARPHRD_LOOPBACK {
		return fmt.Errorf("link type %d, want Ethernet", hatype)
	}
	if opts.Promiscuous {
		mreq := unix.PacketMreq{Ifindex: int32(sa.(*unix.SockaddrLinklayer).Ifindex), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
	}
	return nil
}

// initBatch sets up the buffers of a batch for s.snaplen bytes a frame.
func (s *packetSource) initBatch() {
	s.frameStart = vlanLen + s.snaplen
	s.bufs = make([]byte, liveBatch*s.frameStart)
	bufs := make([][]byte, liveBatch)
	for i := range bufs {
		start := i*s.frameStart + vlanLen
		bufs[i] = s.bufs[start : start+s.snaplen]
	}
	s.rd = batchio.NewReader(s.fds, s.wake, bufs, ctrlLen)
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

// readPace is the least time between two reads of a capture that keeps up:
// frames wait in the socket's buffer meanwhile and come in one batch, and
// no reader waits on the socket, so a frame wakes no one. The capture needs
// no haste (what it sees is counted and reported, not answered), and a
// capture woken for every few frames cost the answers' readers the CPU: at
// 20,000 requests/s for a held address, the median reply took half as long
// again. An idle capture waits in poll(2) as long as it takes, and one
// that falls behind (a full batch) reads on at once.
const readPace = 5 * time.Millisecond

func (s *packetSource) fill() error {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if s.got < liveBatch { // a full batch is a capture behind: it reads on
		if d := readPace - time.Since(s.lastFill); d > 0 {
			if err := s.rd.Pause(d); err != nil && !errors.Is(err, batchio.ErrWoken) {
				return err
			}
		}
	}
	s.lastFill = time.Now()
	s.got, s.next = 0, 0
	for {
		if err := s.stopped(); err != nil {
			return err
		}
		// Each socket in turn, so that a busy one does not starve the
		// other, or a wait in poll(2) until interrupt or Close.
		n, err := s.rd.Read()
		if errors.Is(err, batchio.ErrWoken) {
			continue // stopped says why
		}
		if err != nil {
			// ENETDOWN or ENODEV: the interface went down or away.
			return err
		}
		s.got = n
		return nil
	}
}

// stopped returns io.EOF once the source is closed, and
// os.ErrDeadlineExceeded while it is interrupted.
func (s *packetSource) stopped() error {
	switch {
	case s.closed.Load():
		return io.EOF
	case s.interrupted.Load():
		return os.ErrDeadlineExceeded
	}
	return nil
}

// frame returns the i-th frame of the batch, with its VLAN tag put back.
func (s *packetSource) frame(i int) ([]byte, time.Time, error) {
	return s.restore(i, len(s.rd.Frame(i)), s.rd.Control(i))
}

// restore returns the n bytes of the i-th frame of the batch with the
// arrival time its control messages ctrl give, and the VLAN tag they give
// put back in the frame.
func (s *packetSource) restore(i, n int, ctrl []byte) ([]byte, time.Time, error) {
	start := i*s.frameStart + vlanLen
	b := s.bufs[start : start+n]
	var ts time.Time
	tagged, tpid, tci := false, uint16(0), uint16(0)
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

// scope attaches the base filter, narrowed to the frames about sc's
// addresses unless all, behind wire.InboundOnly.
func (s *packetSource) scope(sc Scope, all bool) error {
	next := s.base
	if !all {
		var err error
		if next, err = scopeProgram(sc, s.base); err != nil {
			return err
		}
	}
	next = wire.InboundOnly(next)
	if s.ifindex != 0 {
		next = wire.OwnFramesOnly(uint32(s.ifindex), next)
	}
	raw, err := bpf.Assemble(next)
	if err != nil {
		return err
	}
	if len(raw) > maxKernelInsns {
		return fmt.Errorf("the filter for %d addresses is %d instructions, more than the kernel's %d", len(sc.Addrs)+len(sc.Claims), len(raw), maxKernelInsns)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	for _, fd := range s.fds {
		if err := attach(fd, raw); err != nil {
			return err
		}
	}
	return nil
}

// interrupt ends a wait under way, and makes every later read return at
// once, until resume.
func (s *packetSource) interrupt() {
	s.interrupted.Store(true)
	batchio.Poke(s.wake)
}

func (s *packetSource) resume() {
	s.interrupted.Store(false)
	batchio.Drain(s.wake) // what interrupt poked
}

func (s *packetSource) Dropped() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return s.dropped, nil
	}
	return s.droppedLocked()
}

func (s *packetSource) droppedLocked() (uint64, error) {
	for _, fd := range s.fds {
		st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err != nil {
			return 0, os.NewSyscallError("getsockopt", err)
		}
		s.dropped += uint64(st.Drops)
	}
	return s.dropped, nil
}

// Close ends a read waiting in poll(2) and closes the socket once the
// reader has let go of it.
func (s *packetSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	// Keep the last count, so that Stats after Close still has it.
	_, _ = s.droppedLocked()
	s.closed.Store(true)
	batchio.Poke(s.wake)
	s.readMu.Lock()
	defer s.readMu.Unlock()
	unix.Close(s.wake)
	// Together: each socket's close waits for a grace period of the
	// kernel's (batchio.CloseAll).
	closes := make([]func() error, len(s.fds))
	for i, fd := range s.fds {
		closes[i] = func() error { return os.NewSyscallError("close", unix.Close(fd)) }
	}
	return batchio.CloseAll(closes...)
}
