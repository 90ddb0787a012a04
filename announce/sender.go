package announce

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/vipctl/vip/internal/wire"
)

// sender writes what a port sends of its own accord, gratuitous rounds and
// probes, through one write path per family. Rounds are built in its own
// buffer and written straight to the socket: a round allocates nothing, so
// 10,000 claims' rounds cost the sender little beyond the writes. The
// scheduler calls it from one goroutine; the mutex keeps any other caller
// apart.
type sender struct {
	ifname string
	mac    net.HardwareAddr

	mu  sync.Mutex
	buf [max(arpPaddedLen, naFrameLen)]byte
	arp frameIO
	ip6 frameIO
	// dl is the guarded agent's answer deadline, checked immediately
	// before each write (nil: unguarded).
	dl atomic.Pointer[Deadline]
}

func newSender(ifname string, mac net.HardwareAddr, arp, ip6 FrameConn) *sender {
	return &sender{ifname: ifname, mac: mac, arp: ioFor(arp), ip6: ioFor(ip6)}
}

// arpPaddedLen is a gratuitous ARP frame's length: padded to Ethernet's
// minimum, as a kernel pads the frames it sends.
const arpPaddedLen = wire.MinFrameLen

var allRoutersMAC = wire.GroupMAC(wire.AllRouters)

// errNotEthernet is a port whose hardware address is not an Ethernet one:
// it has no frames to send.
var errNotEthernet = errors.New("the interface has no Ethernet address")

// Announce sends one gratuitous round for addr: the kinds in frames that fit
// its family. It returns the number of frames sent.
func (s *sender) Announce(addr netip.Addr, frames FrameKinds) (int, error) {
	me, ok := wire.MACOf(s.mac)
	if !ok {
		return 0, fmt.Errorf("announce %s on %s: %w", addr, s.ifname, errNotEthernet)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	sent := 0
	// The socket address is the frame's own destination (a slice of a
	// local MAC would escape through the interface, and allocate).
	emit := func(w frameIO, b []byte) {
		if e := s.write(w, b); e != nil {
			err = errors.Join(err, e)
			return
		}
		sent++
	}
	if addr.Is4() {
		b := s.buf[:arpPaddedLen]
		clear(b[wire.ARPLen:])
		if frames&FrameARPRequest != 0 {
			a := wire.ARPAnnouncement(me, addr, wire.OpRequest)
			wire.PutARP(b, wire.BroadcastMAC, me, &a)
			emit(s.arp, b)
		}
		if frames&FrameARPReply != 0 {
			a := wire.ARPAnnouncement(me, addr, wire.OpReply)
			wire.PutARP(b, wire.BroadcastMAC, me, &a)
			emit(s.arp, b)
		}
	} else {
		if frames&FrameNA != 0 {
			na := wire.Advertisement(me, addr, wire.AllNodes, false)
			emit(s.ip6, s.buf[:wire.PutND(s.buf[:], allNodesMAC, me, &na)])
		}
		if frames&FrameNARouters != 0 {
			na := wire.Advertisement(me, addr, wire.AllRouters, false)
			emit(s.ip6, s.buf[:wire.PutND(s.buf[:], allRoutersMAC, me, &na)])
		}
	}
	if err != nil {
		return sent, fmt.Errorf("announce %s on %s: %w", addr, s.ifname, err)
	}
	return sent, nil
}

// Probe sends one probe for addr, an RFC 5227 ARP probe or a duplicate
// address detection solicitation; the answers come back to the capture
// that looks for competing claimers. Like a round, it is built in the
// sender's buffer and allocates nothing.
func (s *sender) Probe(addr netip.Addr) (int, error) {
	me, ok := wire.MACOf(s.mac)
	if !ok {
		return 0, fmt.Errorf("probe %s on %s: %w", addr, s.ifname, errNotEthernet)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		b   []byte
		dst = wire.BroadcastMAC
		w   = s.arp
	)
	if addr.Is4() {
		p := wire.ARPProbe(me, addr)
		b = s.buf[:arpPaddedLen]
		clear(b[wire.ARPLen:])
		wire.PutARP(b, dst, me, &p)
	} else {
		p := wire.DADProbe(addr)
		w, dst = s.ip6, wire.GroupMAC(p.Dst)
		b = s.buf[:wire.PutND(s.buf[:], dst, me, &p)]
	}
	if err := s.write(w, b); err != nil {
		return 0, fmt.Errorf("probe %s on %s: %w", addr, s.ifname, err)
	}
	return 1, nil
}

// errPastDeadline is a frame not sent because the answer deadline had
// passed: the lease may have expired in the store, and another node may
// hold the address now.
var errPastDeadline = errors.New("withheld: the answer deadline of this agent's lease has passed")

// write writes b as write does, if the answer deadline has not passed
// (checked at the last moment, so that a round due while the process was
// frozen is not sent when it wakes past the deadline).
func (s *sender) write(w frameIO, b []byte) error {
	if dl := s.dl.Load(); !dl.Open() {
		dl.withhold(1)
		return errPastDeadline
	}
	return write(w, b)
}

// write writes frame b to its own destination. The kernel reports a link
// going down as an error pending on each packet socket, which the next
// read or send returns once: a socket that nothing reads (another
// responder answers) keeps it until the first round after the link came
// back, so a send that fails with ENETDOWN is tried once more, and fails
// again only while the link is down.
func write(w frameIO, b []byte) error {
	err := w.Write(b, b[0:6:6])
	if errors.Is(err, syscall.ENETDOWN) {
		err = w.Write(b, b[0:6:6])
	}
	return err
}
