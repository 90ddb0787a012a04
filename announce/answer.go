package announce

import (
	"errors"
	"net"
	"net/netip"
	"syscall"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/batchio"
	"github.com/vipctl/vip/internal/wire"
)

// The answer path reads a request, looks its target up and writes the reply
// from one goroutine per socket, without allocating: frames are parsed in
// place, replies are built in a buffer the goroutine owns, and the socket is
// read and written through its raw file descriptor with callbacks made once.

// naFrameLen is the longest reply the answer path builds: an
// advertisement with its target link-layer option.
const naFrameLen = wire.NDLenWithLinkLayer

// frameIO reads and writes whole frames on one socket for one goroutine.
type frameIO interface {
	Read(b []byte) (int, error)
	Write(frame []byte, dst net.HardwareAddr) error
}

// rawIO is a frameIO on a packet socket's file descriptor, through the
// runtime's poller. Its callbacks are bound once, so no call allocates.
type rawIO struct {
	rc      syscall.RawConn
	buf     []byte
	n       int
	err     error
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool
}

func newRawIO(rc syscall.RawConn) *rawIO {
	r := &rawIO{rc: rc}
	r.readFn = r.doRead
	r.writeFn = r.doWrite
	return r
}

func (r *rawIO) doRead(fd uintptr) bool {
	r.n, r.err = unix.Read(int(fd), r.buf)
	return r.err != unix.EAGAIN
}

func (r *rawIO) doWrite(fd uintptr) bool {
	// The socket is bound to its interface, and the frame carries its
	// destination: write needs no address.
	_, r.err = unix.Write(int(fd), r.buf)
	return r.err != unix.EAGAIN
}

func (r *rawIO) Read(b []byte) (int, error) {
	r.buf = b
	for {
		if err := r.rc.Read(r.readFn); err != nil {
			return 0, err
		}
		if r.err != unix.EINTR {
			return r.n, r.err
		}
	}
}

func (r *rawIO) Write(frame []byte, _ net.HardwareAddr) error {
	r.buf = frame
	for {
		if err := r.rc.Write(r.writeFn); err != nil {
			return err
		}
		if r.err != unix.EINTR {
			return r.err
		}
	}
}

// pollIO reads frames, and writes the replies, in batches (batchio) on a
// descriptor of its own, a duplicate of a packet socket's, waiting for
// them in poll(2) instead of in the runtime's poller: a frame then wakes
// the reader's thread itself, not a poller thread that hands the goroutine
// on. It saves a hand-over and its wake-ups on every frame that finds the
// reader idle, which is most of a reply's latency at moderate rates. The
// Link's wake, poked by Close, ends every wait.
type pollIO struct {
	fd int
	rx *batchio.Reader
	tx *batchio.Writer
	// Under load one system call carries up to batchSize frames.
	rxBuf [batchSize][batchFrameCap]byte
	txBuf [batchSize][naFrameLen]byte
}

// batchSize is how many frames one read takes at most; batchFrameCap the
// room for each (the requests answered are far shorter; a longer frame is
// cut, and fails to parse).
const (
	batchSize     = 32
	batchFrameCap = 2048
)

