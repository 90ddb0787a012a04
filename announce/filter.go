package announce

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/internal/wire"
)

// Kernel filters. The static ones let only requests in; once addresses are
// held, a filter that also checks the target lets in only requests for them
// (the last 32 bits of an IPv6 target: the rest is checked here), so a flood
// for other addresses never wakes the reader. Two instructions per address
// keep every jump short; past maxFilterAddrs the static filter stays.
const maxFilterAddrs = 2000

// arpRequestChecks jumps to "drop" unless the frame is an Ethernet/IPv4
// ARP request, so that replies and other hardware types never wake the
// reader.
func arpRequestChecks(a *wire.Asm) {
	a.Load(wire.EtherTypeOffset, 2)
	a.JumpEq(wire.EtherTypeARP, "", "drop")
	a.Load(wire.ARPHardwareOffset, 2)
	a.JumpEq(1, "", "drop") // Ethernet
	a.Load(wire.ARPProtocolOffset, 2)
	a.JumpEq(0x0800, "", "drop") // IPv4
	a.Load(wire.ARPLengthsOffset, 2)
	a.JumpEq(0x0604, "", "drop") // lengths 6 and 4
	a.Load(wire.ARPOpOffset, 2)
	a.JumpEq(wire.OpRequest, "", "drop")
}

// solicitationChecks jumps to "drop" unless the frame is IPv6 carrying an
// ICMPv6 neighbor solicitation directly after the IPv6 header (NDP
// messages carry no extension headers), so ordinary IPv6 traffic never
// wakes the reader.
func solicitationChecks(a *wire.Asm) {
	a.Load(wire.EtherTypeOffset, 2)
	a.JumpEq(wire.EtherTypeIPv6, "", "drop")
	a.Load(wire.IPv6NextHeaderOffset, 1)
	a.JumpEq(wire.ProtoICMPv6, "", "drop")
	a.Load(wire.ICMPv6Offset, 1)
	a.JumpEq(wire.TypeNeighborSolicitation, "", "drop")
}

// arpRequestFilter accepts the frames arpRequestChecks passes.
func arpRequestFilter() []bpf.Instruction { return staticFilter(arpRequestChecks) }

// solicitationFilter accepts the frames solicitationChecks passes.
func solicitationFilter() []bpf.Instruction { return staticFilter(solicitationChecks) }

// staticFilter accepts what checks passes.
func staticFilter(checks func(*wire.Asm)) []bpf.Instruction {
	var a wire.Asm
	checks(&a)
	a.Add(bpf.RetConstant{Val: wire.FilterAccept})
	a.Label("drop")
	a.Add(bpf.RetConstant{Val: wire.FilterDrop})
	return a.MustProgram()
}

// targetFilter builds the filter for one family: what checks passes, when
// the 32-bit word at off equals one of words.
func targetFilter(checks func(*wire.Asm), off uint32, words []uint32) []bpf.Instruction {
	var a wire.Asm
	checks(&a)
	// The checks' drop is right behind them, not behind the words, so
	// that every jump stays short however many words follow.
	a.Jump("words")
	a.Label("drop")
	a.Add(bpf.RetConstant{Val: wire.FilterDrop})
	a.Label("words")
	a.Load(off, 4)
	for _, w := range words {
		a.ReturnEq(w, wire.FilterAccept)
	}
	a.Add(bpf.RetConstant{Val: wire.FilterDrop})
	return a.MustProgram()
}

// setFiltersLocked installs on each socket the filter for the held
// addresses it answers.
func (r *socketResponder) setFiltersLocked(held map[netip.Addr]*held) error {
	var v4, v6 []uint32
	for a := range held {
		b := a.As16()
		w := binary.BigEndian.Uint32(b[12:16])
		if a.Is4() {
			v4 = append(v4, w)
		} else {
			v6 = append(v6, w)
		}
	}
	return errors.Join(
		setFilter(r.arpc, r.ifindex, arpRequestChecks, wire.ARPTargetIPOffset, v4),
		setFilter(r.ip6c, r.ifindex, solicitationChecks, wire.NDTargetOffset+12, v6),
	)
}

// setFilter attaches to c the filter of checks, narrowed to the targets
// whose last 32 bits are words, for the frames that arrive on interface
// ifindex itself.
func setFilter(c FrameConn, ifindex int, checks func(*wire.Asm), off uint32, words []uint32) error {
	s, ok := c.(interface {
		SetBPF([]bpf.RawInstruction) error
	})
	if !ok {
		return nil
	}
	var prog []bpf.Instruction
	if words = dedupe(words); len(words) <= maxFilterAddrs {
		prog = targetFilter(checks, off, words)
	} else {
		prog = staticFilter(checks)
	}
	raw, err := bpf.Assemble(wire.OwnFramesOnly(uint32(ifindex), prog))
	if err != nil {
		return err
	}
	return s.SetBPF(raw)
}

func dedupe(words []uint32) []uint32 {
	seen := make(map[uint32]bool, len(words))
	out := words[:0]
	for _, w := range words {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
