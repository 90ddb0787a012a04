package sniff

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/bpf"
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

// IPv6 next-header values of the extension headers BaseFilter follows, and
// of ICMPv6.
var extHeaders = []uint32{0, 60, 43}

const (
	nextICMPv6 = 58
	offIPv6    = 14 // the IPv6 header, in an untagged Ethernet frame
)

// baseProgram is BaseFilter in classic BPF, keeping snaplen bytes of each
// frame it passes: the same frames pass, TestBaseProgramIsBaseFilter
// checks that against libpcap's compilation. Where the filter reads past
// the end of a frame the kernel drops the frame, as with libpcap's.
func baseProgram(snaplen uint32) ([]bpf.Instruction, error) {
	var a asm
	a.add(bpf.LoadAbsolute{Off: offEtherType, Size: 2})
	a.jeq(0x0806, "accept", "")
	a.jeq(0x86dd, "", "drop")
	a.add(bpf.LoadAbsolute{Off: offIPv6Next, Size: 1})
	a.jeq(nextICMPv6, "", "ext1")
	// ICMPv6 right behind the IPv6 header.
	a.add(bpf.LoadAbsolute{Off: offICMPType, Size: 1})
	a.ndp()
	a.label("ext1")
	a.anyOf(extHeaders, "", "drop")
	// X: where the header behind the first extension header starts,
	// relative to the IPv6 header.
	a.add(
		bpf.LoadAbsolute{Off: offIPv6 + 41, Size: 1},
		bpf.ALUOpConstant{Op: bpf.ALUOpAdd, Val: 1},
		bpf.ALUOpConstant{Op: bpf.ALUOpShiftLeft, Val: 3},
		bpf.ALUOpConstant{Op: bpf.ALUOpAdd, Val: 40},
		bpf.TAX{},
		bpf.LoadAbsolute{Off: offIPv6 + 40, Size: 1},
	)
	a.jeq(nextICMPv6, "", "ext2")
	a.add(bpf.LoadIndirect{Off: offIPv6, Size: 1})
	a.ndp()
	a.label("ext2")
	a.anyOf(extHeaders, "", "drop")
	// The second extension header is at X; ICMPv6 must follow it.
	a.add(bpf.LoadIndirect{Off: offIPv6, Size: 1})
	a.jeq(nextICMPv6, "", "drop")
	a.add(
		bpf.LoadIndirect{Off: offIPv6 + 1, Size: 1},
		bpf.ALUOpConstant{Op: bpf.ALUOpAdd, Val: 1},
		bpf.ALUOpConstant{Op: bpf.ALUOpShiftLeft, Val: 3},
		bpf.ALUOpX{Op: bpf.ALUOpAdd},
		bpf.TAX{},
		bpf.LoadIndirect{Off: offIPv6, Size: 1},
	)
	a.ndp()
	a.label("accept")
	a.add(bpf.RetConstant{Val: snaplen})
	a.label("drop")
	a.add(bpf.RetConstant{Val: bpfRetDrop})
	return a.resolve()
}

// inboundOnly returns next behind a check that drops the frames this host
// sends. The socket also asks the kernel to leave those out
// (PACKET_IGNORE_OUTGOING, Linux 4.20 and later), which saves running the
// filter at all; the check keeps them out on older kernels too.
func inboundOnly(next []bpf.Instruction) []bpf.Instruction {
	const packetOutgoing = 4 // PACKET_OUTGOING, skb->pkt_type
	return append([]bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtType},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: packetOutgoing, SkipFalse: 1},
		bpf.RetConstant{Val: bpfRetDrop},
	}, next...)
}

// asm builds a short classic BPF program with named jump targets; "" is
// the next instruction.
type asm struct {
	prog   []bpf.Instruction
	labels map[string]int
	jumps  []asmJump
}

type asmJump struct {
	at          int
	true, false string
}

func (a *asm) add(ins ...bpf.Instruction) { a.prog = append(a.prog, ins...) }

func (a *asm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.prog)
}

// jeq jumps to ifTrue when A is val, to ifFalse when not.
func (a *asm) jeq(val uint32, ifTrue, ifFalse string) {
	a.jumps = append(a.jumps, asmJump{len(a.prog), ifTrue, ifFalse})
	a.add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: val})
}

// anyOf jumps to ifTrue when A is one of vals, to ifFalse when none.
func (a *asm) anyOf(vals []uint32, ifTrue, ifFalse string) {
	next := fmt.Sprintf("anyof%d", len(a.prog))
	for i, v := range vals {
		if i == len(vals)-1 {
			a.jeq(v, ifTrue, ifFalse)
			break
		}
		t := ifTrue
		if t == "" {
			t = next
		}
		a.jeq(v, t, "")
	}
	a.label(next)
}

// ndp accepts the frame when A is a neighbor solicitation's or
// advertisement's ICMPv6 type, and drops it otherwise.
func (a *asm) ndp() {
	a.jeq(135, "accept", "")
	a.jeq(136, "accept", "drop")
}

// resolve sets the jumps' offsets. It fails on a jump backwards, to no
// label, or beyond a conditional jump's reach (255 instructions).
func (a *asm) resolve() ([]bpf.Instruction, error) {
	skip := func(from int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := a.labels[label]
		if !ok || to <= from || to-from-1 > 255 {
			return 0, fmt.Errorf("BPF jump from %d to %q: no such label ahead within reach", from, label)
		}
		return uint8(to - from - 1), nil
	}
	for _, j := range a.jumps {
		in := a.prog[j.at].(bpf.JumpIf)
		var errT, errF error
		in.SkipTrue, errT = skip(j.at, j.true)
		in.SkipFalse, errF = skip(j.at, j.false)
		if err := errors.Join(errT, errF); err != nil {
			return nil, err
		}
		a.prog[j.at] = in
	}
	return a.prog, nil
}
