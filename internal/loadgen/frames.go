package loadgen

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/internal/wire"
)

// Offsets in an untagged Ethernet frame.
const (
	offEtherType = 12
	offARPOp     = 20
	offARPSHA    = 22
	offARPSPA    = 28
	offARPTHA    = 32
	offARPTPA    = 38
	arpLen       = 42
	offIPv6      = wire.EthernetHeaderLen
	offIPv6Src   = offIPv6 + 8
	offIPv6Dst   = offIPv6 + 24
	offICMP      = wire.ICMPv6Offset
	offTarget    = offICMP + 8
	offNSOption  = offICMP + 24
	nsLen        = offNSOption + 8
	naMinLen     = offICMP + 24
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

// request is a request frame built once and patched for each sequence
// number, so that sending allocates nothing.
type request struct {
	frame   []byte
	v6      bool
	run     uint8
	sources int
	base    [16]byte // the first NDP source address
	dst     netip.Addr
}

// newRequest builds the request of cfg with sequence number 0.
func newRequest(cfg *Config, mac net.HardwareAddr) (*request, error) {
	r := &request{v6: cfg.Target.Is6(), run: cfg.Run, sources: cfg.Sources}
	seq := seqMAC(cfg.Run, 0)
	var err error
	if !r.v6 {
		r.frame, err = wire.ARPFrame(wire.Broadcast, mac, arp.OperationRequest, seq[:], cfg.Sender,
			net.HardwareAddr{0, 0, 0, 0, 0, 0}, cfg.Target)
		if err != nil {
			return nil, fmt.Errorf("build ARP request: %w", err)
		}
		return r, nil
	}
	group, err := ndp.SolicitedNodeMulticast(cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("solicited-node group of %s: %w", cfg.Target, err)
	}
	r.dst = group
	r.base = cfg.Sender.As16()
	ns := &ndp.NeighborSolicitation{
		TargetAddress: cfg.Target,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: seq[:]}},
	}
	r.frame, err = wire.NDPFrame(wire.MulticastMAC(group), mac, cfg.Sender, group, ns)
	if err != nil {
		return nil, fmt.Errorf("build neighbor solicitation: %w", err)
	}
	if len(r.frame) != nsLen || r.frame[offNSOption] != 1 {
		return nil, fmt.Errorf("neighbor solicitation: got %d bytes, want %d with the source link-layer option last", len(r.frame), nsLen)
	}
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
	mac := seqMAC(r.run, seq)
	f := r.frame
	if !r.v6 {
		copy(f[offARPSHA:], mac[:])
		return f
	}
	src := r.source(seq)
	copy(f[offIPv6Src:], src[:])
	copy(f[offNSOption+2:], mac[:])
	icmp := f[offICMP:]
	icmp[2], icmp[3] = 0, 0
	binary.BigEndian.PutUint16(icmp[2:], wire.Checksum(netip.AddrFrom16(src), r.dst, icmp))
	return f
}

// seqOfRequest returns the sequence number a request frame of this run
// carries, as a transmit timestamp hands the frame back.
func (r *request) seqOfRequest(f []byte) (uint32, bool) {
	if !r.v6 {
		if len(f) < arpLen || binary.BigEndian.Uint16(f[offEtherType:]) != wire.EtherTypeARP {
			return 0, false
		}
		return seqFrom(r.run, f[offARPSHA:offARPSHA+6])
	}
	if len(f) < nsLen || binary.BigEndian.Uint16(f[offEtherType:]) != wire.EtherTypeIPv6 {
		return 0, false
	}
	return seqFrom(r.run, f[offNSOption+2:offNSOption+8])
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
// allocates.
func (r *request) parseReply(f []byte, target netip.Addr) (reply, bool) {
	var rep reply
	if len(f) < 14 {
		return rep, false
	}
	seq, ok := seqFrom(r.run, f[0:6])
	if !ok {
		return rep, false
	}
	rep.seq = seq
	copy(rep.from[:], f[6:12])
	if !r.v6 {
		if len(f) < arpLen || binary.BigEndian.Uint16(f[offEtherType:]) != wire.EtherTypeARP ||
			binary.BigEndian.Uint16(f[offARPOp:]) != uint16(arp.OperationReply) {
			return rep, false
		}
		t4 := target.As4()
		if [4]byte(f[offARPSPA:offARPSPA+4]) != t4 {
			return rep, false
		}
		tha, ok := seqFrom(r.run, f[offARPTHA:offARPTHA+6])
		rep.agrees = ok && tha == seq && [4]byte(f[offARPTPA:offARPTPA+4]) == [4]byte(r.frame[offARPSPA:offARPSPA+4])
		return rep, true
	}
	if len(f) < naMinLen || binary.BigEndian.Uint16(f[offEtherType:]) != wire.EtherTypeIPv6 ||
		f[offIPv6+6] != 58 || f[offICMP] != wire.TypeNeighborAdvertisement {
		return rep, false
	}
	if [16]byte(f[offTarget:offTarget+16]) != target.As16() {
		return rep, false
	}
	solicited := f[offICMP+4]&0x40 != 0
	rep.agrees = solicited && [16]byte(f[offIPv6Dst:offIPv6Dst+16]) == r.source(seq)
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
func announcementOf(f []byte, addr netip.Addr) bool {
	if len(f) < 14 {
		return false
	}
	switch binary.BigEndian.Uint16(f[offEtherType:]) {
	case wire.EtherTypeARP:
		if !addr.Is4() || len(f) < arpLen {
			return false
		}
		a := addr.As4()
		return [4]byte(f[offARPSPA:offARPSPA+4]) == a && [4]byte(f[offARPTPA:offARPTPA+4]) == a
	case wire.EtherTypeIPv6:
		if !addr.Is6() || len(f) < naMinLen || f[offIPv6+6] != 58 || f[offICMP] != wire.TypeNeighborAdvertisement {
			return false
		}
		return f[offICMP+4]&0x40 == 0 && [16]byte(f[offTarget:offTarget+16]) == addr.As16()
	}
	return false
}
