package announce

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/wire"
)

// Responder answers who-has requests (ARP requests, neighbor solicitations)
// for the addresses it holds on one interface. The packet-socket Link is one
// implementation; an in-kernel XDP responder can be another.
type Responder interface {
	// Hold starts answering for addrs, all or none.
	Hold(addrs ...netip.Addr) error
	// Drop stops answering for addrs. Dropping an address not held is a
	// no-op.
	Drop(addrs ...netip.Addr) error
	// Answered returns how many requests for addr were answered while held.
	Answered(addr netip.Addr) uint64
	Close() error
}

// Announcer sends gratuitous advertisements on one interface.
type Announcer interface {
	// Announce sends one round for addr: the kinds in frames that fit its
	// family. It returns the number of frames sent.
	Announce(addr netip.Addr, frames Frames) (int, error)
}

// Prober sends probes that whoever else holds an address answers: an
// RFC 5227 ARP probe, or a duplicate-address-detection solicitation.
type Prober interface {
	Probe(addr netip.Addr) (int, error)
}

// A Port is one interface as the engine uses it: it answers, announces,
// probes, and says which interface it is.
type Port interface {
	Responder
	Announcer
	Prober
	Name() string
	Index() int
	MAC() net.HardwareAddr
}

// FrameConn is the part of a packet socket a Link uses. *packet.Conn
// satisfies it; tests use an in-memory one.
type FrameConn interface {
	ReadFrom(b []byte) (int, net.Addr, error)
	WriteTo(b []byte, addr net.Addr) (int, error)
	Close() error
}

// GroupJoiner joins and leaves IPv6 multicast groups on one interface.
// Joining through the IP stack (not just the NIC filter) also sends the MLD
// report that MLD-snooping switches need before they forward a group's
// traffic to us. *ndp.Conn satisfies it.
type GroupJoiner interface {
	JoinGroup(group netip.Addr) error
	LeaveGroup(group netip.Addr) error
	Close() error
}

// LinkConfig holds what a Link needs besides the interface.
type LinkConfig struct {
	// ARP and IPv6 are the packet sockets for ARP and for IPv6 frames.
	ARP, IPv6 FrameConn
	// Groups opens the group joiner the first time an IPv6 address is
	// held, so that an interface with IPv6 disabled can still hold IPv4.
	// Nil refuses IPv6 addresses.
	Groups func() (GroupJoiner, error)
	// Assigned returns the addresses the kernel has on this interface and
	// so answers for itself; the Link stays silent for those rather than
	// doubling every answer. It is read once a Hold. Nil means none.
	Assigned func() map[netip.Addr]bool
	Log      *slog.Logger
}

// LinkStats counts what a Link saw and did.
type LinkStats struct {
	ARPRequests   uint64 // ARP requests read
	Solicitations uint64 // neighbor solicitations read
	Answered      uint64 // replies and solicited advertisements sent
	Malformed     uint64 // frames that did not parse or failed validation
	SendErrors    uint64 // frames the socket refused
	ReadErrors    uint64 // failed reads (a link going down counts one)
}

// Link answers ARP requests and neighbor solicitations for the addresses it
// holds on one interface, and sends their gratuitous rounds, all through
// packet sockets. Reading whole frames lets it answer on an interface without
// an address of its own and see unicast solicitations the kernel drops.
type Link struct {
	ifi    *net.Interface
	mac    net.HardwareAddr
	arpc   FrameConn
	ip6c   FrameConn
	cfg    LinkConfig
	log    *slog.Logger
	held   atomic.Pointer[map[netip.Addr]*held]
	wg     sync.WaitGroup
	closed atomic.Bool

	mu        sync.Mutex // serialises Hold, Drop and Close
	joiners   []*joiner
	groupRefs map[netip.Addr]int
	groupAt   map[netip.Addr]*joiner
	// pending groups wait for the background joiner; meanwhile the
	// interface receives all multicast.
	pending    map[netip.Addr]bool
	joining    bool
	joinFailed bool
	allMulti   bool

	arpRequests, solicitations, answered, malformed, sendErrors, readErrors atomic.Uint64
	// done is closed by Close, to end the readers' back-off waits.
	done       chan struct{}
	gratuitous gratuitousSender
	// wake is an eventfd Close writes to end the readers' waits in poll
	// (pollIO); -1 if there is none (they then wait in the runtime's
	// poller, and closing the sockets ends the wait).
	wake int
}

