package sniff

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/net/bpf"
)

// A capture can be narrowed to the frames about a set of addresses (the ones
// the agent holds), so that a flood of who-has for other addresses is
// dropped in the kernel and never wakes the process. The kernel part checks
// 32 bits of each address (all of an IPv4 address, the last word of an IPv6
// one); Run checks the whole address of what it decodes.

// Offsets in an untagged Ethernet frame.
const (
	offEtherType = 12
	offARPSPA    = 28
	offARPTPA    = 38
	offIPv6Next  = 14 + 6
	offIPv6SrcLo = 14 + 8 + 12 // the last word of the IPv6 source
	offICMPType  = 14 + 40     // right behind an IPv6 header without extensions
	offNDTarget  = 14 + 40 + 8 // a solicitation's or advertisement's target
	offNDTargLo  = offNDTarget + 12
	bpfRetDrop   = uint32(0) // classic BPF: keep no byte of the frame
)

// MaxScopeAddrs bounds the addresses a capture can be narrowed to in the
// kernel, with room left for the base filter and a user's expression in
// Linux's 4,096 instructions: four per address (two addresses of each
// frame are checked). Beyond it the capture takes all neighbour traffic.
const MaxScopeAddrs = 900

// scopeProgram returns a classic BPF program that drops every frame that is
// not about one of addrs and runs next, the rest of the filter, on those
// that are: ARP frames whose sender or target protocol address matches, and
// neighbor solicitations and advertisements right behind the IPv6 header
// whose target or source matches. An IPv6 frame with extension headers
// before its ICMPv6 header goes on to next unchecked (it is rare, and Run
// checks what it decodes). next's own jumps are relative and stay valid.
func scopeProgram(addrs []netip.Addr, next []bpf.Instruction) ([]bpf.Instruction, error) {
	var v4, v6 []uint32
	seen4, seen6 := map[uint32]bool{}, map[uint32]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		b := a.As16()
		w := binary.BigEndian.Uint32(b[12:])
		switch {
		case a.Is4() && !seen4[w]:
			seen4[w] = true
			v4 = append(v4, w)
		case a.Is6() && !seen6[w]:
			seen6[w] = true
			v6 = append(v6, w)
		}
	}
	if n := len(v4) + len(v6); n > MaxScopeAddrs {
		return nil, fmt.Errorf("%d addresses are more than the %d a capture can be narrowed to in the kernel", n, MaxScopeAddrs)
	}
	// Layout: the dispatch on the EtherType; the IPv6 part; the ARP part;
	// next. Every conditional jump skips at most one instruction; longer
	// jumps are unconditional (32-bit offsets), to labels resolved below.
	var prog []bpf.Instruction
	type fixup struct{ at, label int }
	var fix []fixup
	const (
		labelARP = iota
		labelNext
	)
	jumpTo := func(label int) {
		fix = append(fix, fixup{len(prog), label})
		prog = append(prog, bpf.Jump{})
	}
	match := func(off uint32, words []uint32) {
		prog = append(prog, bpf.LoadAbsolute{Off: off, Size: 4})
		for _, w := range words {
			prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: w, SkipFalse: 1})
			jumpTo(labelNext)
		}
	}
	prog = append(prog,
		bpf.LoadAbsolute{Off: offEtherType, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x0806, SkipFalse: 1},
	)
	jumpTo(labelARP)
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x86dd, SkipTrue: 1},
		bpf.RetConstant{Val: bpfRetDrop},
		bpf.LoadAbsolute{Off: offIPv6Next, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 58, SkipTrue: 1},
	)
	jumpTo(labelNext) // extension headers: next decides, Run checks
	prog = append(prog,
		bpf.LoadAbsolute{Off: offICMPType, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 135, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 136, SkipTrue: 1},
		bpf.RetConstant{Val: bpfRetDrop},
	)
	match(offNDTargLo, v6)
	match(offIPv6SrcLo, v6)
	prog = append(prog, bpf.RetConstant{Val: bpfRetDrop})
	arp := len(prog)
	match(offARPTPA, v4)
	match(offARPSPA, v4)
	prog = append(prog, bpf.RetConstant{Val: bpfRetDrop})
	nextAt := len(prog)
	for _, f := range fix {
		to := arp
		if f.label == labelNext {
			to = nextAt
		}
		prog[f.at] = bpf.Jump{Skip: uint32(to - f.at - 1)}
	}
	return append(prog, next...), nil
}

// scopeSet is the set of addresses a capture is narrowed to, for Run's
// check of the whole address.
type scopeSet map[netip.Addr]struct{}

func newScopeSet(addrs []netip.Addr) scopeSet {
	s := make(scopeSet, len(addrs))
	for _, a := range addrs {
		s[a.Unmap()] = struct{}{}
	}
	return s
}

// about reports whether o is about an address in s: its target, or its
// sender (the ARP sender protocol address, the IPv6 source).
func (s scopeSet) about(o *Observation) bool {
	if _, ok := s[o.Target]; ok {
		return true
	}
	_, ok := s[o.Sender]
	return ok
}
