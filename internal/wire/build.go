package wire

import (
	"encoding/binary"
	"net/netip"
)

// PutARP writes into b an untagged Ethernet frame from src to dst carrying
// the ARP packet a, and returns its length, ARPLen; it writes nothing and
// returns 0 when b is shorter than that. It pads nothing: a sender that
// pads to MinFrameLen zeroes the rest of its buffer itself.
func PutARP(b []byte, dst, src MAC, a *ARP) int {
	if len(b) < ARPLen {
		return 0
	}
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:], EtherTypeARP)
	p := b[EthernetHeaderLen:ARPLen]
	binary.BigEndian.PutUint16(p[0:], 1)
	binary.BigEndian.PutUint16(p[2:], 0x0800)
	p[4], p[5] = 6, 4
	binary.BigEndian.PutUint16(p[6:], a.Op)
	copy(p[8:14], a.SenderMAC[:])
	s, t := a.SenderIP.As4(), a.TargetIP.As4()
	copy(p[14:18], s[:])
	copy(p[18:24], a.TargetMAC[:])
	copy(p[24:28], t[:])
	return ARPLen
}

// PutND writes into b an untagged Ethernet frame from src to dst carrying
// an IPv6 packet with hop limit 255 and the solicitation or advertisement
// n, checksum included, and returns its length: NDLen, or
// NDLenWithLinkLayer when n.HasLinkLayer asks for the link-layer option (a
// source one in a solicitation, a target one in an advertisement). It
// writes nothing and returns 0 when b is too short or n.Type is neither
// message. The advertisement's flags are written; a solicitation has none.
func PutND(b []byte, dst, src MAC, n *ND) int {
	size := NDLen
	if n.HasLinkLayer {
		size = NDLenWithLinkLayer
	}
	if len(b) < size || (n.Type != TypeNeighborSolicitation && n.Type != TypeNeighborAdvertisement) {
		return 0
	}
	b = b[:size]
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:], EtherTypeIPv6)
	ip := b[EthernetHeaderLen:]
	ip[0], ip[1], ip[2], ip[3] = 6<<4, 0, 0, 0
	binary.BigEndian.PutUint16(ip[4:], uint16(size-ICMPv6Offset))
	ip[6], ip[7] = ProtoICMPv6, 255
	s16, d16, t16 := n.Src.As16(), n.Dst.As16(), n.Target.As16()
	copy(ip[8:24], s16[:])
	copy(ip[24:40], d16[:])
	m := ip[IPv6HeaderLen:]
	m[0], m[1], m[2], m[3] = n.Type, 0, 0, 0
	m[4], m[5], m[6], m[7] = 0, 0, 0, 0
	if n.Type == TypeNeighborAdvertisement {
		if n.Router {
			m[4] |= 0x80
		}
		if n.Solicited {
			m[4] |= 0x40
		}
		if n.Override {
			m[4] |= 0x20
		}
	}
	copy(m[8:24], t16[:])
	if n.HasLinkLayer {
		m[24] = optSourceLinkLayer
		if n.Type == TypeNeighborAdvertisement {
			m[24] = optTargetLinkLayer
		}
		m[25] = 1
		copy(m[26:32], n.LinkLayer[:])
	}
	binary.BigEndian.PutUint16(m[2:], Checksum(n.Src, n.Dst, m))
	return size
}

// Advertisement is the advertisement vip sends for target from mac, to dst:
// the override flag set, because vip owns the address rather than proxying
// for it, and mac as the target link-layer address.
func Advertisement(mac MAC, target, dst netip.Addr, solicited bool) ND {
	return ND{
		Type: TypeNeighborAdvertisement, Src: target, Dst: dst, Target: target,
		Solicited: solicited, Override: true, LinkLayer: mac, HasLinkLayer: true,
	}
}

// DADProbe is the duplicate address detection probe for target (RFC 4862
// section 5.4.2): a solicitation from ::, to target's solicited-node group,
// without a source link-layer option. Whoever holds target answers it to
// all nodes. GroupMAC(p.Dst) is where it goes.
func DADProbe(target netip.Addr) ND {
	return ND{Type: TypeNeighborSolicitation, Src: netip.IPv6Unspecified(), Dst: SolicitedNode(target), Target: target}
}

// ARPAnnouncement is a gratuitous ARP for addr from mac (RFC 5227 section
// 2.3): sender IP = target IP = addr, as a request with a zero target MAC
// or, for devices that only learn from replies, as a reply with a
// broadcast target MAC. Either goes to broadcast.
func ARPAnnouncement(mac MAC, addr netip.Addr, op uint16) ARP {
	a := ARP{Op: op, SenderMAC: mac, SenderIP: addr, TargetIP: addr}
	if op == OpReply {
		a.TargetMAC = BroadcastMAC
	}
	return a
}

// ARPProbe is an RFC 5227 probe for addr from mac: an ARP request from sender
// IP 0.0.0.0 with a zero target MAC, sent to broadcast. Whoever holds addr
// answers it.
func ARPProbe(mac MAC, addr netip.Addr) ARP {
	return ARP{Op: OpRequest, SenderMAC: mac, SenderIP: netip.IPv4Unspecified(), TargetIP: addr}
}
