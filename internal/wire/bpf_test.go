package wire_test

import (
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/bpf"

	"github.com/vipctl/vip/internal/wire"
)

// run runs prog on frame in x/net/bpf's interpreter and returns what it
// returns.
func run(t *testing.T, prog []bpf.Instruction, frame []byte) int {
	t.Helper()
	if _, err := bpf.Assemble(prog); err != nil {
		t.Fatalf("assemble: %v", err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	n, err := vm.Run(frame)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return n
}

// TestFilterOffsets: a filter's load at each offset reads the field the
// builders wrote there.
func TestFilterOffsets(t *testing.T) {
	req := wire.ARP{Op: wire.OpRequest, SenderMAC: peerMAC, SenderIP: peer4, TargetIP: vip4}
	arpFrame := putARP(wire.BroadcastMAC, peerMAC, req)
	ns := wire.ND{Type: wire.TypeNeighborSolicitation, Src: peer6, Dst: snm6, Target: vip6, LinkLayer: peerMAC, HasLinkLayer: true}
	nsFrame := putND(wire.GroupMAC(snm6), peerMAC, ns)
	for _, tt := range []struct {
		name  string
		frame []byte
		off   uint32
		size  int
		want  uint32
	}{
		{"ARP EtherType", arpFrame, wire.EtherTypeOffset, 2, wire.EtherTypeARP},
		{"ARP hardware type", arpFrame, wire.ARPHardwareOffset, 2, 1},
		{"ARP protocol type", arpFrame, wire.ARPProtocolOffset, 2, 0x0800},
		{"ARP address lengths", arpFrame, wire.ARPLengthsOffset, 2, 0x0604},
		{"ARP operation", arpFrame, wire.ARPOpOffset, 2, wire.OpRequest},
		{"ARP sender address", arpFrame, wire.ARPSenderIPOffset, 4, 0xc0000214},
		{"ARP target address", arpFrame, wire.ARPTargetIPOffset, 4, 0xc000020a},
		{"IPv6 EtherType", nsFrame, wire.EtherTypeOffset, 2, wire.EtherTypeIPv6},
		{"IPv6 next header", nsFrame, wire.IPv6NextHeaderOffset, 1, wire.ProtoICMPv6},
		{"IPv6 source, first word", nsFrame, wire.IPv6SrcOffset, 4, 0x20010db8},
		{"IPv6 source, last word", nsFrame, wire.IPv6SrcOffset + 12, 4, 0x20},
		{"ICMPv6 type", nsFrame, wire.ICMPv6Offset, 1, wire.TypeNeighborSolicitation},
		{"ND target, last word", nsFrame, wire.NDTargetOffset + 12, 4, 0x10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var a wire.Asm
			a.Load(tt.off, tt.size)
			a.Add(bpf.RetA{})
			if got := uint32(run(t, a.MustProgram(), tt.frame)); got != tt.want {
				t.Errorf("load %d bytes at %d: got %#x, want %#x", tt.size, tt.off, got, tt.want)
			}
		})
	}
}

// TestAsm runs programs built with each of Asm's jumps on frames whose
// EtherType (the A register's value) sends them one way or the other.
func TestAsm(t *testing.T) {
	ret := func(a *wire.Asm, v uint32) { a.Add(bpf.RetConstant{Val: v}) }
	frame := func(etherType uint16) []byte {
		b := make([]byte, wire.MinFrameLen)
		b[wire.EtherTypeOffset], b[wire.EtherTypeOffset+1] = byte(etherType>>8), byte(etherType)
		return b
	}
	tests := []struct {
		name  string
		build func(a *wire.Asm)
		want  map[uint16]int // EtherType: what the program returns
	}{
		{"JumpEq to labels", func(a *wire.Asm) {
			a.JumpEq(wire.EtherTypeARP, "arp", "other")
			ret(a, 1)
			a.Label("arp")
			ret(a, 2)
			a.Label("other")
			ret(a, 3)
		}, map[uint16]int{wire.EtherTypeARP: 2, wire.EtherTypeIPv6: 3}},
		{"JumpEq to the next instruction", func(a *wire.Asm) {
			a.JumpEq(wire.EtherTypeARP, "", "other")
			ret(a, 1)
			a.Label("other")
			ret(a, 3)
		}, map[uint16]int{wire.EtherTypeARP: 1, wire.EtherTypeIPv6: 3}},
		{"JumpEq as far as it reaches", func(a *wire.Asm) {
			a.JumpEq(wire.EtherTypeARP, "far", "")
			for range 255 {
				ret(a, 1)
			}
			a.Label("far")
			ret(a, 2)
		}, map[uint16]int{wire.EtherTypeARP: 2, wire.EtherTypeIPv6: 1}},
		{"JumpEqFar past a conditional jump's reach", func(a *wire.Asm) {
			a.JumpEqFar(wire.EtherTypeARP, "far")
			for range 1000 {
				ret(a, 1)
			}
			a.Label("far")
			ret(a, 2)
		}, map[uint16]int{wire.EtherTypeARP: 2, wire.EtherTypeIPv6: 1}},
		{"Jump", func(a *wire.Asm) {
			a.Jump("far")
			for range 1000 {
				ret(a, 1)
			}
			a.Label("far")
			ret(a, 2)
		}, map[uint16]int{wire.EtherTypeARP: 2}},
		{"AnyOf", func(a *wire.Asm) {
			a.AnyOf([]uint32{wire.EtherTypeARP, wire.EtherTypeIPv6}, "", "none")
			ret(a, 1)
			a.Label("none")
			ret(a, 2)
		}, map[uint16]int{wire.EtherTypeARP: 1, wire.EtherTypeIPv6: 1, 0x0800: 2}},
		{"AnyOf to a label", func(a *wire.Asm) {
			a.AnyOf([]uint32{wire.EtherTypeARP, wire.EtherTypeIPv6}, "one", "")
			ret(a, 1)
			a.Label("one")
			ret(a, 2)
		}, map[uint16]int{wire.EtherTypeARP: 2, wire.EtherTypeIPv6: 2, 0x0800: 1}},
		{"ReturnEq", func(a *wire.Asm) {
			a.ReturnEq(wire.EtherTypeARP, 2)
			ret(a, 1)
		}, map[uint16]int{wire.EtherTypeARP: 2, wire.EtherTypeIPv6: 1}},
		{"ReturnNe", func(a *wire.Asm) {
			a.ReturnNe(wire.EtherTypeARP, 2)
			ret(a, 1)
		}, map[uint16]int{wire.EtherTypeARP: 1, wire.EtherTypeIPv6: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a wire.Asm
			a.Load(wire.EtherTypeOffset, 2)
			tt.build(&a)
			prog, err := a.Program()
			if err != nil {
				t.Fatal(err)
			}
			for et, want := range tt.want {
				if got := run(t, prog, frame(et)); got != want {
					t.Errorf("EtherType %#04x: got %d, want %d", et, got, want)
				}
			}
		})
	}
}

// TestAsmRefuses: Program says what is wrong with a jump it cannot
// resolve, and MustProgram panics.
func TestAsmRefuses(t *testing.T) {
	for _, tt := range []struct {
		name  string
		build func(a *wire.Asm)
		want  string
	}{
		{"no such label", func(a *wire.Asm) { a.JumpEq(1, "nowhere", "") }, `"nowhere"`},
		{"backwards", func(a *wire.Asm) {
			a.Label("back")
			a.Jump("back")
		}, `"back"`},
		{"beyond reach", func(a *wire.Asm) {
			a.JumpEq(1, "far", "")
			for range 256 {
				a.Add(bpf.RetConstant{})
			}
			a.Label("far")
		}, `"far"`},
		{"a label set twice", func(a *wire.Asm) {
			a.Label("twice")
			a.Label("twice")
		}, "set twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var a wire.Asm
			tt.build(&a)
			if _, err := a.Program(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Program: got error %v, want one saying %s", err, tt.want)
			}
			defer func() {
				if recover() == nil {
					t.Error("MustProgram: got no panic")
				}
			}()
			a.MustProgram()
		})
	}
}

