package sniff

import (
	"time"

	"github.com/vipctl/vip/internal/wire"
)

// The classes of error Decode returns, the codec's own: every error from
// Decode wraps exactly one of them; errors.Is tells them apart, and the
// message says what exactly was wrong.
var (
	// ErrNotNeighbor is a frame that is neither ARP for IPv4 over Ethernet
	// nor an IPv6 neighbor solicitation or advertisement: traffic the
	// capture filter let through, not a fault.
	ErrNotNeighbor = wire.ErrNotNeighbor
	// ErrTruncated is a frame that ends before the headers it announces.
	ErrTruncated = wire.ErrTruncated
	// ErrMalformed is a frame whose fields contradict each other or the
	// protocol's layout.
	ErrMalformed = wire.ErrMalformed
	// ErrInvalid is a neighbor solicitation or advertisement that RFC 4861
	// section 7.1 tells every receiver to discard (wrong hop limit, code or
	// checksum, a multicast target, ...). No neighbour acts on it, so it
	// claims nothing.
	ErrInvalid = wire.ErrInvalid
)

// Decode turns one Ethernet frame, captured at ts, into an Observation. It
// parses with the codec (internal/wire) in its Capture mode, which reads up
// to two VLAN tags and walks a short chain of IPv6 extension headers, and
// so holds a frame to the same rules as the responder; it only says what
// kind of frame it is. It keeps no reference to frame and allocates
// nothing. A frame it cannot use yields an error wrapping one of
// ErrNotNeighbor, ErrTruncated, ErrMalformed or ErrInvalid; Decode never
// panics.
func Decode(frame []byte, ts time.Time) (Observation, error) {
	f, err := wire.Parse(frame, wire.Capture)
	if err != nil {
		return Observation{}, err
	}
	o := Observation{Time: ts, EthDst: f.EthDst, EthSrc: f.EthSrc, VLAN: f.VLAN}
	if f.EtherType == wire.EtherTypeARP {
		a := &f.ARP
		o.Sender, o.SenderMAC, o.Target, o.TargetMAC = a.SenderIP, a.SenderMAC, a.TargetIP, a.TargetMAC
		o.Kind = arpKind(a)
		return o, nil
	}
	n := &f.ND
	o.Sender, o.Dst, o.Target, o.LinkLayerOption = n.Src, n.Dst, n.Target, n.HasLinkLayer
	switch {
	case n.Type == wire.TypeNeighborAdvertisement:
		o.TargetMAC = n.LinkLayer
		o.Router, o.Solicited, o.Override = n.Router, n.Solicited, n.Override
		o.Kind = KindAdvertisement
	case n.IsDAD():
		o.SenderMAC = n.LinkLayer
		o.Kind = KindDAD
	case n.Dst.IsMulticast():
		o.SenderMAC = n.LinkLayer
		o.Kind = KindSolicitation
	default:
		o.SenderMAC = n.LinkLayer
		o.Kind = KindUnreachability
	}
	return o, nil
}

// arpKind says what an ARP packet the codec accepted is for.
func arpKind(a *wire.ARP) Kind {
	switch {
	case a.Op == wire.OpReply && a.SenderIP == a.TargetIP:
		return KindGratuitousReply
	case a.Op == wire.OpReply:
		return KindReply
	case a.SenderIP.IsUnspecified():
		return KindProbe
	case a.SenderIP == a.TargetIP:
		return KindAnnouncement
	default:
		return KindWhoHas
	}
}
