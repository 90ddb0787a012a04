package wire

import (
	"errors"
	"fmt"

	"golang.org/x/net/bpf"
)

// The kernel filters of vip's packet sockets (the responder's, the
// capture's) are classic BPF programs that read the frames at the offsets
// above, so that what a filter lets in and what Parse reads are laid out by
// one set of constants. Asm builds them; OwnFramesOnly and InboundOnly are
// the checks put in front of a filter for the frames it must never see.

// What a socket filter returns: how many bytes of the frame to keep.
const (
	// FilterDrop keeps nothing: the frame is not queued to the socket.
	FilterDrop = 0
	// FilterAccept keeps a whole frame of any length vip reads.
	FilterAccept = 0xffff
)

// maxJumpIf is how far a conditional jump of classic BPF reaches: its
// offsets are 8 bits.
const maxJumpIf = 255

// Asm builds a classic BPF program with named jump targets, so that no
// offset is counted by hand and a program can grow (a check per held
// address) without its jumps being recounted. A target is a label, set by
// Label where the next instruction goes; "" is the next instruction.
// Program resolves the labels. The zero Asm is an empty program.
//
// A conditional jump reaches 255 instructions; JumpEqFar and Jump reach
// any distance. A jump goes forwards only, as the kernel requires.
type Asm struct {
	prog   []bpf.Instruction
	labels map[string]int
	jumps  []asmJump
	err    error
}

// asmJump is an instruction of prog whose offsets Program sets: a JumpIf's
// two targets, or a Jump's one (ifTrue).
type asmJump struct {
	at              int
	ifTrue, ifFalse string
}

// Add appends instructions as they are. Relative jumps among them stay
// valid: a filter put behind others keeps its own jumps.
func (a *Asm) Add(ins ...bpf.Instruction) { a.prog = append(a.prog, ins...) }

// Load loads size bytes of the frame at off into A.
func (a *Asm) Load(off uint32, size int) { a.Add(bpf.LoadAbsolute{Off: off, Size: size}) }

// Label names the position of the next instruction. A name is set once.
func (a *Asm) Label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	if _, ok := a.labels[name]; ok {
		a.err = errors.Join(a.err, fmt.Errorf("BPF label %q set twice", name))
	}
	a.labels[name] = len(a.prog)
}

// JumpEq jumps to ifTrue when A is val, to ifFalse when not.
func (a *Asm) JumpEq(val uint32, ifTrue, ifFalse string) {
	a.jumps = append(a.jumps, asmJump{len(a.prog), ifTrue, ifFalse})
	a.Add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: val})
}

// Jump jumps to label, however far.
func (a *Asm) Jump(label string) {
	a.jumps = append(a.jumps, asmJump{at: len(a.prog), ifTrue: label})
	a.Add(bpf.Jump{})
}

// JumpEqFar jumps to label when A is val, however far, and goes on when
// not: a conditional jump over an unconditional one.
func (a *Asm) JumpEqFar(val uint32, label string) {
	a.Add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: val, SkipFalse: 1})
	a.Jump(label)
}

// AnyOf jumps to ifTrue when A is one of vals, to ifFalse when none.
func (a *Asm) AnyOf(vals []uint32, ifTrue, ifFalse string) {
	next := fmt.Sprintf("anyof%d", len(a.prog))
	for i, v := range vals {
		if i == len(vals)-1 {
			a.JumpEq(v, ifTrue, ifFalse)
			break
		}
		t := ifTrue
		if t == "" {
			t = next
		}
		a.JumpEq(v, t, "")
	}
	a.Label(next)
}

// ReturnEq returns ret when A is val, and goes on when not.
func (a *Asm) ReturnEq(val, ret uint32) {
	a.Add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: val, SkipFalse: 1}, bpf.RetConstant{Val: ret})
}

// ReturnNe returns ret when A is not val, and goes on when it is.
func (a *Asm) ReturnNe(val, ret uint32) {
	a.Add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: val, SkipTrue: 1}, bpf.RetConstant{Val: ret})
}

// Program returns the program with its jumps resolved. It fails on a label
// set twice, a jump to no label, backwards, or beyond a conditional jump's
// reach.
func (a *Asm) Program() ([]bpf.Instruction, error) {
	if a.err != nil {
		return nil, a.err
	}
	skip := func(from int, label string, reach int) (int, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := a.labels[label]
		if !ok || to <= from || to-from-1 > reach {
			return 0, fmt.Errorf("BPF jump from %d to %q: no such label ahead within reach", from, label)
		}
		return to - from - 1, nil
	}
	prog := append([]bpf.Instruction(nil), a.prog...)
	for _, j := range a.jumps {
		switch in := prog[j.at].(type) {
		case bpf.JumpIf:
			t, errT := skip(j.at, j.ifTrue, maxJumpIf)
			f, errF := skip(j.at, j.ifFalse, maxJumpIf)
			if err := errors.Join(errT, errF); err != nil {
				return nil, err
			}
			in.SkipTrue, in.SkipFalse = uint8(t), uint8(f)
			prog[j.at] = in
		case bpf.Jump:
			s, err := skip(j.at, j.ifTrue, int(^uint32(0)>>1))
			if err != nil {
				return nil, err
			}
			in.Skip = uint32(s)
			prog[j.at] = in
		}
	}
	return prog, nil
}

// MustProgram is Program for a program whose labels are all in the code
// that builds it, so that an error is a bug of that code, which its tests
// find: it panics on one.
func (a *Asm) MustProgram() []bpf.Instruction {
	prog, err := a.Program()
	if err != nil {
		panic(err)
	}
	return prog
}

// DropAll returns a filter that lets nothing in: for a socket only written
// to, or one not yet set up.
func DropAll() []bpf.Instruction { return []bpf.Instruction{bpf.RetConstant{Val: FilterDrop}} }

// OwnFramesOnly returns next, a classic BPF program for a packet socket
// bound to a protocol and an interface, behind a check that drops what the
// kernel hands such a socket on another interface's behalf. A socket bound
// to a protocol (not a tap of every frame) also gets the frames an upper
// interface took over (a VLAN's, a macvlan's), with skb->dev the upper
// one, and on a VLAN's parent without that VLAN's interface the VLAN's
// frames, marked for another host: in both the kernel has taken the VLAN
// tag off by then, so that they would pass for the interface's own. Frames
// for other hosts go too, which only promiscuous mode lets in.
func OwnFramesOnly(ifindex uint32, next []bpf.Instruction) []bpf.Instruction {
	const packetOtherHost = 3 // PACKET_OTHERHOST, skb->pkt_type
	var a Asm
	a.Add(bpf.LoadExtension{Num: bpf.ExtInterfaceIndex})
	a.ReturnNe(ifindex, FilterDrop)
	a.Add(bpf.LoadExtension{Num: bpf.ExtType})
	a.ReturnEq(packetOtherHost, FilterDrop)
	a.Add(next...)
	return a.prog // no labels: nothing to resolve
}

// InboundOnly returns next behind a check that drops the frames this host
// sends. A socket can ask the kernel to leave those out
// (PACKET_IGNORE_OUTGOING, Linux 4.20 and later), which saves running the
// filter at all; the check keeps them out on older kernels too.
func InboundOnly(next []bpf.Instruction) []bpf.Instruction {
	const packetOutgoing = 4 // PACKET_OUTGOING, skb->pkt_type
	var a Asm
	a.Add(bpf.LoadExtension{Num: bpf.ExtType})
	a.ReturnEq(packetOutgoing, FilterDrop)
	a.Add(next...)
	return a.prog // no labels: nothing to resolve
}
