package wire

import "golang.org/x/net/bpf"

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
	return append([]bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtInterfaceIndex},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: ifindex, SkipTrue: 1},
		bpf.RetConstant{Val: 0},
		bpf.LoadExtension{Num: bpf.ExtType},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: packetOtherHost, SkipFalse: 1},
		bpf.RetConstant{Val: 0},
	}, next...)
}