type held struct {
	answered atomic.Uint64
	// silent is set when the kernel answers for the address itself.
	silent bool
}

// OpenLink opens packet sockets on ifi and starts answering for the
// addresses that are then held. It needs CAP_NET_RAW.
func OpenLink(ifi *net.Interface, log *slog.Logger) (*Link, error) {
	arpFilter, err := bpf.Assemble(arpRequestFilter())
	if err != nil {
		return nil, fmt.Errorf("assemble ARP filter: %w", err)
	}
	nsFilter, err := bpf.Assemble(solicitationFilter())
	if err != nil {
		return nil, fmt.Errorf("assemble solicitation filter: %w", err)
	}
	arpc, err := packet.Listen(ifi, packet.Raw, wire.EtherTypeARP, &packet.Config{Filter: arpFilter})
	if err != nil {
		return nil, fmt.Errorf("open ARP socket on %s: %w", ifi.Name, err)
	}
	pc6, err := packet.Listen(ifi, packet.Raw, wire.EtherTypeIPv6, &packet.Config{Filter: nsFilter})
	if err != nil {
		arpc.Close()
		return nil, fmt.Errorf("open IPv6 socket on %s: %w", ifi.Name, err)
	}
	ip6c := &allMultiConn{Conn: pc6, ifindex: ifi.Index}
	// Room for a burst of requests while the reader is busy: at 100,000
	// requests a second the default buffer fills within a millisecond.
	for _, c := range []*packet.Conn{arpc, pc6} {
		if err := setReceiveBuffer(c, receiveBuffer); err != nil {
			log.Debug("cannot enlarge the receive buffer", "interface", ifi.Name, "err", err)
		}
	}
	return NewLink(ifi, LinkConfig{
		ARP:  arpc,
		IPv6: ip6c,
		Groups: func() (GroupJoiner, error) {
			c, _, err := ndp.Listen(ifi, ndp.Unspecified)
			if err != nil {
				return nil, fmt.Errorf("open ICMPv6 socket on %s to join multicast groups: %w", ifi.Name, err)
			}
			// The socket is only for group membership: the packet socket
			// reads the solicitations, so let nothing queue here.
			var f ipv6.ICMPFilter
			f.SetAll(true)
			if err := c.SetICMPFilter(&f); err != nil {
				c.Close()
				return nil, fmt.Errorf("filter ICMPv6 socket on %s: %w", ifi.Name, err)
			}
			return c, nil
		},
		Assigned: func() map[netip.Addr]bool { return assigned(ifi) },
		Log:      log,
	}), nil
}

// assigned returns the addresses configured on ifi.
func assigned(ifi *net.Interface) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	addrs, err := ifi.Addrs()
	if err != nil {
		return out
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out[ip.Unmap()] = true
			}
		}
	}
	return out
}

// NewLink returns a Link on ifi that reads and writes through the conns in
// cfg, and starts its readers. Close stops them.
func NewLink(ifi *net.Interface, cfg LinkConfig) *Link {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	l := &Link{
		ifi:       ifi,
		mac:       ifi.HardwareAddr,
		arpc:      cfg.ARP,
		ip6c:      cfg.IPv6,
		cfg:       cfg,
		log:       cfg.Log.With("interface", ifi.Name),
		groupRefs: make(map[netip.Addr]int),
		groupAt:   make(map[netip.Addr]*joiner),
		pending:   make(map[netip.Addr]bool),
		done:      make(chan struct{}),
	}
	l.gratuitous.arp, l.gratuitous.ip6 = ioFor(cfg.ARP), ioFor(cfg.IPv6)
	l.wake = -1
	if fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err == nil {
		l.wake = fd
	}
	empty := map[netip.Addr]*held{}
	l.held.Store(&empty)
	l.wg.Add(2)
	go l.readLoop(l.arpc, l.answerARP)
	go l.readLoop(l.ip6c, l.answerNS)
	return l
}

// Name returns the interface name.
func (l *Link) Name() string { return l.ifi.Name }

// Index returns the interface index.
func (l *Link) Index() int { return l.ifi.Index }

