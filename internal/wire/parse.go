package wire

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Mode says how much framing Parse reads around a message. What makes a
// message valid does not depend on it: only where the message may sit.
type Mode uint8

const (
	// Answer reads what the responder's sockets see: an untagged frame,
	// and for IPv6 the ICMPv6 message right after the IPv6 header, as the
	// kernel filter that feeds those sockets checks at fixed offsets. A
	// tagged frame, or one with extension headers, is ErrNotNeighbor.
	Answer Mode = iota
	// Capture also reads up to two VLAN tags and walks a short chain of
	// IPv6 extension headers to the ICMPv6 message, as the capture's
	// filter lets such frames in (a trunk port or a pcap file keeps the
	// tags; a neighbour may send a hop-by-hop header).
	Capture
)

// The classes of error Parse returns. Every error from Parse wraps exactly
// one of them; errors.Is tells them apart, and the message says what exactly
// was wrong.
var (
	// ErrNotNeighbor is a frame that is neither ARP for IPv4 over Ethernet
	// nor an IPv6 neighbor solicitation or advertisement (where the mode
	// reads it): other traffic, not a fault.
	ErrNotNeighbor = errors.New("not ARP or a neighbor solicitation or advertisement")
	// ErrTruncated is a frame that ends before the headers it announces.
	ErrTruncated = errors.New("truncated frame")
	// ErrMalformed is a frame whose fields contradict each other or the
	// protocol's layout.
	ErrMalformed = errors.New("malformed frame")
	// ErrInvalid is a neighbor solicitation or advertisement that RFC 4861
	// section 7.1 tells every receiver to discard (wrong hop limit, code or
	// checksum, a multicast target, ...). No neighbour acts on it.
	ErrInvalid = errors.New("invalid neighbor discovery message")
)

// parseError is one specific reason, wrapping its class. The reasons are
// made once, so that rejecting a frame allocates nothing.
type parseError struct {
	class error
	msg   string
}

func (e *parseError) Error() string { return e.msg }
func (e *parseError) Unwrap() error { return e.class }

func reason(class error, detail string) error {
	return &parseError{class: class, msg: class.Error() + ": " + detail}
}

