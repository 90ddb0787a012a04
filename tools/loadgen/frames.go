package loadgen

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/internal/wire"
)

// Offsets in an untagged Ethernet frame, for the kernel filters only: the
// frames themselves are built and read by the codec (internal/wire).
const (
	offEtherType = 12
	offARPOp     = wire.EthernetHeaderLen + 6
	offIPv6      = wire.EthernetHeaderLen
	offICMP      = wire.ICMPv6Offset
)

// seqMAC returns the hardware address that carries sequence number seq of
// run: 02:run:seq, locally administered, unicast.
func seqMAC(run uint8, seq uint32) [6]byte {
	return [6]byte{0x02, run, byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq)}
}

// seqFrom returns the sequence number a hardware address of run carries.
func seqFrom(run uint8, mac []byte) (uint32, bool) {
	if len(mac) < 6 || mac[0] != 0x02 || mac[1] != run {
		return 0, false
	}
	return binary.BigEndian.Uint32(mac[2:6]), true
}

// request is a request frame built once and built again in place for each
// sequence number, so that sending allocates nothing.
type request struct {
	frame   []byte
	v6      bool
	run     uint8
	sources int
	base    [16]byte // the first NDP source address
	src     wire.MAC // the generator's Ethernet address
	dst     wire.MAC // where requests go: broadcast, or the target's group
	arp     wire.ARP
	ns      wire.ND
}

// newRequest builds the request of cfg with sequence number 0.
func newRequest(cfg *Config, mac net.HardwareAddr) (*request, error) {
	src, ok := wire.MACOf(mac)
	if !ok {
		return nil, fmt.Errorf("build a request from %s: not an Ethernet address", mac)
	}
	r := &request{v6: cfg.Target.Is6(), run: cfg.Run, sources: cfg.Sources, src: src, base: cfg.Sender.As16()}
	if !r.v6 {
		r.dst = wire.BroadcastMAC
		r.arp = wire.ARP{Op: wire.OpRequest, SenderIP: cfg.Sender, TargetIP: cfg.Target}
		// Padded to Ethernet's minimum, as a kernel sends ARP.
		r.frame = make([]byte, wire.MinFrameLen)
	} else {
		group := wire.SolicitedNode(cfg.Target)
		r.dst = wire.GroupMAC(group)
		r.ns = wire.ND{Type: wire.TypeNeighborSolicitation, Src: cfg.Sender, Dst: group, Target: cfg.Target, HasLinkLayer: true}
		r.frame = make([]byte, wire.NDLenWithLinkLayer)
	}
	r.set(0)
	return r, nil
}

// source returns the NDP source address of request seq: the base plus seq
// modulo the pool size, added to its last 16 bits (Config.validate makes
// sure that never carries).
func (r *request) source(seq uint32) [16]byte {
	s := r.base
	k := uint16(seq % uint32(r.sources))
	binary.BigEndian.PutUint16(s[14:], binary.BigEndian.Uint16(s[14:])+k)
	return s
}

// set makes the frame request number seq.
func (r *request) set(seq uint32) []byte {
	mac := wire.MAC(seqMAC(r.run, seq))
	if !r.v6 {
		r.arp.SenderMAC = mac
		wire.PutARP(r.frame, r.dst, r.src, &r.arp)
		return r.frame
	}
	r.ns.Src, r.ns.LinkLayer = netip.AddrFrom16(r.source(seq)), mac
	wire.PutND(r.frame, r.dst, r.src, &r.ns)
	return r.frame
}

// seqOfRequest returns the sequence number a request frame of this run
// carries, as a transmit timestamp hands the frame back.
func (r *request) seqOfRequest(b []byte) (uint32, bool) {
	f, err := wire.Parse(b, wire.Answer)
	switch {
	case err != nil:
		return 0, false
	case !r.v6 && f.EtherType == wire.EtherTypeARP:
		return seqFrom(r.run, f.ARP.SenderMAC[:])
	case r.v6 && f.EtherType == wire.EtherTypeIPv6 && f.ND.HasLinkLayer:
		return seqFrom(r.run, f.ND.LinkLayer[:])
	}
	return 0, false
}

// reply is what a reply frame says.
type reply struct {
	seq uint32
	// from is the responder's Ethernet source address.
	from [6]byte
	// agrees is false when the reply names the request differently in two
	// places (target hardware address and Ethernet destination; or the
	// Ethernet destination and the IPv6 destination), which no correct
	// responder does.
	agrees bool
}

// parseReply decodes a reply to a request of r for target. It never
// allocates. A reply the codec refuses (a bad checksum, say) is none: no
// neighbour would take it as an answer either.
func (r *request) parseReply(b []byte, target netip.Addr) (reply, bool) {
	var rep reply
	f, err := wire.Parse(b, wire.Answer)
	if err != nil {
		return rep, false
	}
	seq, ok := seqFrom(r.run, f.EthDst[:])
	if !ok {
		return rep, false
	}
	rep.seq, rep.from = seq, f.EthSrc
	if !r.v6 {
		a := &f.ARP
		if f.EtherType != wire.EtherTypeARP || a.Op != wire.OpReply || a.SenderIP != target {
			return rep, false
		}
		tha, ok := seqFrom(r.run, a.TargetMAC[:])
		rep.agrees = ok && tha == seq && a.TargetIP == r.arp.SenderIP
		return rep, true
	}
	n := &f.ND
	if f.EtherType != wire.EtherTypeIPv6 || n.Type != wire.TypeNeighborAdvertisement || n.Target != target {
		return rep, false
	}
	rep.agrees = n.Solicited && n.Dst.As16() == r.source(seq)
	return rep, true
}

// replyFilter lets in only replies to this run's requests: ARP replies, or
// ICMPv6 neighbor advertisements, to a sequence address of the run.
func replyFilter(v6 bool, run uint8) []bpf.Instruction {
	prefix := uint32(0x0200) | uint32(run)
	if !v6 {
		return []bpf.Instruction{
			bpf.LoadAbsolute{Off: offEtherType, Size: 2},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.EtherTypeARP, SkipTrue: 5},
			bpf.LoadAbsolute{Off: offARPOp, Size: 2},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(arp.OperationReply), SkipTrue: 3},
			bpf.LoadAbsolute{Off: 0, Size: 2},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: prefix, SkipTrue: 1},
			bpf.RetConstant{Val: 0xffff},
			bpf.RetConstant{Val: 0},
		}
	}
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: offEtherType, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.EtherTypeIPv6, SkipTrue: 7},
		bpf.LoadAbsolute{Off: offIPv6 + 6, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 58, SkipTrue: 5},
		bpf.LoadAbsolute{Off: offICMP, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.TypeNeighborAdvertisement, SkipTrue: 3},
		bpf.LoadAbsolute{Off: 0, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: prefix, SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	}
}

// announcementOf reports whether f announces addr: an ARP request or reply
// with sender and target IP both addr, or an unsolicited neighbor
// advertisement of addr.
func announcementOf(b []byte, addr netip.Addr) bool {
	f, err := wire.Parse(b, wire.Answer)
	switch {
	case err != nil:
		return false
	case f.EtherType == wire.EtherTypeARP:
		return f.ARP.SenderIP == addr && f.ARP.TargetIP == addr
	default:
		return f.ND.Type == wire.TypeNeighborAdvertisement && !f.ND.Solicited && f.ND.Target == addr
	}
}
