package loadgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// htons converts a protocol number to network byte order, as packet
// sockets take it.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return *(*uint16)(unsafe.Pointer(&b[0]))
}

// pollTimeout is how long a blocked read waits before it looks whether it
// should stop: it bounds how long stopping takes.
const pollTimeout = 20 * time.Millisecond

// openSender opens a packet socket on ifindex that only sends. Bound with
// protocol 0 it receives nothing, and a write needs no address: frames go
// out of the bound interface as they are.
func openSender(ifindex int) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind packet socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	return fd, nil
}

// enableTxTimestamps asks the kernel for a software timestamp of every
// frame as the driver takes it (SND), handed back on the error queue with
// the frame. The receive buffer bounds that queue, so it is made large.
func enableTxTimestamps(fd int) error {
	flags := unix.SOF_TIMESTAMPING_TX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags); err != nil {
		return fmt.Errorf("SO_TIMESTAMPING: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
	return nil
}

// openReceiver opens a packet socket on ifindex for protocol proto that
// lets in only what prog accepts, with kernel receive timestamps, in
// promiscuous mode, with a large buffer and reads that give up after
// pollTimeout.
func openReceiver(ifindex int, proto uint16, prog []bpf.Instruction) (int, error) {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return -1, fmt.Errorf("assemble filter: %w", err)
	}
	// Protocol 0 until the filter is in place: a socket with a protocol
	// receives from every interface from the moment it exists.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open packet socket: %w", err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", what, err)
	}
	fprog := unix.SockFprog{Len: uint16(len(raw)), Filter: (*unix.SockFilter)(unsafe.Pointer(&raw[0]))}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
		return fail("attach filter", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20); err != nil {
		// Without CAP_NET_ADMIN, the largest buffer rmem_max allows.
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<20)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("SO_TIMESTAMPNS", err)
	}
	tv := unix.NsecToTimeval(pollTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail("SO_RCVTIMEO", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: ifindex}); err != nil {
		return fail("bind", err)
	}
	// Replies go to the sequence addresses, not to the interface's own.
	mreq := unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return fail("promiscuous mode", err)
	}
	// Reading the statistics resets them: start from zero.
	_, _ = unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	return fd, nil
}

// interfaceIn returns the index and MAC of ifname in the current thread's
// namespace.
func interfaceIn(ifname string) (int, net.HardwareAddr, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return 0, nil, err
	}
	if len(ifi.HardwareAddr) != 6 {
		return 0, nil, fmt.Errorf("interface %s has no Ethernet address", ifname)
	}
	return ifi.Index, ifi.HardwareAddr, nil
}

// batch is a recvmmsg batch: frames with their control messages.
type batch struct {
	msgs  []unix.Mmsghdr
	iovs  []unix.Iovec
	bufs  [][]byte
	oobs  [][]byte
	flags int
}

const (
	frameBuf = 256 // every frame read here is shorter
	oobBuf   = 256
)

func newBatch(n int, flags int) *batch {
	b := &batch{
		msgs:  make([]unix.Mmsghdr, n),
		iovs:  make([]unix.Iovec, n),
		bufs:  make([][]byte, n),
		oobs:  make([][]byte, n),
		flags: flags,
	}
	for i := range n {
		b.bufs[i] = make([]byte, frameBuf)
		b.oobs[i] = make([]byte, oobBuf)
		b.iovs[i].Base = &b.bufs[i][0]
		b.iovs[i].SetLen(frameBuf)
		b.msgs[i].Hdr.Iov = &b.iovs[i]
		b.msgs[i].Hdr.Iovlen = 1
		b.msgs[i].Hdr.Control = &b.oobs[i][0]
	}
	return b
}

// recv reads up to len(b.msgs) messages, waiting for the first. It returns
// how many it read; on a read timeout or an empty error queue, 0 and nil.
func (b *batch) recv(fd int) (int, error) {
	for i := range b.msgs {
		b.msgs[i].Hdr.SetControllen(oobBuf)
		b.msgs[i].Len = 0
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.msgs[0])),
			uintptr(len(b.msgs)), uintptr(b.flags), 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		}
		return 0, errno
	}
}

// frame returns message i's frame.
func (b *batch) frame(i int) []byte { return b.bufs[i][:b.msgs[i].Len] }

// rxTime returns message i's SO_TIMESTAMPNS receive timestamp in Unix
// nanoseconds, or 0 when it has none.
func (b *batch) rxTime(i int) int64 {
	ts, _ := b.cmsgTime(i, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS)
	return ts
}

// txTime returns message i's software transmit timestamp from the error
// queue in Unix nanoseconds, or 0 when it has none.
func (b *batch) txTime(i int) int64 {
	ts, _ := b.cmsgTime(i, unix.SOL_SOCKET, unix.SO_TIMESTAMPING)
	return ts
}

// cmsgTime finds the control message of level and type in message i and
// reads the timespec at its start (for SO_TIMESTAMPING, the first of three:
// the software one).
func (b *batch) cmsgTime(i int, level, typ int32) (int64, bool) {
	oob := b.oobs[i][:b.msgs[i].Hdr.Controllen]
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(oob) {
			return 0, false
		}
		data := oob[unix.CmsgLen(0):h.Len]
		if h.Level == level && h.Type == typ && len(data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&data[0]))
			if ns := ts.Nano(); ns != 0 {
				return ns, true
			}
			return 0, false
		}
		next := unix.CmsgSpace(int(h.Len) - unix.CmsgLen(0))
		if next > len(oob) {
			break
		}
		oob = oob[next:]
	}
	return 0, false
}

// errClosed reports whether err says the socket is gone.
func errClosed(err error) bool {
	return errors.Is(err, unix.EBADF) || errors.Is(err, net.ErrClosed)
}

// write sends frame on fd, retrying on EINTR; ENOBUFS is returned as is.
func write(fd int, frame []byte) error {
	for {
		_, err := unix.Write(fd, frame)
		if err != unix.EINTR {
			return err
		}
	}
}

// sleepPrecise sleeps d with nanosleep, on a thread whose timer slack the
// caller has lowered: time.Sleep wakes about a millisecond late, too coarse
// to pace 100,000 requests a second.
func sleepPrecise(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for {
		var rem unix.Timespec
		if err := unix.Nanosleep(&ts, &rem); err != unix.EINTR {
			return
		}
		ts = rem
	}
}
