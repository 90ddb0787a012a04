package announce

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/batchio"
	"github.com/vipctl/vip/internal/wire"
)

// Responder is what answers who-has requests (ARP requests, neighbor
// solicitations) for the addresses it holds on one interface: the Link's
// own packet-socket readers, or announce/bpfresp's in-kernel responder,
// which a Link takes in their place (KernelResponder). It is the whole
// contract: the engine and the Link discover nothing more by type
// assertion.
type Responder interface {
	// Hold starts answering for addrs, all or none.
	Hold(addrs ...netip.Addr) error
	// LetGo stops answering for addrs (and counting them, where Count
	// counts them). Letting go of an address not held is a no-op.
	LetGo(addrs ...netip.Addr) error
	// Answered returns how many requests for addr were answered while held.
	Answered(addr netip.Addr) uint64
	// Kind says what answers, as status shows it: KindSocket, or
	// the in-kernel responder's own ("ebpf").
	Kind() string
	// Hook says where an in-kernel responder runs ("tcx", "xdp-generic");
	// it is empty for one that runs in vip.
	Hook() string
	Close() error
}

// ErrKernelUnavailable is wrapped by every error that says an in-kernel
// responder cannot run here (the kernel, the privileges, the interface or
// its hook refuse it), as opposed to a fault: a caller that may fall back
// to the socket responder, or that tells the user which fix applies,
// checks for it with errors.Is, without linking the loader.
var ErrKernelUnavailable = errors.New("the eBPF responder is unavailable")

// KernelResponder is a Responder that answers in the kernel
// (announce/bpfresp's), in place of a Link's packet-socket readers. Seeing
// every frame for an address where it runs, it can do what the socket
// readers, which see only who-has requests, cannot: count the traffic,
// remember who asks, and check a guarded agent's answer deadline in its
// maps, past which the kernel answers nothing even while vip is frozen.
type KernelResponder interface {
	Responder
	// Traffic returns the packets and bytes that arrived for addr while
	// it was held or counted.
	Traffic(addr netip.Addr) (packets, bytes uint64)
	// Count counts the traffic for addrs without answering for them:
	// addresses the kernel owns (assigned to the interface), which it
	// answers itself. LetGo stops the counting.
	Count(addrs ...netip.Addr) error
	// Snapshot calls fn once with the counts of each address held or
	// counted, all read in one pass (a few system calls, not two an
	// address).
	Snapshot(fn func(a netip.Addr, answered, packets, bytes uint64)) error
	// Askers calls fn for each asker it remembers of the addresses it
	// answers for: a bounded number of them, so that one forgotten to
	// make room starts again from one, which a reader that follows the
	// totals takes as a new asker. A capture then need not see those
	// requests: on tcx it would wake for each, on XDP it sees none.
	Askers(fn func(AskerCount)) error
	// SetDeadline has it answer only while CLOCK_BOOTTIME is before at
	// (Deadline.Watch calls it).
	SetDeadline(at time.Duration) error
	// Withheld counts the requests it left unanswered for a past
	// deadline.
	Withheld() uint64
}

// Announcer sends gratuitous advertisements on one interface.
type Announcer interface {
	// Announce sends one round for addr: the kinds in frames that fit its
	// family. It returns the number of frames sent.
	Announce(addr netip.Addr, frames FrameKinds) (int, error)
}

// Prober sends probes that whoever else holds an address answers: an
// RFC 5227 ARP probe, or a duplicate-address-detection solicitation.
type Prober interface {
	Probe(addr netip.Addr) (int, error)
}