// newPollIO duplicates rc's descriptor for a pollIO.
func newPollIO(rc syscall.RawConn, wake int) (*pollIO, error) {
	var dup int
	var derr error
	if err := rc.Control(func(fd uintptr) { dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	// The duplicate shares the socket, its filter and its non-blocking
	// mode: reads return EAGAIN, and the reader polls.
	p := &pollIO{fd: dup}
	rx, tx := make([][]byte, batchSize), make([][]byte, batchSize)
	for i := range batchSize {
		rx[i], tx[i] = p.rxBuf[i][:], p.txBuf[i][:]
	}
	p.rx = batchio.NewReader([]int{dup}, wake, rx, 0)
	p.tx = batchio.NewWriter(dup, tx)
	return p, nil
}

// ReadBatch waits for frames and takes up to batchSize of them at once;
// Frame returns each. Once the wake is poked it returns net.ErrClosed.
func (p *pollIO) ReadBatch() (int, error) {
	n, err := p.rx.Read()
	if errors.Is(err, batchio.ErrWoken) {
		return 0, net.ErrClosed // only Close pokes it
	}
	return n, err
}

// Frame returns the i-th frame of the last ReadBatch.
func (p *pollIO) Frame(i int) []byte { return p.rx.Frame(i) }

// Slot is the buffer for the next reply of a batch; Queue(n) takes its
// first n bytes as one; Flush sends the queued replies and says how many
// went out.
func (p *pollIO) Slot() []byte { return p.tx.Slot() }

func (p *pollIO) Queue(n int) { p.tx.Queue(n) }

// Discard drops the queued replies unsent.
func (p *pollIO) Discard() { p.tx.Discard() }

func (p *pollIO) Flush() (int, error) { return p.tx.Flush() }

func (p *pollIO) close() { unix.Close(p.fd) }

// connIO is a frameIO on any FrameConn (tests use in-memory ones).
type connIO struct{ c FrameConn }

func (c connIO) Read(b []byte) (int, error) {
	n, _, err := c.c.ReadFrom(b)
	return n, err
}

func (c connIO) Write(frame []byte, dst net.HardwareAddr) error {
	_, err := c.c.WriteTo(frame, &packet.Addr{HardwareAddr: dst})
	return err
}

// rawConnOf returns c's raw connection, if it has one.
func rawConnOf(c FrameConn) (syscall.RawConn, bool) {
	sc, ok := c.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	return rc, err == nil
}

// ioFor returns the fastest frameIO the conn allows: its raw descriptor
// through the runtime's poller, or the conn itself.
func ioFor(c FrameConn) frameIO {
	if rc, ok := rawConnOf(c); ok {
		return newRawIO(rc)
	}
	return connIO{c}
}

// pollIOFor returns a batch reader on a duplicate of c's descriptor, or nil
// when c has none or the Link no eventfd (wake < 0) to end its waits.
func pollIOFor(c FrameConn, wake int) *pollIO {
	rc, ok := rawConnOf(c)
	if !ok || wake < 0 {
		return nil
	}
	p, err := newPollIO(rc, wake)
	if err != nil {
		return nil
	}
	return p
}

// answerer is one reader goroutine's state: its socket and reply buffer.
type answerer struct {
	io  frameIO
	out [naFrameLen]byte
	// batch, when the socket reads and writes in batches, queues the
	// replies, and pending holds what each answers until they are sent.
	batch   *pollIO
	pending []*held
}

// buf is where the next reply is built.
func (a *answerer) buf() []byte {
	if a.batch != nil {
		return a.batch.Slot()
	}
	return a.out[:]
}

// flush sends the batch's replies and counts them.
func (r *socketResponder) flush(a *answerer) {
	if len(a.pending) == 0 {
		return
	}
	if dl := r.dl.Load(); !dl.Open() {
		dl.withhold(len(a.pending))
		a.batch.Discard()
		clear(a.pending)
		a.pending = a.pending[:0]
		return
	}
	sent, err := a.batch.Flush()
	for _, h := range a.pending[:sent] {
		h.answered.Add(1)
	}
	r.answered.Add(uint64(sent))
	if err != nil {
		if r.sendErrors.Add(uint64(len(a.pending)-sent)) == uint64(len(a.pending)-sent) {
			r.log.Warn("sending an answer failed", "err", err)
		}
	}
	clear(a.pending)
	a.pending = a.pending[:0]
}

func (r *socketResponder) reply(a *answerer, frame []byte, dst net.HardwareAddr, h *held) {
	if a.batch != nil {
		a.batch.Queue(len(frame))
		a.pending = append(a.pending, h)
		return
	}
	if dl := r.dl.Load(); !dl.Open() {
		dl.withhold(1)
		return
	}
	if err := a.io.Write(frame, dst); err != nil {
		if r.sendErrors.Add(1) == 1 {
			r.log.Warn("sending an answer failed", "err", err)
		}
		return
	}
	h.answered.Add(1)
	r.answered.Add(1)
}

// answerARP answers an ARP request for a held address. The ARP socket
// reads nothing but ARP, so whatever the codec refuses is malformed.
func (r *socketResponder) answerARP(a *answerer, b []byte) {
	f, err := wire.Parse(b, wire.Answer)
	if err != nil || f.EtherType != wire.EtherTypeARP {
		r.malformed.Add(1)
		return
	}
	if f.ARP.Op != wire.OpRequest {
		return // replies are not ours to answer
	}
	r.arpRequests.Add(1)
	me := r.me
	if !r.hasMAC || f.ARP.SenderMAC == me || f.EthSrc == me {
		return // our own announcement
	}
	if f.ARP.SenderIP == f.ARP.TargetIP {
		// Another node's announcement of the address (a gratuitous
		// ARP request): a competing claim, not a question. It is left
		// to competing-claimer detection and the claim's conflict
		// policy (defend re-arms the gratuitous window, which tells
		// every neighbour; warn and yield must not contest it), and
		// the in-kernel responder passes it on unanswered for the
		// capture to see.
		return
	}
	h := r.lookup(f.ARP.TargetIP)
	if h == nil {
		return
	}
	dst := f.ARP.SenderMAC
	if !usableUnicast(dst[:]) {
		dst = f.EthSrc
	}
	// A probe (sender IP 0.0.0.0) gets the same reply: RFC 5227 probers
	// learn the address is taken from any packet with it as sender IP.
	// The reply is the request turned round, in place.
	p := &f.ARP
	p.Op = wire.OpReply
	p.SenderMAC, p.TargetMAC = me, p.SenderMAC
	p.SenderIP, p.TargetIP = p.TargetIP, p.SenderIP
	out := a.buf()
	out = out[:wire.PutARP(out, dst, me, p)]
	// The socket address is the frame's own destination: a slice of a
	// local would escape through the interface, and allocate.
	r.reply(a, out, net.HardwareAddr(out[0:6:6]), h)
}

// answerNS answers a neighbor solicitation for a held address. The codec
// checks what RFC 4861 section 7.1.1 asks of a receiver; other ICMPv6 or
// IPv6 traffic a loose filter lets in is not malformed, only not ours.
func (r *socketResponder) answerNS(a *answerer, b []byte) {
	f, err := wire.Parse(b, wire.Answer)
	if errors.Is(err, wire.ErrNotNeighbor) {
		return
	}
	if err != nil {
		r.malformed.Add(1)
		return
	}
	ns := &f.ND
	if f.EtherType != wire.EtherTypeIPv6 || ns.Type != wire.TypeNeighborSolicitation {
		return
	}
	r.solicitations.Add(1)
	me := r.me
	if !r.hasMAC || f.EthSrc == me {
		return
	}
	h := r.lookup(ns.Target)
	if h == nil {
		return
	}
	// Only a solicitation to the target's own group, or straight to the
	// target (NUD), asks about it.
	if ns.Dst != ns.Target && ns.Dst != wire.SolicitedNode(ns.Target) {
		return
	}
	var (
		dstMAC    wire.MAC
		dstIP     netip.Addr
		solicited bool
	)
	if ns.IsDAD() {
		// Defend the address: tell everyone, as the prober cannot be
		// reached by unicast.
		dstMAC, dstIP = allNodesMAC, wire.AllNodes
	} else {
		dstIP, solicited = ns.Src, true
		dstMAC = ns.LinkLayer
		if !ns.HasLinkLayer || !usableUnicast(dstMAC[:]) {
			dstMAC = f.EthSrc
		}
	}
	na := wire.Advertisement(me, ns.Target, dstIP, solicited)
	out := a.buf()
	out = out[:wire.PutND(out, dstMAC, me, &na)]
	r.reply(a, out, net.HardwareAddr(out[0:6:6]), h)
}

// allNodesMAC is where an advertisement to ff02::1 goes.
var allNodesMAC = wire.GroupMAC(wire.AllNodes)