// MAC returns the hardware address answers carry.
func (l *Link) MAC() net.HardwareAddr { return l.mac }

// Hold starts answering for addrs, all or none. For an IPv6 address it
// joins the address's solicited-node group first.
func (l *Link) Hold(addrs ...netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return net.ErrClosed
	}
	cur := *l.held.Load()
	var kernel map[netip.Addr]bool
	if l.cfg.Assigned != nil {
		kernel = l.cfg.Assigned()
	}
	next := make(map[netip.Addr]*held, len(cur)+len(addrs))
	for k, v := range cur {
		next[k] = v
	}
	var fresh []netip.Addr
	for _, a := range addrs {
		if _, ok := next[a]; ok {
			continue
		}
		h := &held{silent: kernel[a]}
		if h.silent {
			l.log.Info("address is assigned to the interface: the kernel answers for it, vip only announces it", "addr", a)
		}
		next[a] = h
		fresh = append(fresh, a)
	}
	if err := l.joinAllLocked(fresh); err != nil {
		return err
	}
	l.held.Store(&next)
	if err := l.setFiltersLocked(next); err != nil {
		l.log.Warn("cannot narrow the kernel filter to the held addresses: every request wakes vip", "err", err)
	}
	return nil
}

// syncJoins is the most new groups a Hold joins before it returns. Each
// join costs the kernel about 0.1 ms (and a report on the wire), so a larger
// batch turns on all-multicast reception at once, which lets every
// solicitation in, and joins its groups in the background.
const syncJoins = 64

// joinAllLocked joins the groups of the IPv6 addresses among addrs: all of
// them or, on error, none.
func (l *Link) joinAllLocked(addrs []netip.Addr) error {
	var newGroups []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		if !a.Is6() {
			continue
		}
		g, err := ndp.SolicitedNodeMulticast(a)
		if err != nil {
			return fmt.Errorf("solicited-node group of %s: %w", a, err)
		}
		if l.groupRefs[g] == 0 && !seen[g] {
			seen[g] = true
			newGroups = append(newGroups, g)
		}
	}
	async := len(newGroups) > syncJoins || len(l.pending) > 0
	if async {
		if err := l.setAllMultiLocked(true); err != nil {
			l.log.Warn("cannot receive all multicast: joining the groups before answering", "err", err)
			async = false
		}
	}
	var done []netip.Addr
	for _, a := range addrs {
		if !a.Is6() {
			continue
		}
		if err := l.joinLocked(a, async); err != nil {
			for _, j := range done {
				_ = l.leaveLocked(j)
			}
			return err
		}
		done = append(done, a)
	}
	if async {
		l.startJoinerLocked()
	}
	return nil
}

// Drop stops answering for addrs and leaves each group that no other held
// address shares.
func (l *Link) Drop(addrs ...netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := *l.held.Load()
	next := make(map[netip.Addr]*held, len(cur))
	for k, v := range cur {
		next[k] = v
	}
	var gone []netip.Addr
	for _, a := range addrs {
		if _, ok := next[a]; ok {
			delete(next, a)
			gone = append(gone, a)
		}
	}
	l.held.Store(&next)
	if err := l.setFiltersLocked(next); err != nil {
		l.log.Warn("cannot narrow the kernel filter to the held addresses: every request wakes vip", "err", err)
	}
	var errs []error
	for _, a := range gone {
		if a.Is6() {
			errs = append(errs, l.leaveLocked(a))
		}
	}
	return errors.Join(errs...)
}

// groupsPerSocket bounds the groups one ICMPv6 socket joins: the kernel
// charges each membership to the socket's option memory (net.core.optmem_max,
// 128 KiB here, room for about 2,000), so 10,000 IPv6 claims need several.
const groupsPerSocket = 1000

// joiner is one group socket and how many groups it has joined.
type joiner struct {
	GroupJoiner
	n int
}

func (l *Link) joinLocked(addr netip.Addr, async bool) error {
	g, err := ndp.SolicitedNodeMulticast(addr)
	if err != nil {
		return fmt.Errorf("solicited-node group of %s: %w", addr, err)
	}
	if l.groupRefs[g] > 0 {
		l.groupRefs[g]++
		return nil
	}
	if async {
		l.groupRefs[g] = 1
		l.pending[g] = true
		return nil
	}
	if err := l.joinGroupLocked(g); err != nil {
		return err
	}
	l.groupRefs[g] = 1
	return nil
}