// A Port is one interface as the engine uses it: it answers (as its
// Responder does), announces, probes, says which interface it is, and
// reads what its responder counts. *Link is the one vip opens.
type Port interface {
	Responder
	Announcer
	Prober
	Name() string
	Index() int
	MAC() net.HardwareAddr
	// Guard has every frame for the port's claims checked against a
	// guarded agent's answer deadline where it leaves; a nil d guards
	// nothing. It is called before the first Hold.
	Guard(d *Deadline) error
	// Traffic returns what arrived for addr while held or counted; ok is
	// false where the responder does not count it: unknown, not zero.
	Traffic(addr netip.Addr) (t Traffic, ok bool)
	// Count has the responder count the traffic for addrs without
	// answering for them, where it counts traffic at all; elsewhere it
	// does nothing.
	Count(addrs ...netip.Addr) error
	// CanSnapshot reports whether Snapshot reads the port's counts; it
	// reads nothing.
	CanSnapshot() bool
	// Snapshot reads the counts of every address the port answers or
	// counts in one pass; ok is false where it cannot, or its read failed.
	Snapshot() (counts map[netip.Addr]Counts, ok bool)
	// RecordsAskers reports whether Askers reports the port's askers.
	RecordsAskers() bool
	// Askers calls fn for each asker the responder remembers (see
	// KernelResponder); it does nothing where it remembers none.
	Askers(fn func(AskerCount)) error
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
	// Responder, when set, answers in place of readers on ARP and IPv6:
	// the Link then only writes its rounds and probes on the sockets,
	// joins the groups, and closes the sockets itself. Nil answers on the
	// sockets.
	Responder KernelResponder
	Log       *slog.Logger
	// Now is the clock of the traffic rates; nil is time.Now.
	Now func() time.Time
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

// Link is a Port over packet sockets, made of three parts with one job
// each: a socketResponder answers ARP requests and neighbor solicitations
// for the held addresses; a sender writes the gratuitous rounds and the
// probes; groups keeps the solicited-node memberships of the IPv6 ones.
// Reading whole frames lets it answer on an interface without an address of
// its own and see unicast solicitations the kernel drops. The answering
// part alone can be replaced (by an in-kernel responder): rounds, probes and
// groups stay.
type Link struct {
	ifi *net.Interface
	// resp answers: sock, the packet sockets' readers, or kern, a
	// responder in the kernel; the other of the two is nil.
	resp   Responder
	sock   *socketResponder
	kern   KernelResponder
	meter  *trafficMeter
	send   *sender
	groups *groups

	// conns are the sockets the Link closes itself: those of a Responder
	// not its own (the socketResponder closes the ones it reads).
	conns []FrameConn

	mu   sync.Mutex // serialises Hold, Count, LetGo, Guard and Close
	held map[netip.Addr]bool
	// unwatch stops the in-kernel responder's watch of the deadline
	// (Guard); nil when there is none.
	unwatch func()
	// counted are the addresses whose traffic the responder counts while
	// the kernel answers for them (Count).
	counted map[netip.Addr]bool
	closed  bool
}

var _ Port = (*Link)(nil)

// OpenLink opens packet sockets on ifi and starts answering for the
// addresses that are then held. It needs CAP_NET_RAW.
func OpenLink(ifi *net.Interface, log *slog.Logger) (*Link, error) {
	return openLink(ifi, nil, log)
}

// OpenLinkAnswering opens packet sockets on ifi for the rounds, probes
// and groups, and has resp answer for the held addresses (an in-kernel
// responder). The sockets read nothing: a socket reader that answered too
// would double every answer. The Link closes resp with itself.
func OpenLinkAnswering(ifi *net.Interface, resp KernelResponder, log *slog.Logger) (*Link, error) {
	return openLink(ifi, resp, log)
}

func openLink(ifi *net.Interface, resp KernelResponder, log *slog.Logger) (*Link, error) {
	// Only what arrives on ifi itself: see wire.OwnFramesOnly.
	idx := uint32(ifi.Index)
	arpProg, nsProg := wire.OwnFramesOnly(idx, arpRequestFilter()), wire.OwnFramesOnly(idx, solicitationFilter())
	if resp != nil {
		// Only written to: let the kernel queue nothing for them.
		arpProg, nsProg = wire.DropAll(), wire.DropAll()
	}
	arpFilter, err := bpf.Assemble(arpProg)
	if err != nil {
		return nil, fmt.Errorf("assemble ARP filter: %w", err)
	}
	nsFilter, err := bpf.Assemble(nsProg)
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
		if resp != nil {
			break // nothing is read from them
		}
		if err := setReceiveBuffer(c, receiveBuffer); err != nil {
			log.Debug("cannot enlarge the receive buffer", "interface", ifi.Name, "err", err)
		}
	}
	return NewLink(ifi, LinkConfig{
		ARP:       arpc,
		IPv6:      ip6c,
		Responder: resp,
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
		Log: log,
	}), nil
}

