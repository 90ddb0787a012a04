//go:build cgo && linux

package sniff

/*
#cgo LDFLAGS: -lpcap
#include <pcap.h>

static int vip_pcap_fd(void *p) { return pcap_get_selectable_fd((pcap_t *)p); }

static int vip_pcap_nano(void *p) {
	return pcap_get_tstamp_precision((pcap_t *)p) == PCAP_TSTAMP_PRECISION_NANO;
}

struct vip_frame {
	const u_char *data;
	unsigned int caplen;
	long sec, frac;
	int rc;
};

// vip_pcap_next is one pcap_next_ex on a handle in non-blocking mode, with
// what it returns in a struct, so that no Go pointer is passed.
static struct vip_frame vip_pcap_next(void *p) {
	struct pcap_pkthdr *h;
	const u_char *d;
	struct vip_frame f = {0};
	f.rc = pcap_next_ex((pcap_t *)p, &h, &d);
	if (f.rc == 1) {
		f.data = d;
		f.caplen = h->caplen;
		f.sec = h->ts.tv_sec;
		f.frac = h->ts.tv_usec;
	}
	return f;
}

static const char *vip_pcap_err(void *p) { return pcap_geterr((pcap_t *)p); }
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/google/gopacket/pcap"
	"golang.org/x/sys/unix"
)

// pollReader reads a live libpcap capture without ever waiting inside C.
//
// gopacket waits for frames in C, in poll(2) with the capture's timeout.
// While a goroutine sits in a C call, the runtime's monitor thread keeps
// waking (every 20 µs at first, for up to 10 ms per call), so an idle
// capture cost half a percent of a core. Here the handle stays in
// non-blocking mode: frames are taken with pcap_next_ex, which returns at
// once, and the reader waits for more on a duplicate of the handle's
// descriptor in the Go runtime's poller, which costs nothing while nothing
// comes. The kernel still hands frames over a block at a time (the
// capture's timeout bounds how late).
type pollReader struct {
	p    unsafe.Pointer // the handle's pcap_t
	nano bool           // timestamps in nanoseconds, not microseconds
	f    *os.File       // the duplicate descriptor, in the poller
	rc   syscall.RawConn
	// waited is set by wait's callback on its second call: readiness.
	waited bool
	waitFn func(uintptr) bool
}

// newPollReader returns a reader for h, or an error saying why there is
// none (the capture then reads through gopacket, waiting in C).
//
// gopacket does not export the handle's pcap_t; it is read here from its
// unexported field (cptr in gopacket v1.1.19). TestPollReader fails when an
// upgrade of gopacket takes it away.
func newPollReader(h *pcap.Handle) (*pollReader, error) {
	v := reflect.ValueOf(h).Elem().FieldByName("cptr")
	if !v.IsValid() || v.Kind() != reflect.Pointer || v.IsNil() {
		return nil, errors.New("gopacket's pcap.Handle has no cptr field")
	}
	p := v.UnsafePointer()
	fd := int(C.vip_pcap_fd(p))
	if fd < 0 {
		return nil, errors.New("libpcap gives no selectable descriptor for this capture")
	}
	// What this host sends is no competing claim and no traffic to count:
	// libpcap would copy it out of the kernel and drop it in user space
	// (its direction filter); the kernel can leave it out (Linux 4.20+;
	// older kernels refuse the option, and libpcap still drops it).
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate the capture's descriptor: %w", err)
	}
	// The descriptors share one open file, which gopacket already made
	// non-blocking (a capture with a timeout); os.NewFile puts a
	// non-blocking descriptor in the poller.
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, fmt.Errorf("capture descriptor: %w", err)
	}
	r := &pollReader{p: p, nano: C.vip_pcap_nano(p) != 0, f: os.NewFile(uintptr(dup), "pcap")}
	if r.rc, err = r.f.SyscallConn(); err != nil {
		r.f.Close()
		return nil, err
	}
	r.waitFn = func(uintptr) bool {
		done := r.waited
		r.waited = true
		return done
	}
	return r, nil
}

// next returns the next frame, in libpcap's buffer, and its time; or no
// frame and no error when none is there now.
func (r *pollReader) next() ([]byte, time.Time, error) {
	f := C.vip_pcap_next(r.p)
	switch f.rc {
	case 1:
		frac := int64(f.frac)
		if !r.nano {
			frac *= 1000
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(f.data)), int(f.caplen)), time.Unix(int64(f.sec), frac), nil
	case 0:
		return nil, time.Time{}, nil
	case -2:
		return nil, time.Time{}, io.EOF
	default:
		return nil, time.Time{}, errors.New(C.GoString(C.vip_pcap_err(r.p)))
	}
}

// wait waits until the kernel has frames for the capture; or until
// interrupted is set and interrupt called (then an error wrapping
// os.ErrDeadlineExceeded); or until close (then os.ErrClosed).
func (r *pollReader) wait(interrupted *atomic.Bool) error {
	if err := r.f.SetReadDeadline(time.Time{}); err != nil {
		// It fails only once the descriptor is closed.
		return fmt.Errorf("%w: %v", os.ErrClosed, err)
	}
	// After clearing the deadline: an interrupt before it set one that
	// was just cleared, and is seen here; one after it sets a deadline in
	// the past, which ends the wait below.
	if interrupted.Load() {
		return os.ErrDeadlineExceeded
	}
	r.waited = false
	err := r.rc.Read(r.waitFn)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		// The poller fails a wait only for a deadline or a close.
		return fmt.Errorf("%w: %v", os.ErrClosed, err)
	}
	return err
}

// interrupt ends a wait under way (see wait).
func (r *pollReader) interrupt() { _ = r.f.SetReadDeadline(time.Unix(1, 0)) }

// close wakes a wait and releases the duplicate; the handle is gopacket's
// to close.
func (r *pollReader) close() { r.f.Close() }