// joinGroupLocked joins g on a socket with room for it.
func (l *Link) joinGroupLocked(g netip.Addr) error {
	var j *joiner
	for _, c := range l.joiners {
		if c.n < groupsPerSocket {
			j = c
			break
		}
	}
	if j == nil {
		if l.cfg.Groups == nil {
			return fmt.Errorf("join %s on %s: this link cannot join IPv6 multicast groups", g, l.ifi.Name)
		}
		gj, err := l.cfg.Groups()
		if err != nil {
			return err
		}
		j = &joiner{GroupJoiner: gj}
		l.joiners = append(l.joiners, j)
	}
	if err := j.JoinGroup(g); err != nil {
		return fmt.Errorf("join %s on %s: %w", g, l.ifi.Name, err)
	}
	j.n++
	l.groupAt[g] = j
	return nil
}

// startJoinerLocked starts the background joiner unless it runs.
func (l *Link) startJoinerLocked() {
	if l.joining {
		return
	}
	l.joining = true
	l.wg.Add(1)
	go l.joinPending()
}

// joinPending joins the pending groups one at a time, letting Hold and Drop
// in between, then turns all-multicast reception off again unless a join
// failed.
func (l *Link) joinPending() {
	defer l.wg.Done()
	// Background work: thousands of joins are seconds of system time, and
	// all-multicast reception covers the groups meanwhile. At the lowest
	// priority they yield the CPU to the answers and the gratuitous sender.
	// The thread is never unlocked, so it ends with this goroutine instead
	// of going back to the runtime at that priority.
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
	for {
		l.mu.Lock()
		if l.closed.Load() {
			l.joining = false
			l.mu.Unlock()
			return
		}
		var g netip.Addr
		for p := range l.pending {
			g = p
			break
		}
		if !g.IsValid() {
			if !l.joinFailed {
				if err := l.setAllMultiLocked(false); err != nil {
					l.log.Warn("cannot turn all-multicast reception off", "err", err)
				}
			}
			l.joining = false
			l.mu.Unlock()
			return
		}
		delete(l.pending, g)
		if err := l.joinGroupLocked(g); err != nil {
			// All-multicast reception stays on, so the group's
			// solicitations still arrive.
			l.joinFailed = true
			l.log.Warn("joining a solicited-node group failed: receiving all multicast instead", "group", g, "err", err)
		}
		l.mu.Unlock()
	}
}

// AllMultiConn is a FrameConn that can make its interface receive every
// multicast frame.
type AllMultiConn interface {
	SetAllMulti(on bool) error
}

func (l *Link) setAllMultiLocked(on bool) error {
	if l.allMulti == on {
		return nil
	}
	c, ok := l.ip6c.(AllMultiConn)
	if !ok {
		return errors.New("the IPv6 socket cannot receive all multicast")
	}
	if err := c.SetAllMulti(on); err != nil {
		return err
	}
	l.allMulti = on
	return nil
}

func (l *Link) leaveLocked(addr netip.Addr) error {
	g, err := ndp.SolicitedNodeMulticast(addr)
	if err != nil {
		return fmt.Errorf("solicited-node group of %s: %w", addr, err)
	}
	switch l.groupRefs[g] {
	case 0:
		return nil
	case 1:
		delete(l.groupRefs, g)
		if l.pending[g] {
			delete(l.pending, g) // never joined
			return nil
		}
		j := l.groupAt[g]
		delete(l.groupAt, g)
		if j == nil {
			return nil // its join failed
		}
		j.n--
		if err := j.LeaveGroup(g); err != nil {
			return fmt.Errorf("leave %s on %s: %w", g, l.ifi.Name, err)
		}
	default:
		l.groupRefs[g]--
	}
	return nil
}

// Groups returns the solicited-node groups joined and how many held
// addresses share each.
func (l *Link) Groups() map[netip.Addr]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[netip.Addr]int, len(l.groupRefs))
	for g, n := range l.groupRefs {
		out[g] = n
	}
	return out
}

// Answered returns how many requests for addr were answered while held.
func (l *Link) Answered(addr netip.Addr) uint64 {
	if h, ok := (*l.held.Load())[addr]; ok {
		return h.answered.Load()
	}
	return 0
}

