package sniff

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/wire"
)

// The classes of error Decode returns. Every error from Decode wraps exactly
// one of them; errors.Is tells them apart, and the message says what exactly
// was wrong.
var (
	// ErrNotNeighbor is a frame that is neither ARP for IPv4 over Ethernet
	// nor an IPv6 neighbor solicitation or advertisement: traffic the
	// capture filter let through, not a fault.
	ErrNotNeighbor = errors.New("not ARP or a neighbor solicitation or advertisement")
	// ErrTruncated is a frame that ends before the headers it announces.
	ErrTruncated = errors.New("truncated frame")
	// ErrMalformed is a frame whose fields contradict each other or the
	// protocol's layout.
	ErrMalformed = errors.New("malformed frame")
	// ErrInvalid is a neighbor solicitation or advertisement that RFC 4861
	// section 7.1 tells every receiver to discard (wrong hop limit, code or
	// checksum, a multicast target, ...). No neighbour acts on it, so it
	// claims nothing.
	ErrInvalid = errors.New("invalid neighbor discovery message")
)

// decodeError is one specific reason, wrapping its class. The reasons are
// made once, so that rejecting a frame allocates nothing.
type decodeError struct {
	class error
	msg   string
}

func (e *decodeError) Error() string { return e.msg }
func (e *decodeError) Unwrap() error { return e.class }

func reason(class error, detail string) error {
	return &decodeError{class: class, msg: class.Error() + ": " + detail}
}

var (
	errEthernet       = reason(ErrTruncated, "shorter than an Ethernet header")
	errVLAN           = reason(ErrTruncated, "ends inside a VLAN tag")
	errTooManyTags    = reason(ErrNotNeighbor, "more than two VLAN tags")
	errEtherType      = reason(ErrNotNeighbor, "EtherType is neither ARP nor IPv6")
	errARPShort       = reason(ErrTruncated, "shorter than an ARP packet")
	errARPNotIPv4     = reason(ErrNotNeighbor, "ARP for another hardware or protocol than Ethernet and IPv4")
	errARPLengths     = reason(ErrMalformed, "ARP address lengths are not 6 and 4")
	errARPOp          = reason(ErrMalformed, "ARP operation is neither request nor reply")
	errIPv6Short      = reason(ErrTruncated, "shorter than an IPv6 header")
	errIPv6Version    = reason(ErrMalformed, "IPv6 header with a version other than 6")
	errIPv6Payload    = reason(ErrTruncated, "IPv6 payload longer than the frame")
	errIPv6Empty      = reason(ErrMalformed, "IPv6 payload length 0 (no payload, or a jumbogram)")
	errExtShort       = reason(ErrTruncated, "IPv6 extension header runs past the payload")
	errExtTooMany     = reason(ErrMalformed, "more IPv6 extension headers than a neighbor discovery message has")
	errHopByHopLate   = reason(ErrMalformed, "hop-by-hop options header not first")
	errFragment       = reason(ErrInvalid, "fragmented (RFC 6980)")
	errNotICMPv6      = reason(ErrNotNeighbor, "IPv6 without ICMPv6")
	errICMPShort      = reason(ErrTruncated, "ICMPv6 message shorter than its header")
	errNotNDP         = reason(ErrNotNeighbor, "ICMPv6 other than a neighbor solicitation or advertisement")
	errHopLimit       = reason(ErrInvalid, "hop limit is not 255")
	errCode           = reason(ErrInvalid, "ICMPv6 code is not 0")
	errChecksum       = reason(ErrInvalid, "bad ICMPv6 checksum")
	errNDPShort       = reason(ErrInvalid, "message shorter than 24 bytes")
	errTargetMcast    = reason(ErrInvalid, "multicast target address")
	errDADDst         = reason(ErrInvalid, "solicitation from :: not sent to a solicited-node group")
	errDADLinkLayer   = reason(ErrInvalid, "solicitation from :: with a source link-layer address")
	errSolicitedMcast = reason(ErrInvalid, "solicited advertisement sent to a multicast group")
	errOptionZero     = reason(ErrInvalid, "option of length 0")
	errOptionShort    = reason(ErrMalformed, "option runs past the message")
)

