package sniff

import (
	"fmt"
	"strings"

	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/internal/wire"
)

// BaseFilter returns the libpcap expression every capture starts from: ARP,
// and ICMPv6 neighbor solicitations (type 135) and advertisements (136)
// directly after the IPv6 header or behind one or two extension headers of
// the kinds a neighbor discovery message may carry (hop-by-hop options,
// destination options, routing). MLD reports, which come behind a
// hop-by-hop header, do not pass. Neither does a frame that still carries
// a VLAN tag when the filter runs; on Linux the kernel has taken the tag off
// by then, on the VLAN's own interface and on its parent alike.
//
// libpcap's "ip6 protochain 58" would follow any chain, but it compiles to
// a loop, which the kernel refuses; libpcap then filters in user space and
// every frame on the interface is copied to the process. The offsets here
// are spelled out instead, so the whole filter runs in the kernel.
//
// A live capture without a user's expression runs baseProgram, the same
// filter built here in classic BPF, so that it needs no libpcap; the
// expression is what a user's filter is ANDed with.
func BaseFilter() string {
	ext := func(next string) string {
		return fmt.Sprintf("(%[1]s == 0 or %[1]s == 60 or %[1]s == 43)", next)
	}
	ndp := func(off string) string {
		return fmt.Sprintf("(ip6[%[1]s] == 135 or ip6[%[1]s] == 136)", off)
	}
	// Where the header after the first and after the second extension
	// header starts; an extension header's length is in 8-byte units, not
	// counting the first 8 bytes.
	second := "40 + (ip6[41] + 1) * 8"
	third := fmt.Sprintf("%[1]s + (ip6[%[1]s + 1] + 1) * 8", second)
	return strings.Join([]string{
		"arp",
		fmt.Sprintf("(ip6[6] == 58 and %s)", ndp("40")),
		fmt.Sprintf("(%s and ip6[40] == 58 and %s)", ext("ip6[6]"), ndp(second)),
		fmt.Sprintf("(%s and %s and ip6[%s] == 58 and %s)", ext("ip6[6]"), ext("ip6[40]"), second, ndp(third)),
	}, " or ")
}

// extHeaders are the IPv6 next-header values of the extension headers
// BaseFilter follows.
var extHeaders = []uint32{wire.ProtoHopByHop, wire.ProtoDestOptions, wire.ProtoRouting}

// baseProgram is BaseFilter in classic BPF, keeping snaplen bytes of each
// frame it passes: the same frames pass, TestBaseProgramIsBaseFilter
// checks that against libpcap's compilation. Where the filter reads past
// the end of a frame the kernel drops the frame, as with libpcap's.
func baseProgram(snaplen uint32) ([]bpf.Instruction, error) {
	// Offsets of the IPv6 header's fields, and of the first extension
	// header's (right behind it), in an untagged frame.
	const (
		ipv6      = wire.EthernetHeaderLen
		firstNext = ipv6 + wire.IPv6HeaderLen // its next header
		firstLen  = firstNext + 1             // its length
	)
	var a wire.Asm
	a.Load(wire.EtherTypeOffset, 2)
	a.JumpEq(wire.EtherTypeARP, "accept", "")
	a.JumpEq(wire.EtherTypeIPv6, "", "drop")
	a.Load(wire.IPv6NextHeaderOffset, 1)
	a.JumpEq(wire.ProtoICMPv6, "", "ext1")
	// ICMPv6 right behind the IPv6 header.
	a.Load(wire.ICMPv6Offset, 1)
	acceptND(&a)
	a.Label("ext1")
	a.AnyOf(extHeaders, "", "drop")
	// X: where the header behind the first extension header starts,
	// relative to the IPv6 header; an extension header's length is in
	// 8-byte units, not counting the first 8 bytes.
	a.Load(firstLen, 1)
	a.Add(
		bpf.ALUOpConstant{Op: bpf.ALUOpAdd, Val: 1},
		bpf.ALUOpConstant{Op: bpf.ALUOpShiftLeft, Val: 3},
		bpf.ALUOpConstant{Op: bpf.ALUOpAdd, Val: wire.IPv6HeaderLen},
		bpf.TAX{},
	)
	a.Load(firstNext, 1)
	a.JumpEq(wire.ProtoICMPv6, "", "ext2")
	a.Add(bpf.LoadIndirect{Off: ipv6, Size: 1})
	acceptND(&a)
	a.Label("ext2")
	a.AnyOf(extHeaders, "", "drop")
	// The second extension header is at X; ICMPv6 must follow it.
	a.Add(bpf.LoadIndirect{Off: ipv6, Size: 1})
	a.JumpEq(wire.ProtoICMPv6, "", "drop")
	a.Add(
		bpf.LoadIndirect{Off: ipv6 + 1, Size: 1},
		bpf.ALUOpConstant{Op: bpf.ALUOpAdd, Val: 1},
		bpf.ALUOpConstant{Op: bpf.ALUOpShiftLeft, Val: 3},
		bpf.ALUOpX{Op: bpf.ALUOpAdd},
		bpf.TAX{},
		bpf.LoadIndirect{Off: ipv6, Size: 1},
	)
	acceptND(&a)
	a.Label("accept")
	a.Add(bpf.RetConstant{Val: snaplen})
	a.Label("drop")
	a.Add(bpf.RetConstant{Val: wire.FilterDrop})
	return a.Program()
}

// acceptND accepts the frame when A is a neighbor solicitation's or
// advertisement's ICMPv6 type, and drops it otherwise.
func acceptND(a *wire.Asm) {
	a.JumpEq(wire.TypeNeighborSolicitation, "accept", "")
	a.JumpEq(wire.TypeNeighborAdvertisement, "accept", "drop")
}