// Stats returns the Link's counters.
func (l *Link) Stats() LinkStats {
	return LinkStats{
		ARPRequests:   l.arpRequests.Load(),
		Solicitations: l.solicitations.Load(),
		Answered:      l.answered.Load(),
		Malformed:     l.malformed.Load(),
		SendErrors:    l.sendErrors.Load(),
		ReadErrors:    l.readErrors.Load(),
	}
}

// Close stops answering, leaves every group and closes the sockets.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed.Swap(true) {
		l.mu.Unlock()
		return nil
	}
	empty := map[netip.Addr]*held{}
	l.held.Store(&empty)
	close(l.done)
	var errs []error
	for _, j := range l.joiners {
		errs = append(errs, j.Close()) // closing leaves every group
	}
	l.joiners = nil
	l.groupRefs = map[netip.Addr]int{}
	l.groupAt = map[netip.Addr]*joiner{}
	l.pending = map[netip.Addr]bool{}
	l.mu.Unlock()
	if l.wake >= 0 {
		_, _ = unix.Write(l.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
	errs = append(errs, l.arpc.Close(), l.ip6c.Close())
	l.wg.Wait()
	if l.wake >= 0 {
		unix.Close(l.wake)
	}
	return errors.Join(errs...)
}

func (l *Link) readLoop(c FrameConn, answer func(*answerer, []byte)) {
	defer l.wg.Done()
	a := &answerer{}
	var buf []byte
	if p := pollIOFor(c, l.wake); p != nil {
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
			if l.closed.Load() || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			l.readErrors.Add(1)
			if errors.Is(err, syscall.ENETDOWN) {
				// The kernel reports a link going down once on each
				// packet socket, then delivers again when it comes up.
				continue
			}
			l.log.Warn("read failed: retrying", "err", err)
			select {
			case <-time.After(100 * time.Millisecond): // no busy loop on a broken socket
			case <-l.done:
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
		l.flush(a)
	}
}

func (l *Link) lookup(addr netip.Addr) *held {
	h := (*l.held.Load())[addr]
	if h == nil || h.silent {
		return nil
	}
	return h
}

func (l *Link) connFor(frame []byte) FrameConn {
	if len(frame) > 13 && frame[12] == 0x08 && frame[13] == 0x06 {
		return l.arpc
	}
	return l.ip6c
}

func (l *Link) write(c FrameConn, frame []byte, dst net.HardwareAddr) (int, error) {
	return c.WriteTo(frame, &packet.Addr{HardwareAddr: dst})
}

// Announce sends one gratuitous round for addr. The frames are built in the
// Link's own buffer and written straight to the socket: a round allocates
// nothing, so 10,000 claims' rounds cost the sender little beyond the
// writes.
func (l *Link) Announce(addr netip.Addr, frames Frames) (int, error) {
	g := &l.gratuitous
	g.mu.Lock()
	defer g.mu.Unlock()
	var err error
	sent := 0
	emit := func(w frameIO, b []byte, dst net.HardwareAddr) {
		if e := w.Write(b, dst); e != nil {
			err = errors.Join(err, e)
			return
		}
		sent++
	}
	if addr.Is4() {
		a4 := addr.As4()
		b := g.buf[:arpPaddedLen]
		clear(b[arpFrameLen:])
		if frames&FrameARPRequest != 0 {
			putARP(b, wire.Broadcast, l.mac, 1, a4, zeroMAC, a4)
			emit(g.arp, b, wire.Broadcast)
		}
		if frames&FrameARPReply != 0 {
			putARP(b, wire.Broadcast, l.mac, 2, a4, wire.Broadcast, a4)
			emit(g.arp, b, wire.Broadcast)
		}
	} else {
		b := g.buf[:naFrameLen]
		if frames&FrameNA != 0 {
			putNA(b, allNodesMAC, l.mac, addr, wire.AllNodes, false)
			emit(g.ip6, b, allNodesMAC)
		}
		if frames&FrameNARouters != 0 {
			putNA(b, allRoutersMAC, l.mac, addr, wire.AllRouters, false)
			emit(g.ip6, b, allRoutersMAC)
		}
	}
	if err != nil {
		return sent, fmt.Errorf("announce %s on %s: %w", addr, l.ifi.Name, err)
	}
	return sent, nil
}

// gratuitousSender is what Announce builds and writes with; the scheduler
// calls it from one goroutine, and the mutex keeps any other caller apart.
type gratuitousSender struct {
	mu  sync.Mutex
	buf [max(arpPaddedLen, naFrameLen)]byte
	arp frameIO
	ip6 frameIO
}

// arpPaddedLen is a gratuitous ARP frame's length: padded to Ethernet's
// minimum, as wire builds it.
const arpPaddedLen = 60

var (
	zeroMAC       = net.HardwareAddr{0, 0, 0, 0, 0, 0}
	allRoutersMAC = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 2}
)

// receiveBuffer is the receive buffer of the answering sockets.
const receiveBuffer = 4 << 20

// setReceiveBuffer sets a socket's receive buffer, past net.core.rmem_max
// when the process may (CAP_NET_ADMIN).
func setReceiveBuffer(c *packet.Conn, n int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n); serr != nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, n)
		}
	}); err != nil {
		return err
	}
	return serr
}