// EtherTypes of VLAN tags: 802.1Q, 802.1ad, and the pre-standard QinQ value.
const (
	etherTypeDot1Q  = 0x8100
	etherTypeDot1AD = 0x88a8
	etherTypeQinQ   = 0x9100
)

// IPv6 next-header values Decode walks or recognises.
const (
	protoHopByHop    = 0
	protoRouting     = 43
	protoFragment    = 44
	protoAH          = 51
	protoICMPv6      = 58
	protoDestOptions = 60
)

// maxExtHeaders bounds the IPv6 extension header walk. A neighbor discovery
// message carries at most a hop-by-hop and a destination options header in
// practice; a few more are tolerated, a chain longer than that is refused
// rather than followed.
const maxExtHeaders = 4

// NDP option types (RFC 4861 section 4.6).
const (
	optSourceLinkLayer = 1
	optTargetLinkLayer = 2
)

// arpLen is the length of an ARP packet for IPv4 over Ethernet.
const arpLen = 28

// ndpMinLen is the length of a solicitation or advertisement without
// options: ICMPv6 header, reserved or flags word, target address.
const ndpMinLen = 24

// Decode turns one Ethernet frame, captured at ts, into an Observation. It
// reads up to two VLAN tags and, for IPv6, walks a short chain of extension
// headers to the ICMPv6 message. It keeps no reference to frame and
// allocates nothing. A frame it cannot use yields an error wrapping one of
// ErrNotNeighbor, ErrTruncated, ErrMalformed or ErrInvalid; Decode never
// panics.
func Decode(frame []byte, ts time.Time) (Observation, error) {
	if len(frame) < wire.EthernetHeaderLen {
		return Observation{}, errEthernet
	}
	o := Observation{Time: ts}
	copy(o.EthDst[:], frame[0:6])
	copy(o.EthSrc[:], frame[6:12])
	etherType := binary.BigEndian.Uint16(frame[12:14])
	b := frame[wire.EthernetHeaderLen:]
	for tags := 0; etherType == etherTypeDot1Q || etherType == etherTypeDot1AD || etherType == etherTypeQinQ; tags++ {
		if tags == 2 {
			return Observation{}, errTooManyTags
		}
		if len(b) < 4 {
			return Observation{}, errVLAN
		}
		if tags == 0 {
			o.VLAN = binary.BigEndian.Uint16(b[0:2]) & 0x0fff
		}
		etherType = binary.BigEndian.Uint16(b[2:4])
		b = b[4:]
	}
	var err error
	switch etherType {
	case wire.EtherTypeARP:
		err = decodeARP(&o, b)
	case wire.EtherTypeIPv6:
		err = decodeIPv6(&o, b)
	default:
		err = errEtherType
	}
	if err != nil {
		return Observation{}, err
	}
	return o, nil
}

func decodeARP(o *Observation, b []byte) error {
	if len(b) < arpLen {
		return errARPShort
	}
	if binary.BigEndian.Uint16(b[0:2]) != 1 || binary.BigEndian.Uint16(b[2:4]) != 0x0800 {
		return errARPNotIPv4
	}
	if b[4] != 6 || b[5] != 4 {
		return errARPLengths
	}
	copy(o.SenderMAC[:], b[8:14])
	o.Sender = netip.AddrFrom4([4]byte(b[14:18]))
	copy(o.TargetMAC[:], b[18:24])
	o.Target = netip.AddrFrom4([4]byte(b[24:28]))
	switch binary.BigEndian.Uint16(b[6:8]) {
	case 1:
		switch {
		case o.Sender.IsUnspecified():
			o.Kind = KindProbe
		case o.Sender == o.Target:
			o.Kind = KindAnnouncement
		default:
			o.Kind = KindWhoHas
		}
	case 2:
		if o.Sender == o.Target {
			o.Kind = KindGratuitousReply
		} else {
			o.Kind = KindReply
		}
	default:
		return errARPOp
	}
	return nil
}