// NewLink returns a Link on ifi that reads and writes through the conns in
// cfg, and starts its readers. Close stops them.
func NewLink(ifi *net.Interface, cfg LinkConfig) *Link {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("interface", ifi.Name)
	multi, _ := cfg.IPv6.(AllMultiConn)
	l := &Link{
		ifi:    ifi,
		meter:  newTrafficMeter(cfg.Now),
		send:   newSender(ifi.Name, ifi.HardwareAddr, cfg.ARP, cfg.IPv6),
		groups: newGroups(ifi.Name, cfg.Groups, multi, log),
		held:   make(map[netip.Addr]bool), counted: make(map[netip.Addr]bool),
	}
	if cfg.Responder == nil {
		l.sock = newSocketResponder(ifi.Name, ifi.Index, ifi.HardwareAddr, cfg.ARP, cfg.IPv6, log)
		l.resp = l.sock
	} else {
		l.kern, l.resp = cfg.Responder, cfg.Responder
		l.conns = []FrameConn{cfg.ARP, cfg.IPv6}
	}
	return l
}

// Name returns the interface name.
func (l *Link) Name() string { return l.ifi.Name }

// Index returns the interface index.
func (l *Link) Index() int { return l.ifi.Index }

// MAC returns the hardware address answers carry.
func (l *Link) MAC() net.HardwareAddr { return l.ifi.HardwareAddr }

// Hold starts answering for addrs, all or none. For an IPv6 address it
// joins the address's solicited-node group first.
func (l *Link) Hold(addrs ...netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return net.ErrClosed
	}
	var fresh []netip.Addr
	for _, a := range addrs {
		if !l.held[a] && !slices.Contains(fresh, a) {
			fresh = append(fresh, a)
		}
	}
	if err := l.groups.join(fresh); err != nil {
		return err
	}
	if err := l.resp.Hold(fresh...); err != nil {
		_ = l.groups.leave(fresh)
		return err
	}
	for _, a := range fresh {
		l.held[a] = true
		delete(l.counted, a)
	}
	return nil
}

// LetGo stops answering for addrs and leaves each group that no other held
// address shares.
func (l *Link) LetGo(addrs ...netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var gone, uncounted []netip.Addr
	for _, a := range addrs {
		switch {
		case l.held[a]:
			delete(l.held, a)
			gone = append(gone, a)
		case l.counted[a]:
			delete(l.counted, a)
			uncounted = append(uncounted, a)
		}
	}
	l.meter.forget(gone)
	l.meter.forget(uncounted)
	return errors.Join(l.resp.LetGo(append(gone, uncounted...)...), l.groups.leave(gone))
}

// Groups returns the solicited-node groups joined and how many held
// addresses share each.
func (l *Link) Groups() map[netip.Addr]int { return l.groups.counts() }

// Answered returns how many requests for addr were answered while held.
func (l *Link) Answered(addr netip.Addr) uint64 { return l.resp.Answered(addr) }

// Traffic returns what arrived for addr while held, and ok=false when the
// Link's responder does not count it (the socket responder sees only
// who-has requests): unknown, not zero.
func (l *Link) Traffic(addr netip.Addr) (t Traffic, ok bool) {
	if l.kern == nil {
		return Traffic{}, false
	}
	l.mu.Lock()
	known := l.held[addr] || l.counted[addr]
	l.mu.Unlock()
	if !known {
		// Neither answered nor counted here: unknown, not zero.
		return Traffic{}, false
	}
	p, b := l.kern.Traffic(addr)
	return l.meter.read(addr, p, b), true
}

