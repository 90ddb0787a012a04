package announce

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/batchio"
	"github.com/vipctl/vip/internal/wire"
)

// socketResponder answers ARP requests and neighbor solicitations for the
// addresses it holds on one interface: a reader per packet socket, behind a
// kernel filter narrowed to the held targets, replies built in place (see
// answer.go). It is the Responder of a Link, the part an in-kernel
// responder can take the place of; it owns the two sockets and closes them.
type socketResponder struct {
	ifname string
	// ifindex is the interface's, which the kernel filters check each
	// frame against (wire.OwnFramesOnly).
	ifindex int
	mac     net.HardwareAddr
	// me is mac for the codec, converted once; hasMAC is false for an
	// interface without an Ethernet address, which answers nothing.
	me     wire.MAC
	hasMAC bool
	arpc   FrameConn
	ip6c   FrameConn
	log    *slog.Logger

	held   atomic.Pointer[map[netip.Addr]*held]
	mu     sync.Mutex // serialises Hold, LetGo and Close
	closed atomic.Bool
	wg     sync.WaitGroup
	// done is closed by Close, to end the readers' back-off waits.
	done chan struct{}
	// wake is an eventfd Close writes to end the readers' waits in poll
	// (pollIO); -1 if there is none (they then wait in the runtime's
	// poller, and closing the sockets ends the wait).
	wake int

	// dl is the guarded agent's answer deadline, checked immediately
	// before each write (nil: unguarded): a request read after it, such
	// as one queued in the socket while the process was frozen, is
	// dropped, not answered.
	dl atomic.Pointer[Deadline]

	arpRequests, solicitations, answered, malformed, sendErrors, readErrors atomic.Uint64
}

var _ Responder = (*socketResponder)(nil)

type held struct {
	answered atomic.Uint64
}

func newSocketResponder(ifname string, ifindex int, mac net.HardwareAddr, arpc, ip6c FrameConn, log *slog.Logger) *socketResponder {
	r := &socketResponder{
		ifname: ifname, ifindex: ifindex, mac: mac, arpc: arpc, ip6c: ip6c, log: log,
		done: make(chan struct{}), wake: -1,
	}
	r.me, r.hasMAC = wire.MACOf(mac)
	if fd, err := batchio.NewWake(); err == nil {
		r.wake = fd
	}
	empty := map[netip.Addr]*held{}
	r.held.Store(&empty)
	r.wg.Add(2)
	go r.readLoop(r.arpc, r.answerARP)
	go r.readLoop(r.ip6c, r.answerNS)
	return r
}

// Hold starts answering for addrs. Which addresses the kernel answers for
// itself is the engine's to know: it holds only the others here.
func (r *socketResponder) Hold(addrs ...netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return net.ErrClosed
	}
	cur := *r.held.Load()
	next := make(map[netip.Addr]*held, len(cur)+len(addrs))
	for k, v := range cur {
		next[k] = v
	}
	for _, a := range addrs {
		if _, ok := next[a]; !ok {
			next[a] = &held{}
		}
	}
	r.held.Store(&next)
	r.narrowLocked(next)
	return nil
}

// LetGo stops answering for addrs. Letting go of an address not held is a no-op.
func (r *socketResponder) LetGo(addrs ...netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := *r.held.Load()
	next := make(map[netip.Addr]*held, len(cur))
	for k, v := range cur {
		next[k] = v
	}
	for _, a := range addrs {
		delete(next, a)
	}
	r.held.Store(&next)
	r.narrowLocked(next)
	return nil
}

func (r *socketResponder) narrowLocked(held map[netip.Addr]*held) {
	if err := r.setFiltersLocked(held); err != nil {
		r.log.Warn("cannot narrow the kernel filter to the held addresses: every request wakes vip", "err", err)
	}
}

// Kind returns KindSocket.
func (r *socketResponder) Kind() string { return KindSocket }

// Hook returns "": the socket readers run in vip, on no hook.
func (r *socketResponder) Hook() string { return "" }

// Answered returns how many requests for addr were answered while held.
func (r *socketResponder) Answered(addr netip.Addr) uint64 {
	if h, ok := (*r.held.Load())[addr]; ok {
		return h.answered.Load()
	}
	return 0
}

func (r *socketResponder) stats() LinkStats {
	return LinkStats{
		ARPRequests:   r.arpRequests.Load(),
		Solicitations: r.solicitations.Load(),
		Answered:      r.answered.Load(),
		Malformed:     r.malformed.Load(),
		SendErrors:    r.sendErrors.Load(),
		ReadErrors:    r.readErrors.Load(),
	}
}

// Close stops answering, closes the sockets and waits for the readers.
func (r *socketResponder) Close() error {
	r.mu.Lock()
	if r.closed.Swap(true) {
		r.mu.Unlock()
		return nil
	}
	empty := map[netip.Addr]*held{}
	r.held.Store(&empty)
	close(r.done)
	r.mu.Unlock()
	if r.wake >= 0 {
		batchio.Poke(r.wake)
	}
	err := batchio.CloseAll(r.arpc.Close, r.ip6c.Close)
	r.wg.Wait()
	if r.wake >= 0 {
		unix.Close(r.wake)
	}
	return err
}

func (r *socketResponder) readLoop(c FrameConn, answer func(*answerer, []byte)) {
	defer r.wg.Done()
	a := &answerer{}
	var buf []byte
	if p := pollIOFor(c, r.wake); p != nil {
		defer p.close()
		a.batch, a.pending = p, make([]*held, 0, batchSize)
	} else {
		a.io, buf = ioFor(c), make([]byte, 1<<16)
	}
	for {
		var n int
		var err error
		if a.batch != nil {
			n, err = a.batch.ReadBatch()
		} else {
			n, err = a.io.Read(buf)
		}
		if err != nil {
			if r.closed.Load() || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			r.readErrors.Add(1)
			if errors.Is(err, syscall.ENETDOWN) {
				// The kernel reports a link going down once on each
				// packet socket, then delivers again when it comes up.
				continue
			}
			r.log.Warn("read failed: retrying", "err", err)
			select {
			case <-time.After(100 * time.Millisecond): // no busy loop on a broken socket
			case <-r.done:
				return
			}
			continue
		}
		if a.batch == nil {
			answer(a, buf[:n])
			continue
		}
		for i := range n {
			answer(a, a.batch.Frame(i))
		}
		r.flush(a)
	}
}

func (r *socketResponder) lookup(addr netip.Addr) *held {
	return (*r.held.Load())[addr]
}
