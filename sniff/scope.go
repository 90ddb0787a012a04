package sniff

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/internal/wire"
)

// A capture can be narrowed to the frames about a set of addresses (the ones
// the agent holds), so that a flood of who-has for other addresses is
// dropped in the kernel and never wakes the process. The kernel part checks
// 32 bits of each address (all of an IPv4 address, the last word of an IPv6
// one); Run checks the whole address of what it decodes.

// MaxScopeAddrs bounds the addresses a capture can be narrowed to in the
// kernel, with room left for the base filter and a user's expression in
// Linux's 4,096 instructions: four per address (two addresses of each
// frame are checked). Beyond it the capture takes all neighbour traffic.
const MaxScopeAddrs = 900

// Scope is what a capture is narrowed to (Capture.NarrowTo).
type Scope struct {
	// Addrs are the addresses whose frames all pass: ARP whose sender or
	// target protocol address is one of them, neighbor solicitations and
	// advertisements whose target or IPv6 source is.
	Addrs []netip.Addr
	// Claims are the addresses of which only the frames that claim them,
	// or come from them, pass: ARP whose sender protocol address is one
	// of them, solicitations whose IPv6 source is, advertisements whose
	// target or source is. The requests for them are left out: an
	// in-kernel responder that answers them remembers who asked
	// (announce.KernelResponder.Askers), and a capture that saw them
	// would wake for each. Competing claimers are still seen. An address
	// in both lists is in Addrs.
	Claims []netip.Addr
}

// words returns the last 32 bits of each IPv4 and IPv6 address in addrs,
// once each, leaving out those in skip4 and skip6.
func words(addrs []netip.Addr, skip4, skip6 map[uint32]bool) (v4, v6 []uint32) {
	seen4, seen6 := map[uint32]bool{}, map[uint32]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		b := a.As16()
		w := binary.BigEndian.Uint32(b[12:])
		switch {
		case a.Is4() && !seen4[w] && !skip4[w]:
			seen4[w] = true
			v4 = append(v4, w)
		case a.Is6() && !seen6[w] && !skip6[w]:
			seen6[w] = true
			v6 = append(v6, w)
		}
	}
	return v4, v6
}

func set(ws []uint32) map[uint32]bool {
	m := make(map[uint32]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}

// scopeProgram returns a classic BPF program that drops every frame that is
// not about one of sc's addresses and runs next, the rest of the filter, on
// those that are: for Addrs, ARP frames whose sender or target protocol
// address matches, and neighbor solicitations and advertisements right
// behind the IPv6 header whose target or source matches; for Claims, ARP
// whose sender matches, solicitations whose source does, advertisements
// whose target or source does. An IPv6 frame with extension headers before
// its ICMPv6 header goes on to next unchecked (it is rare, and Run checks
// what it decodes). next's own jumps are relative and stay valid.
func scopeProgram(sc Scope, next []bpf.Instruction) ([]bpf.Instruction, error) {
	v4, v6 := words(sc.Addrs, nil, nil)
	// A claim's word that an address of Addrs shares is checked already.
	c4, c6 := words(sc.Claims, set(v4), set(v6))
	if n := len(v4) + len(v6) + len(c4) + len(c6); n > MaxScopeAddrs {
		return nil, fmt.Errorf("%d addresses are more than the %d a capture can be narrowed to in the kernel", n, MaxScopeAddrs)
	}
	// Layout: the dispatch on the EtherType; the IPv6 part; the ARP part;
	// next. Every conditional jump skips at most one instruction; longer
	// jumps are unconditional (32-bit offsets).
	const (
		ndTargetLo = wire.NDTargetOffset + 12 // the last word of a target
		ipv6SrcLo  = wire.IPv6SrcOffset + 12  // the last word of a source
	)
	var a wire.Asm
	match := func(off uint32, words ...[]uint32) {
		a.Load(off, 4)
		for _, ws := range words {
			for _, w := range ws {
				a.JumpEqFar(w, "next")
			}
		}
	}
	a.Load(wire.EtherTypeOffset, 2)
	a.JumpEqFar(wire.EtherTypeARP, "arp")
	a.ReturnNe(wire.EtherTypeIPv6, wire.FilterDrop)
	a.Load(wire.IPv6NextHeaderOffset, 1)
	a.JumpEq(wire.ProtoICMPv6, "icmpv6", "")
	a.Jump("next") // extension headers: next decides, Run checks
	a.Label("icmpv6")
	a.Load(wire.ICMPv6Offset, 1)
	// A solicitation: its target against Addrs alone.
	a.JumpEqFar(wire.TypeNeighborSolicitation, "target")
	a.ReturnNe(wire.TypeNeighborAdvertisement, wire.FilterDrop)
	// An advertisement claims its target: against Claims here, against
	// Addrs with the solicitations'.
	match(ndTargetLo, c6)
	a.Label("target")
	match(ndTargetLo, v6)
	match(ipv6SrcLo, v6, c6)
	a.Add(bpf.RetConstant{Val: wire.FilterDrop})
	a.Label("arp")
	match(wire.ARPTargetIPOffset, v4)
	match(wire.ARPSenderIPOffset, v4, c4)
	a.Add(bpf.RetConstant{Val: wire.FilterDrop})
	a.Label("next")
	a.Add(next...)
	return a.Program()
}

// scopeSet is what a capture is narrowed to, for Run's check of the whole
// address.
type scopeSet struct {
	addrs, claims map[netip.Addr]struct{}
}

func newScopeSet(sc Scope) *scopeSet {
	s := &scopeSet{addrs: make(map[netip.Addr]struct{}, len(sc.Addrs)), claims: make(map[netip.Addr]struct{}, len(sc.Claims))}
	for _, a := range sc.Addrs {
		s.addrs[a.Unmap()] = struct{}{}
	}
	for _, a := range sc.Claims {
		if _, ok := s.addrs[a.Unmap()]; !ok {
			s.claims[a.Unmap()] = struct{}{}
		}
	}
	return s
}

// about reports whether o is about an address of s: for Addrs, its target
// or its sender (the ARP sender protocol address, the IPv6 source); for
// Claims, its sender, or the target of an advertisement.
func (s *scopeSet) about(o *Observation) bool {
	if _, ok := s.addrs[o.Target]; ok {
		return true
	}
	if _, ok := s.addrs[o.Sender]; ok {
		return true
	}
	if _, ok := s.claims[o.Sender]; ok {
		return true
	}
	if o.Kind == KindAdvertisement {
		_, ok := s.claims[o.Target]
		return ok
	}
	return false
}
