// Package wiretest builds and parses frames with mdlayher/arp, mdlayher/ethernet
// and mdlayher/ndp, not with internal/wire: it is the second opinion tests
// hold the codec to (an oracle), and a quick way for any package's tests to
// make a frame as a peer would. Nothing outside tests imports it.
package wiretest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"

	"github.com/vipctl/vip/internal/wire"
)

// MulticastMAC is wire.GroupMAC as a net.HardwareAddr.
func MulticastMAC(g netip.Addr) net.HardwareAddr {
	m := wire.GroupMAC(g)
	return m[:]
}

// protoICMPv6 is the IPv6 next-header value of ICMPv6.
const protoICMPv6 = 58

// ErrNotARP and the other Err values tell a caller why a frame was skipped.
var (
	ErrNotARP      = errors.New("not an IPv4-over-Ethernet ARP frame")
	ErrNotNDP      = errors.New("not an NDP frame")
	ErrTruncated   = errors.New("truncated frame")
	ErrHopLimit    = errors.New("hop limit is not 255")
	ErrChecksum    = errors.New("bad ICMPv6 checksum")
	ErrBadICMPCode = errors.New("ICMPv6 code is not 0")
	// ErrBadMessage is a neighbor solicitation or advertisement that passed
	// the IP and ICMP checks but whose body does not parse.
	ErrBadMessage = errors.New("malformed NDP message")
)

// ARPFrame builds an Ethernet frame to dst carrying an ARP packet with the
// given operation, sender and target.
func ARPFrame(dst, src net.HardwareAddr, op arp.Operation, senderMAC net.HardwareAddr, senderIP netip.Addr, targetMAC net.HardwareAddr, targetIP netip.Addr) ([]byte, error) {
	p, err := arp.NewPacket(op, senderMAC, senderIP, targetMAC, targetIP)
	if err != nil {
		return nil, fmt.Errorf("build ARP packet: %w", err)
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("marshal ARP packet: %w", err)
	}
	f := ethernet.Frame{Destination: dst, Source: src, EtherType: ethernet.EtherTypeARP, Payload: pb}
	return f.MarshalBinary()
}

// ARPAnnouncement builds the request form of a gratuitous ARP for addr
// (RFC 5227 announcement): sender IP = target IP = addr, target MAC zero,
// sent to broadcast.
func ARPAnnouncement(mac net.HardwareAddr, addr netip.Addr) ([]byte, error) {
	return ARPFrame(wire.Broadcast, mac, arp.OperationRequest, mac, addr, ZeroMAC, addr)
}

// ARPGratuitousReply builds the reply form of a gratuitous ARP for addr:
// sender IP = target IP = addr, target MAC broadcast, sent to broadcast. Some
// devices only update their tables from replies.
func ARPGratuitousReply(mac net.HardwareAddr, addr netip.Addr) ([]byte, error) {
	return ARPFrame(wire.Broadcast, mac, arp.OperationReply, mac, addr, wire.Broadcast, addr)
}

// ARPProbe builds an RFC 5227 probe for addr: an ARP request from sender
// IP 0.0.0.0, target MAC zero, broadcast. Whoever holds addr answers it.
func ARPProbe(mac net.HardwareAddr, addr netip.Addr) ([]byte, error) {
	return ARPFrame(wire.Broadcast, mac, arp.OperationRequest, mac, netip.IPv4Unspecified(), ZeroMAC, addr)
}

// DADSolicitation builds a duplicate-address-detection probe for target: a
// neighbor solicitation from ::, to target's solicited-node group, without
// a source link-layer option. Whoever holds target answers it to all nodes.
func DADSolicitation(mac net.HardwareAddr, target netip.Addr) ([]byte, error) {
	group, err := ndp.SolicitedNodeMulticast(target)
	if err != nil {
		return nil, fmt.Errorf("solicited-node group of %s: %w", target, err)
	}
	ns := &ndp.NeighborSolicitation{TargetAddress: target}
	return NDPFrame(MulticastMAC(group), mac, netip.IPv6Unspecified(), group, ns)
}

// ARPFrameInfo is a decoded ARP frame.
type ARPFrameInfo struct {
	EthDst, EthSrc net.HardwareAddr
	Packet         arp.Packet
}

// ParseARP decodes an Ethernet frame carrying an IPv4 ARP packet.
func ParseARP(frame []byte) (ARPFrameInfo, error) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil {
		return ARPFrameInfo{}, fmt.Errorf("%w: %v", ErrTruncated, err)
	}
	if f.EtherType != ethernet.EtherTypeARP {
		return ARPFrameInfo{}, ErrNotARP
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		return ARPFrameInfo{}, fmt.Errorf("%w: %v", ErrNotARP, err)
	}
	if p.HardwareType != 1 || p.ProtocolType != uint16(ethernet.EtherTypeIPv4) || p.HardwareAddrLength != 6 || p.IPLength != 4 {
		return ARPFrameInfo{}, ErrNotARP
	}
	return ARPFrameInfo{EthDst: f.Destination, EthSrc: f.Source, Packet: p}, nil
}

