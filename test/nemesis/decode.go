package nemesis

import (
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/wire"
)

// Decode reads one captured frame about one of addrs. Probes carry their
// sequence number in a hardware address of their own, 02:RUN:SEQ (package
// loadgen's): an ARP request as its sender hardware address, a solicitation
// as its source link-layer option; a reply goes back to it. runs are the
// probes' run numbers. A frame that is about none of addrs, or that claims
// nothing (an ARP probe, a DAD solicitation), is not reported.
func Decode(b []byte, at time.Time, addrs []netip.Addr, runs ...uint8) (Frame, bool) {
	f, err := wire.Parse(b, wire.Capture)
	if err != nil {
		return Frame{}, false
	}
	seq := func(m wire.MAC) (uint32, bool) {
		if m[0] != 0x02 {
			return 0, false
		}
		for _, r := range runs {
			if m[1] == r {
				return binary.BigEndian.Uint32(m[2:6]), true
			}
		}
		return 0, false
	}
	ours := func(a netip.Addr) bool {
		for _, x := range addrs {
			if x == a {
				return true
			}
		}
		return false
	}
	fr := Frame{At: at, MAC: net.HardwareAddr(f.EthSrc[:]).String()}
	switch f.EtherType {
	case wire.EtherTypeARP:
		a := f.ARP
		switch {
		case a.Op == wire.OpReply && ours(a.SenderIP):
			fr.Addr = a.SenderIP
			if s, ok := seq(a.TargetMAC); ok {
				fr.Kind, fr.Seq = Reply, s
			} else {
				fr.Kind = Announcement
			}
		case a.Op == wire.OpRequest && ours(a.TargetIP) && a.SenderIP == a.TargetIP:
			fr.Addr, fr.Kind = a.TargetIP, Announcement
		case a.Op == wire.OpRequest && ours(a.TargetIP):
			s, ok := seq(a.SenderMAC)
			if !ok {
				return Frame{}, false
			}
			fr.Addr, fr.Kind, fr.Seq = a.TargetIP, Request, s
		default:
			return Frame{}, false
		}
	case wire.EtherTypeIPv6:
		n := f.ND
		if !ours(n.Target) {
			return Frame{}, false
		}
		fr.Addr = n.Target
		switch {
		case n.Type == wire.TypeNeighborAdvertisement:
			if s, ok := seq(f.EthDst); ok {
				fr.Kind, fr.Seq = Reply, s
			} else {
				fr.Kind = Announcement
			}
		case n.Type == wire.TypeNeighborSolicitation && n.HasLinkLayer && !n.IsDAD():
			s, ok := seq(n.LinkLayer)
			if !ok {
				return Frame{}, false
			}
			fr.Kind, fr.Seq = Request, s
		default:
			return Frame{}, false
		}
	default:
		return Frame{}, false
	}
	return fr, true
}
