package announce

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/packet"
)

// waitTimeout bounds every wait on a Link's goroutines. A test that hits it
// has found a hang, not a slow machine.
const waitTimeout = 5 * time.Second

// errFakeWrite is what a fakeConn told to fail returns from WriteTo.
var errFakeWrite = errors.New("fake write failure")

// fakeConn is an in-memory FrameConn. ReadFrom blocks until a test hands it
// a frame or the conn is closed; WriteTo records each frame with its
// destination.
//
// Frames go to the reader over an unbuffered channel, so a send completes
// only once the reader is back in ReadFrom, that is, once it has handled
// every earlier frame. sync uses that to wait for the reader without
// sleeping.
type fakeConn struct {
	in         chan fakeRead
	out        chan sentFrame
	done       chan struct{}
	closeOnce  sync.Once
	closes     atomic.Int32
	failWrites atomic.Bool
	// downWrites is how many writes fail with ENETDOWN next, as a packet
	// socket's pending error after its link went down.
	downWrites atomic.Int32
}

type fakeRead struct {
	frame   []byte
	barrier bool // not a frame: only proves the reader is back in ReadFrom
}

// sentFrame is one frame a Link wrote.
type sentFrame struct {
	frame []byte
	to    net.HardwareAddr
}

func newFakeConn() *fakeConn {
	return &fakeConn{
		in:   make(chan fakeRead),
		out:  make(chan sentFrame, 64),
		done: make(chan struct{}),
	}
}

func (c *fakeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		select {
		case r := <-c.in:
			if r.barrier {
				continue
			}
			var from net.HardwareAddr
			if len(r.frame) >= 12 {
				from = append(from, r.frame[6:12]...)
			}
			return copy(b, r.frame), &packet.Addr{HardwareAddr: from}, nil
		case <-c.done:
			return 0, nil, net.ErrClosed
		}
	}
}

func (c *fakeConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	select {
	case <-c.done:
		return 0, net.ErrClosed
	default:
	}
	if c.failWrites.Load() {
		return 0, errFakeWrite
	}
	if c.downWrites.Add(-1) >= 0 {
		return 0, syscall.ENETDOWN
	}
	c.downWrites.Store(0)
	pa, ok := addr.(*packet.Addr)
	if !ok {
		return 0, errors.New("fake conn: destination is not a *packet.Addr")
	}
	f := sentFrame{frame: append([]byte(nil), b...), to: append(net.HardwareAddr(nil), pa.HardwareAddr...)}
	select {
	case c.out <- f:
		return len(b), nil
	default:
		return 0, errors.New("fake conn: too many frames written and not collected")
	}
}

func (c *fakeConn) Close() error {
	c.closes.Add(1)
	c.closeOnce.Do(func() { close(c.done) })
	return nil
}

func (c *fakeConn) put(t *testing.T, r fakeRead) {
	t.Helper()
	select {
	case c.in <- r:
	case <-c.done:
		t.Fatalf("conn closed before the reader took the frame")
	case <-time.After(waitTimeout):
		t.Fatalf("reader did not take a frame within %v", waitTimeout)
	}
}

// deliver hands frame to the reader and returns once the reader has handled
// it, so that whatever it wrote in answer is in c.out.
func (c *fakeConn) deliver(t *testing.T, frame []byte) {
	t.Helper()
	c.put(t, fakeRead{frame: frame})
	c.sync(t)
}

// sync returns once the reader has handled every frame delivered so far.
func (c *fakeConn) sync(t *testing.T) {
	t.Helper()
	c.put(t, fakeRead{barrier: true})
}

// sent returns the frames written since the last call.
func (c *fakeConn) sent() []sentFrame {
	var out []sentFrame
	for {
		select {
		case f := <-c.out:
			out = append(out, f)
		default:
			return out
		}
	}
}

// fakeJoiner is a GroupJoiner that records joins and leaves.
type fakeJoiner struct {
	mu      sync.Mutex
	joins   []netip.Addr
	leaves  []netip.Addr
	closes  int
	joinErr error
	// refuse, when valid, is the one group JoinGroup fails for.
	refuse netip.Addr
}

var errRefused = errors.New("fake joiner refuses the group")

func (j *fakeJoiner) JoinGroup(g netip.Addr) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.joinErr != nil {
		return j.joinErr
	}
	if j.refuse.IsValid() && g == j.refuse {
		return errRefused
	}
	j.joins = append(j.joins, g)
	return nil
}

func (j *fakeJoiner) LeaveGroup(g netip.Addr) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.leaves = append(j.leaves, g)
	return nil
}

func (j *fakeJoiner) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closes++
	return nil
}

// calls returns copies of the joins and leaves so far and the Close count.
func (j *fakeJoiner) calls() (joins, leaves []netip.Addr, closes int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]netip.Addr(nil), j.joins...), append([]netip.Addr(nil), j.leaves...), j.closes
}

// fakeGroups is a LinkConfig.Groups opener that counts its calls.
type fakeGroups struct {
	joiner *fakeJoiner
	opens  atomic.Int32
	mu     sync.Mutex
	err    error
}

func (g *fakeGroups) open() (GroupJoiner, error) {
	g.opens.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return nil, g.err
	}
	return g.joiner, nil
}

func (g *fakeGroups) setErr(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.err = err
}