// Count has the Link's responder count the traffic for addrs without
// answering for them, where it counts traffic at all (the in-kernel
// responder); elsewhere it does nothing.
func (l *Link) Count(addrs ...netip.Addr) error {
	if l.kern == nil || len(addrs) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return net.ErrClosed
	}
	if err := l.kern.Count(addrs...); err != nil {
		return err
	}
	for _, a := range addrs {
		if !l.held[a] {
			l.counted[a] = true
		}
	}
	return nil
}

// CanSnapshot reports whether Snapshot reads the Link's counts: whether its
// responder reads them all in one pass.
func (l *Link) CanSnapshot() bool { return l.kern != nil }

// Snapshot reads the counts of every address the Link answers or counts in
// one pass, with each traffic rate from the meter as Traffic gives it; ok
// is false when the responder cannot, or its read failed.
func (l *Link) Snapshot() (map[netip.Addr]Counts, bool) {
	if l.kern == nil {
		return nil, false
	}
	l.mu.Lock()
	known := make(map[netip.Addr]bool, len(l.held)+len(l.counted))
	for a := range l.held {
		known[a] = true
	}
	for a := range l.counted {
		known[a] = true
	}
	l.mu.Unlock()
	out := make(map[netip.Addr]Counts, len(known))
	err := l.kern.Snapshot(func(a netip.Addr, answered, packets, bytes uint64) {
		if !known[a] {
			return
		}
		t := l.meter.read(a, packets, bytes)
		out[a] = Counts{Answered: answered, Traffic: &t}
	})
	if err != nil {
		return nil, false
	}
	return out, true
}

// RecordsAskers reports whether the Link's responder remembers who asks
// for the addresses it answers (the in-kernel one does): a capture on the
// interface then need not see those requests.
func (l *Link) RecordsAskers() bool { return l.kern != nil }

// Askers calls fn for each asker the Link's responder remembers of an
// address it answers for; it does nothing when the responder does not
// remember them.
func (l *Link) Askers(fn func(AskerCount)) error {
	if l.kern == nil {
		return nil
	}
	return l.kern.Askers(fn)
}

// Kind says what answers for the Link's held addresses, as status shows
// it: KindSocket for its own socket readers, else its responder's
// kind ("ebpf").
func (l *Link) Kind() string { return l.resp.Kind() }

// Hook says where the Link's in-kernel responder runs ("tcx"); it is empty
// for the socket readers.
func (l *Link) Hook() string { return l.resp.Hook() }

// Stats returns the Link's counters: those of its socket readers (an
// in-kernel responder keeps none of these).
func (l *Link) Stats() LinkStats {
	if l.sock == nil {
		return LinkStats{}
	}
	return l.sock.stats()
}

// Announce sends one gratuitous round for addr (see sender).
func (l *Link) Announce(addr netip.Addr, frames FrameKinds) (int, error) {
	return l.send.Announce(addr, frames)
}

// Probe sends one probe for addr; the answers come back to the capture
// that looks for competing claimers.
func (l *Link) Probe(addr netip.Addr) (int, error) { return l.send.Probe(addr) }

// Close stops answering, leaves every group and closes the sockets, all at
// once: each packet socket's close waits for a grace period of the
// kernel's (batchio.CloseAll).
func (l *Link) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.held, l.counted = map[netip.Addr]bool{}, map[netip.Addr]bool{}
	if l.unwatch != nil {
		l.unwatch() // first, while the responder can still count
	}
	closes := []func() error{l.groups.close, l.resp.Close}
	for _, c := range l.conns {
		closes = append(closes, c.Close)
	}
	return batchio.CloseAll(closes...)
}

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
