//go:build linux

package batchio

import (
	"encoding/binary"
	"errors"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrWoken is what a wait returns when its Wake was poked.
var ErrWoken = errors.New("the wait was ended through its wake descriptor")

// NewWake returns a Wake: an eventfd, non-blocking and closed on exec, that
// the caller owns and closes. Poke makes it readable, which ends every
// Reader's wait on it until Drain.
func NewWake() (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, os.NewSyscallError("eventfd", err)
	}
	return fd, nil
}

// Poke makes the Wake wake readable.
func Poke(wake int) {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	_, _ = unix.Write(wake, b[:])
}

// Drain makes the Wake wake unreadable again.
func Drain(wake int) {
	var b [8]byte
	_, _ = unix.Read(wake, b[:])
}

// Reader reads frames in batches from one or more sockets (see the package
// comment). One goroutine uses it at a time; it neither owns nor closes
// the descriptors.
type Reader struct {
	fds     []int
	msgs    []unix.Mmsghdr
	iovs    []unix.Iovec
	bufs    [][]byte
	ctrl    []byte
	ctrlLen int
	// polls are what a wait polls: the wake descriptor, then fds.
	polls []unix.PollFd
	// turn is the socket the next read tries first.
	turn int
}

// NewReader returns a Reader of the sockets fds whose waits end when wake
// is poked. A batch is len(bufs) frames, the i-th read into bufs[i] (a
// longer frame is cut); ctrlLen > 0 gives each frame that many bytes for
// its control messages (Control).
func NewReader(fds []int, wake int, bufs [][]byte, ctrlLen int) *Reader {
	r := &Reader{
		fds:     fds,
		msgs:    make([]unix.Mmsghdr, len(bufs)),
		iovs:    make([]unix.Iovec, len(bufs)),
		bufs:    bufs,
		ctrl:    make([]byte, len(bufs)*ctrlLen),
		ctrlLen: ctrlLen,
		polls:   []unix.PollFd{{Fd: int32(wake), Events: unix.POLLIN}},
	}
	for _, fd := range fds {
		r.polls = append(r.polls, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	for i := range r.msgs {
		r.iovs[i].Base = &bufs[i][0]
		r.iovs[i].SetLen(len(bufs[i]))
		r.msgs[i].Hdr.Iov = &r.iovs[i]
		r.msgs[i].Hdr.SetIovlen(1)
		if ctrlLen > 0 {
			r.msgs[i].Hdr.Control = &r.ctrl[i*ctrlLen]
		}
	}
	return r
}

// Read reads a batch: up to len(bufs) frames from the first socket that
// has any, trying them in turn from the one after the socket read last,
// so that a busy one does not starve the others. When none has any it
// waits in poll(2) until one has, or until the wake descriptor is poked:
// then it returns ErrWoken, before it reads again. Another error is
// recvmmsg's errno (ENETDOWN, say, when the interface goes down) or poll's.
func (r *Reader) Read() (int, error) {
	for {
		for range r.fds {
			fd := r.fds[r.turn%len(r.fds)]
			r.turn++
			n, errno := r.recv(fd)
			if errno == 0 {
				return n, nil
			}
			if errno != unix.EAGAIN {
				return 0, errno
			}
		}
		if err := r.wait(r.polls, -1); err != nil {
			return 0, err
		}
	}
}

func (r *Reader) recv(fd int) (int, unix.Errno) {
	if r.ctrlLen > 0 {
		for i := range r.msgs {
			r.msgs[i].Hdr.SetControllen(r.ctrlLen)
			r.msgs[i].Hdr.Flags = 0
		}
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(len(r.msgs)), unix.MSG_DONTWAIT, 0, 0)
		if errno != unix.EINTR {
			return int(n), errno
		}
	}
}

// Pause waits for d (rounded up to a millisecond), or until the wake
// descriptor is poked: then it returns ErrWoken.
func (r *Reader) Pause(d time.Duration) error {
	return r.wait(r.polls[:1], int((d+time.Millisecond-1)/time.Millisecond))
}

// wait polls polls, the wake descriptor first, for up to timeout
// milliseconds (negative: as long as it takes).
func (r *Reader) wait(polls []unix.PollFd, timeout int) error {
	if _, err := unix.Poll(polls, timeout); err != nil && err != unix.EINTR {
		return os.NewSyscallError("poll", err)
	}
	if polls[0].Revents != 0 {
		return ErrWoken
	}
	return nil
}

// Frame returns the i-th frame of the batch read last.
func (r *Reader) Frame(i int) []byte {
	return r.bufs[i][:min(int(r.msgs[i].Len), len(r.bufs[i]))]
}

// Control returns the control messages of the i-th frame of the batch
// read last.
func (r *Reader) Control(i int) []byte {
	c := r.ctrl[i*r.ctrlLen : (i+1)*r.ctrlLen]
	return c[:min(int(r.msgs[i].Hdr.Controllen), r.ctrlLen)]
}

// Writer sends frames on one socket in batches: Slot is the buffer of the
// next frame, Queue takes its first n bytes as one, Flush sends the queued
// frames. It neither owns nor closes the descriptor.
type Writer struct {
	fd   int
	msgs []unix.Mmsghdr
	iovs []unix.Iovec
	bufs [][]byte
	n    int // frames queued
}

// NewWriter returns a Writer on the socket fd of up to len(bufs) frames a
// batch, the i-th queued in bufs[i].
func NewWriter(fd int, bufs [][]byte) *Writer {
	w := &Writer{fd: fd, msgs: make([]unix.Mmsghdr, len(bufs)), iovs: make([]unix.Iovec, len(bufs)), bufs: bufs}
	for i := range w.msgs {
		w.iovs[i].Base = &bufs[i][0]
		w.msgs[i].Hdr.Iov = &w.iovs[i]
		w.msgs[i].Hdr.SetIovlen(1)
	}
	return w
}

// Slot is the buffer of the next frame queued.
func (w *Writer) Slot() []byte { return w.bufs[w.n] }

// Queue takes the first n bytes of Slot as a frame.
func (w *Writer) Queue(n int) {
	w.iovs[w.n].SetLen(n)
	w.n++
}

// Discard drops the queued frames unsent.
func (w *Writer) Discard() { w.n = 0 }

// Flush sends the queued frames and says how many went out; on an error
// the rest are dropped.
func (w *Writer) Flush() (int, error) {
	sent := 0
	for sent < w.n {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(w.fd), uintptr(unsafe.Pointer(&w.msgs[sent])), uintptr(w.n-sent), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			w.n = 0
			return sent, errno
		}
		sent += int(n)
	}
	w.n = 0
	return sent, nil
}