// NDPFrameInfo is a decoded Ethernet frame carrying an NDP message.
type NDPFrameInfo struct {
	EthDst, EthSrc net.HardwareAddr
	Src, Dst       netip.Addr
	HopLimit       uint8
	Message        ndp.Message
}

// ParseNDP decodes an Ethernet frame carrying an IPv6 packet with an NDP
// message directly after the IPv6 header. It checks what RFC 4861 section
// 7.1 asks every receiver to check of the IP and ICMP layers: hop limit 255,
// ICMP code 0 and a valid checksum.
func ParseNDP(frame []byte) (NDPFrameInfo, error) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil {
		return NDPFrameInfo{}, fmt.Errorf("%w: %v", ErrTruncated, err)
	}
	if f.EtherType != ethernet.EtherTypeIPv6 {
		return NDPFrameInfo{}, ErrNotNDP
	}
	b := f.Payload
	if len(b) < wire.IPv6HeaderLen {
		return NDPFrameInfo{}, ErrTruncated
	}
	if b[0]>>4 != 6 || b[6] != protoICMPv6 {
		return NDPFrameInfo{}, ErrNotNDP
	}
	plen := int(binary.BigEndian.Uint16(b[4:6]))
	if len(b) < wire.IPv6HeaderLen+plen || plen < 4 {
		return NDPFrameInfo{}, ErrTruncated
	}
	src := netip.AddrFrom16([16]byte(b[8:24]))
	dst := netip.AddrFrom16([16]byte(b[24:40]))
	icmp := b[wire.IPv6HeaderLen : wire.IPv6HeaderLen+plen]
	if icmp[0] != wire.TypeNeighborSolicitation && icmp[0] != wire.TypeNeighborAdvertisement {
		return NDPFrameInfo{}, ErrNotNDP
	}
	info := NDPFrameInfo{EthDst: f.Destination, EthSrc: f.Source, Src: src, Dst: dst, HopLimit: b[7]}
	if info.HopLimit != 255 {
		return info, ErrHopLimit
	}
	if icmp[1] != 0 {
		return info, ErrBadICMPCode
	}
	if wire.Checksum(src, dst, icmp) != 0 {
		return info, ErrChecksum
	}
	m, err := ndp.ParseMessage(icmp)
	if err != nil {
		return info, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	info.Message = m
	return info, nil
}

// NDPFrame builds an Ethernet frame to dstMAC carrying an IPv6 packet from
// src to dst with hop limit 255 and the NDP message m, checksum included.
func NDPFrame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, m ndp.Message) ([]byte, error) {
	icmp, err := ndp.MarshalMessageChecksum(m, src, dst)
	if err != nil {
		return nil, fmt.Errorf("marshal NDP message: %w", err)
	}
	b := make([]byte, wire.EthernetHeaderLen+wire.IPv6HeaderLen+len(icmp))
	copy(b[0:6], dstMAC)
	copy(b[6:12], srcMAC)
	binary.BigEndian.PutUint16(b[12:14], wire.EtherTypeIPv6)
	ip := b[wire.EthernetHeaderLen:]
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(icmp)))
	ip[6] = protoICMPv6
	ip[7] = 255
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	copy(ip[wire.IPv6HeaderLen:], icmp)
	return b, nil
}

// NeighborAdvertisement builds the frame vip sends to advertise that mac
// holds target. solicited sets the S flag; Override is always set, because
// vip owns the address rather than proxying for it.
func NeighborAdvertisement(dstMAC, mac net.HardwareAddr, target, dst netip.Addr, solicited bool) ([]byte, error) {
	na := &ndp.NeighborAdvertisement{
		Solicited:     solicited,
		Override:      true,
		TargetAddress: target,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac}},
	}
	return NDPFrame(dstMAC, mac, target, dst, na)
}

// SourceLinkLayer returns the source link-layer address option of an NDP
// message's options, or nil when it has none.
func SourceLinkLayer(opts []ndp.Option) net.HardwareAddr {
	for _, o := range opts {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Source {
			return lla.Addr
		}
	}
	return nil
}

// TargetLinkLayer returns the target link-layer address option of an NDP
// message's options, or nil when it has none.
func TargetLinkLayer(opts []ndp.Option) net.HardwareAddr {
	for _, o := range opts {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Target {
			return lla.Addr
		}
	}
	return nil
}