// TestGuards compares the checks put in front of a filter instruction by
// instruction: x/net/bpf's interpreter cannot run their loads of the
// kernel's extensions.
func TestGuards(t *testing.T) {
	next := []bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpEqual, Val: 9, SkipTrue: 1}, bpf.RetConstant{Val: 1}, bpf.RetConstant{Val: 2}}
	for _, tt := range []struct {
		name      string
		got, want []bpf.Instruction
	}{
		{"OwnFramesOnly", wire.OwnFramesOnly(7, next), append([]bpf.Instruction{
			bpf.LoadExtension{Num: bpf.ExtInterfaceIndex},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 7, SkipTrue: 1},
			bpf.RetConstant{Val: wire.FilterDrop},
			bpf.LoadExtension{Num: bpf.ExtType},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 3, SkipFalse: 1}, // PACKET_OTHERHOST
			bpf.RetConstant{Val: wire.FilterDrop},
		}, next...)},
		{"InboundOnly", wire.InboundOnly(next), append([]bpf.Instruction{
			bpf.LoadExtension{Num: bpf.ExtType},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 4, SkipFalse: 1}, // PACKET_OUTGOING
			bpf.RetConstant{Val: wire.FilterDrop},
		}, next...)},
		{"DropAll", wire.DropAll(), []bpf.Instruction{bpf.RetConstant{Val: wire.FilterDrop}}},
	} {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s:\ngot  %v\nwant %v", tt.name, tt.got, tt.want)
		}
	}
}
