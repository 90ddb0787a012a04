package announce

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/mdlayher/ndp"

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
}

func newSender(ifname string, mac net.HardwareAddr, arp, ip6 FrameConn) *sender {
	return &sender{ifname: ifname, mac: mac, arp: ioFor(arp), ip6: ioFor(ip6)}
}

// arpPaddedLen is a gratuitous ARP frame's length: padded to Ethernet's
// minimum, as wire builds it.
const arpPaddedLen = 60

var (
	zeroMAC       = net.HardwareAddr{0, 0, 0, 0, 0, 0}
	allRoutersMAC = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 2}
)

// Announce sends one gratuitous round for addr: the kinds in frames that fit
// its family. It returns the number of frames sent.
func (s *sender) Announce(addr netip.Addr, frames Frames) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
		b := s.buf[:arpPaddedLen]
		clear(b[arpFrameLen:])
		if frames&FrameARPRequest != 0 {
			putARP(b, wire.Broadcast, s.mac, 1, a4, zeroMAC, a4)
			emit(s.arp, b, wire.Broadcast)
		}
		if frames&FrameARPReply != 0 {
			putARP(b, wire.Broadcast, s.mac, 2, a4, wire.Broadcast, a4)
			emit(s.arp, b, wire.Broadcast)
		}
	} else {
		b := s.buf[:naFrameLen]
		if frames&FrameNA != 0 {
			putNA(b, allNodesMAC, s.mac, addr, wire.AllNodes, false)
			emit(s.ip6, b, allNodesMAC)
		}
		if frames&FrameNARouters != 0 {
			putNA(b, allRoutersMAC, s.mac, addr, wire.AllRouters, false)
			emit(s.ip6, b, allRoutersMAC)
		}
	}
	if err != nil {
		return sent, fmt.Errorf("announce %s on %s: %w", addr, s.ifname, err)
	}
	return sent, nil
}

// Probe sends one probe for addr, an RFC 5227 ARP probe or a duplicate
// address detection solicitation; the answers come back to the capture
// that looks for competing claimers.
func (s *sender) Probe(addr netip.Addr) (int, error) {
	var (
		b   []byte
		err error
		dst = wire.Broadcast
		w   = s.arp
	)
	if addr.Is4() {
		b, err = wire.ARPProbe(s.mac, addr)
	} else {
		w = s.ip6
		b, err = wire.DADSolicitation(s.mac, addr)
		if g, gerr := ndp.SolicitedNodeMulticast(addr); gerr == nil {
			dst = wire.MulticastMAC(g)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("build a probe for %s: %w", addr, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := w.Write(b, dst); err != nil {
		return 0, fmt.Errorf("probe %s on %s: %w", addr, s.ifname, err)
	}
	return 1, nil
}