var (
	errEthernet       = reason(ErrTruncated, "shorter than an Ethernet header")
	errVLAN           = reason(ErrTruncated, "ends inside a VLAN tag")
	errTagged         = reason(ErrNotNeighbor, "VLAN-tagged (the responder reads untagged frames)")
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
	errExtHeaders     = reason(ErrNotNeighbor, "IPv6 extension headers before ICMPv6 (the responder reads none)")
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
	errTargetMapped   = reason(ErrInvalid, "IPv4-mapped target address")
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

// IPv6 next-header values Parse walks or recognises.
const (
	ProtoHopByHop    = 0
	ProtoRouting     = 43
	ProtoFragment    = 44
	ProtoAH          = 51
	ProtoICMPv6      = 58
	ProtoDestOptions = 60
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

// Frame is a parsed frame: its Ethernet header, and ARP or ND by EtherType.
// It holds values, not slices of the frame, so it outlives the buffer.
type Frame struct {
	EthDst, EthSrc MAC
	// VLAN is the first tag's VLAN ID (Capture mode only), 0 untagged.
	VLAN uint16
	// EtherType is EtherTypeARP or EtherTypeIPv6 (the inner one when
	// tagged); it says which of ARP and ND is set.
	EtherType uint16
	ARP       ARP
	ND        ND
}

// ARP is an ARP packet for IPv4 over Ethernet.
type ARP struct {
	Op        uint16 // OpRequest or OpReply
	SenderMAC MAC
	SenderIP  netip.Addr
	TargetMAC MAC
	TargetIP  netip.Addr
}

// ND is a neighbor solicitation or advertisement and the IPv6 header
// around it.
type ND struct {
	Type     uint8 // TypeNeighborSolicitation or TypeNeighborAdvertisement
	Src, Dst netip.Addr
	Target   netip.Addr
	// The advertisement's flags (RFC 4861 section 4.4).
	Router, Solicited, Override bool
	// LinkLayer is the source link-layer address option of a solicitation
	// or the target link-layer address option of an advertisement, when
	// HasLinkLayer says the message has one (the first, if several).
	LinkLayer    MAC
	HasLinkLayer bool
}

// IsDAD reports whether n is a duplicate address detection probe: a
// solicitation from the unspecified address.
func (n *ND) IsDAD() bool { return n.Type == TypeNeighborSolicitation && n.Src.IsUnspecified() }

// Parse reads one Ethernet frame carrying ARP for IPv4, or a neighbor
// solicitation or advertisement, and checks it as RFC 4861 section 7.1
// asks every receiver to. It is the one answer in vip to "is this a valid
// request": the responder and the capture both take what it accepts, and
// differ only in mode. It keeps no reference to frame, allocates nothing
// and never panics; a frame it cannot use yields an error wrapping one of
// ErrNotNeighbor, ErrTruncated, ErrMalformed or ErrInvalid.
func Parse(frame []byte, mode Mode) (f Frame, err error) {
	if len(frame) < EthernetHeaderLen {
		return Frame{}, errEthernet
	}
	f.EthDst, f.EthSrc = MAC(frame[0:6]), MAC(frame[6:12])
	etherType := binary.BigEndian.Uint16(frame[12:14])
	b := frame[EthernetHeaderLen:]
	for tags := 0; etherType == etherTypeDot1Q || etherType == etherTypeDot1AD || etherType == etherTypeQinQ; tags++ {
		if mode == Answer {
			return Frame{}, errTagged
		}
		if tags == 2 {
			return Frame{}, errTooManyTags
		}
		if len(b) < 4 {
			return Frame{}, errVLAN
		}
		if tags == 0 {
			f.VLAN = binary.BigEndian.Uint16(b[0:2]) & 0x0fff
		}
		etherType = binary.BigEndian.Uint16(b[2:4])
		b = b[4:]
	}
	f.EtherType = etherType
	switch etherType {
	case EtherTypeARP:
		err = parseARP(&f.ARP, b)
	case EtherTypeIPv6:
		err = parseIPv6(&f.ND, b, mode)
	default:
		err = errEtherType
	}
	if err != nil {
		return Frame{}, err
	}
	return f, nil
}

func parseARP(a *ARP, b []byte) error {
	if len(b) < arpLen {
		return errARPShort
	}
	if binary.BigEndian.Uint16(b[0:2]) != 1 || binary.BigEndian.Uint16(b[2:4]) != 0x0800 {
		return errARPNotIPv4
	}
	if b[4] != 6 || b[5] != 4 {
		return errARPLengths
	}
	a.Op = binary.BigEndian.Uint16(b[6:8])
	if a.Op != OpRequest && a.Op != OpReply {
		return errARPOp
	}
	a.SenderMAC = MAC(b[8:14])
	a.SenderIP = netip.AddrFrom4([4]byte(b[14:18]))
	a.TargetMAC = MAC(b[18:24])
	a.TargetIP = netip.AddrFrom4([4]byte(b[24:28]))
	return nil
}

// icmpOffset walks the IPv6 header b (trimmed to its payload) and, in
// Capture mode, its extension headers, to the ICMPv6 message.
func icmpOffset(b []byte, mode Mode) (int, error) {
	next, off, end := b[6], IPv6HeaderLen, len(b)
	for n := 0; next != ProtoICMPv6; n++ {
		if mode == Answer {
			if isExtHeader(next) {
				return 0, errExtHeaders
			}
			return 0, errNotICMPv6
		}
		if n == maxExtHeaders {
			return 0, errExtTooMany
		}
		if off+2 > end {
			return 0, errExtShort
		}
		var hlen int
		switch next {
		case ProtoHopByHop:
			if n != 0 {
				return 0, errHopByHopLate
			}
			hlen = (int(b[off+1]) + 1) * 8
		case ProtoDestOptions, ProtoRouting:
			hlen = (int(b[off+1]) + 1) * 8
		case ProtoAH:
			hlen = (int(b[off+1]) + 2) * 4
		case ProtoFragment:
			return 0, errFragment
		default:
			return 0, errNotICMPv6
		}
		next = b[off]
		off += hlen
		if off > end {
			return 0, errExtShort
		}
	}
	return off, nil
}

func isExtHeader(next byte) bool {
	switch next {
	case ProtoHopByHop, ProtoRouting, ProtoFragment, ProtoAH, ProtoDestOptions:
		return true
	}
	return false
}

func parseIPv6(n *ND, b []byte, mode Mode) error {
	if len(b) < IPv6HeaderLen {
		return errIPv6Short
	}
	if b[0]>>4 != 6 {
		return errIPv6Version
	}
	plen := int(binary.BigEndian.Uint16(b[4:6]))
	if plen == 0 {
		return errIPv6Empty
	}
	end := IPv6HeaderLen + plen
	if end > len(b) {
		return errIPv6Payload
	}
	// Bytes past the payload are Ethernet padding.
	b = b[:end]
	off, err := icmpOffset(b, mode)
	if err != nil {
		return err
	}
	icmp := b[off:end]
	if len(icmp) < 4 {
		return errICMPShort
	}
	n.Type = icmp[0]
	if n.Type != TypeNeighborSolicitation && n.Type != TypeNeighborAdvertisement {
		return errNotNDP
	}
	// RFC 4861 sections 7.1.1 and 7.1.2, in its order.
	if b[7] != 255 {
		return errHopLimit
	}
	n.Src = netip.AddrFrom16([16]byte(b[8:24]))
	n.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	if Checksum(n.Src, n.Dst, icmp) != 0 {
		return errChecksum
	}
	if icmp[1] != 0 {
		return errCode
	}
	if len(icmp) < ndpMinLen {
		return errNDPShort
	}
	n.Target = netip.AddrFrom16([16]byte(icmp[8:24]))
	if n.Target.IsMulticast() {
		return errTargetMcast
	}
	// No neighbour holds an IPv4-mapped address on an IPv6 link (RFC
	// 4291 section 2.5.5.2): a solicitation for one is an IPv4 address in
	// disguise, and answering it would claim that address.
	if n.Target.Is4In6() {
		return errTargetMapped
	}
	want := byte(optSourceLinkLayer)
	if n.Type == TypeNeighborAdvertisement {
		want = optTargetLinkLayer
	}
	n.LinkLayer, n.HasLinkLayer, err = linkLayerOption(icmp[ndpMinLen:], want)
	if err != nil {
		return err
	}
	if n.Type == TypeNeighborSolicitation {
		if n.Src.IsUnspecified() {
			if !IsSolicitedNode(n.Dst) {
				return errDADDst
			}
			if n.HasLinkLayer {
				return errDADLinkLayer
			}
		}
		return nil
	}
	flags := icmp[4]
	n.Router, n.Solicited, n.Override = flags&0x80 != 0, flags&0x40 != 0, flags&0x20 != 0
	if n.Solicited && n.Dst.IsMulticast() {
		return errSolicitedMcast
	}
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
			mac = MAC(opts[2:8])
			found = true
		}
		opts = opts[n:]
	}
	return mac, found, nil
}