// allMultiConn is a packet socket that can turn on all-multicast reception
// for as long as it asks (the kernel counts such requests per socket and
// drops them when the socket closes).
type allMultiConn struct {
	*packet.Conn
	ifindex int
}

// SetAllMulti implements AllMultiConn.
func (c *allMultiConn) SetAllMulti(on bool) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	opt := unix.PACKET_DROP_MEMBERSHIP
	if on {
		opt = unix.PACKET_ADD_MEMBERSHIP
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptPacketMreq(int(fd), unix.SOL_PACKET, opt, &unix.PacketMreq{Ifindex: int32(c.ifindex), Type: unix.PACKET_MR_ALLMULTI})
	})
	if err != nil {
		return err
	}
	return serr
}

// Probe sends one probe for addr; the answers come back to the capture
// that looks for competing claimers.
func (l *Link) Probe(addr netip.Addr) (int, error) {
	var (
		b   []byte
		err error
		dst = wire.Broadcast
	)
	if addr.Is4() {
		b, err = wire.ARPProbe(l.mac, addr)
	} else {
		b, err = wire.DADSolicitation(l.mac, addr)
		if g, gerr := ndp.SolicitedNodeMulticast(addr); gerr == nil {
			dst = wire.MulticastMAC(g)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("build a probe for %s: %w", addr, err)
	}
	if _, err := l.write(l.connFor(b), b, dst); err != nil {
		return 0, fmt.Errorf("probe %s on %s: %w", addr, l.ifi.Name, err)
	}
	return 1, nil
}

func sameMAC(a, b net.HardwareAddr) bool {
	return len(a) == len(b) && string(a) == string(b)
}

// usableUnicast reports whether mac can be the destination of an answer.
func usableUnicast(mac net.HardwareAddr) bool {
	if len(mac) != 6 || mac[0]&1 != 0 {
		return false
	}
	for _, b := range mac {
		if b != 0 {
			return true
		}
	}
	return false
}

// arpRequestFilter accepts Ethernet/IPv4 ARP requests only, so that replies
// and other hardware types never wake the reader.
func arpRequestFilter() []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.EtherTypeARP, SkipTrue: 9},
		bpf.LoadAbsolute{Off: 14, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 1, SkipTrue: 7}, // Ethernet
		bpf.LoadAbsolute{Off: 16, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x0800, SkipTrue: 5}, // IPv4
		bpf.LoadAbsolute{Off: 18, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x0604, SkipTrue: 3}, // lengths 6 and 4
		bpf.LoadAbsolute{Off: 20, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(arp.OperationRequest), SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	}
}

// solicitationFilter accepts IPv6 frames carrying an ICMPv6 neighbor
// solicitation directly after the IPv6 header (NDP messages carry no
// extension headers), so ordinary IPv6 traffic never wakes the reader.
func solicitationFilter() []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.EtherTypeIPv6, SkipTrue: 5},
		bpf.LoadAbsolute{Off: 20, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 58, SkipTrue: 3}, // ICMPv6
		bpf.LoadAbsolute{Off: wire.ICMPv6Offset, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.TypeNeighborSolicitation, SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	}
}