func decodeIPv6(o *Observation, b []byte) error {
	if len(b) < wire.IPv6HeaderLen {
		return errIPv6Short
	}
	if b[0]>>4 != 6 {
		return errIPv6Version
	}
	plen := int(binary.BigEndian.Uint16(b[4:6]))
	if plen == 0 {
		return errIPv6Empty
	}
	end := wire.IPv6HeaderLen + plen
	if end > len(b) {
		return errIPv6Payload
	}
	// Bytes past the payload are Ethernet padding.
	b = b[:end]
	next, off := b[6], wire.IPv6HeaderLen
	for n := 0; next != protoICMPv6; n++ {
		if n == maxExtHeaders {
			return errExtTooMany
		}
		if off+2 > end {
			return errExtShort
		}
		var hlen int
		switch next {
		case protoHopByHop:
			if n != 0 {
				return errHopByHopLate
			}
			hlen = (int(b[off+1]) + 1) * 8
		case protoDestOptions, protoRouting:
			hlen = (int(b[off+1]) + 1) * 8
		case protoAH:
			hlen = (int(b[off+1]) + 2) * 4
		case protoFragment:
			return errFragment
		default:
			return errNotICMPv6
		}
		next = b[off]
		off += hlen
		if off > end {
			return errExtShort
		}
	}
	icmp := b[off:end]
	if len(icmp) < 4 {
		return errICMPShort
	}
	typ := icmp[0]
	if typ != wire.TypeNeighborSolicitation && typ != wire.TypeNeighborAdvertisement {
		return errNotNDP
	}
	// RFC 4861 sections 7.1.1 and 7.1.2, in its order.
	if b[7] != 255 {
		return errHopLimit
	}
	o.Sender = netip.AddrFrom16([16]byte(b[8:24]))
	o.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	if wire.Checksum(o.Sender, o.Dst, icmp) != 0 {
		return errChecksum
	}
	if icmp[1] != 0 {
		return errCode
	}
	if len(icmp) < ndpMinLen {
		return errNDPShort
	}
	o.Target = netip.AddrFrom16([16]byte(icmp[8:24]))
	if o.Target.IsMulticast() {
		return errTargetMcast
	}
	want := byte(optSourceLinkLayer)
	if typ == wire.TypeNeighborAdvertisement {
		want = optTargetLinkLayer
	}
	lla, found, err := linkLayerOption(icmp[ndpMinLen:], want)
	if err != nil {
		return err
	}
	if typ == wire.TypeNeighborSolicitation {
		o.SenderMAC, o.LinkLayerOption = lla, found
		switch {
		case o.Sender.IsUnspecified():
			if !wire.IsSolicitedNode(o.Dst) {
				return errDADDst
			}
			if found {
				return errDADLinkLayer
			}
			o.Kind = KindDAD
		case o.Dst.IsMulticast():
			o.Kind = KindSolicitation
		default:
			o.Kind = KindUnreachability
		}
		return nil
	}
	flags := icmp[4]
	o.Router, o.Solicited, o.Override = flags&0x80 != 0, flags&0x40 != 0, flags&0x20 != 0
	if o.Solicited && o.Dst.IsMulticast() {
		return errSolicitedMcast
	}
	o.TargetMAC, o.LinkLayerOption = lla, found
	o.Kind = KindAdvertisement
	return nil
}

// linkLayerOption walks NDP options and returns the first link-layer
// address option of type want. Every option is checked, as RFC 4861 asks,
// even after the one wanted.
func linkLayerOption(opts []byte, want byte) (mac MAC, found bool, err error) {
	for len(opts) > 0 {
		if len(opts) < 2 {
			return MAC{}, false, errOptionShort
		}
		n := int(opts[1]) * 8
		if n == 0 {
			return MAC{}, false, errOptionZero
		}
		if n > len(opts) {
			return MAC{}, false, errOptionShort
		}
		// Link-layer options for Ethernet are 8 bytes; a longer one
		// (another link type's) still starts with the address.
		if opts[0] == want && !found {
			copy(mac[:], opts[2:8])
			found = true
		}
		opts = opts[n:]
	}
	return mac, found, nil
}
