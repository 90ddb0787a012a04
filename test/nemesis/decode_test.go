package nemesis

import (
	"net/netip"
	"testing"

	"github.com/vipctl/vip/internal/wire"
)

func TestDecode(t *testing.T) {
	v6 := netip.MustParseAddr("2001:db8::50")
	other := netip.MustParseAddr("192.0.2.77")
	client := netip.MustParseAddr("192.0.2.13")
	client6 := netip.MustParseAddr("2001:db8::13")
	owner := wire.MAC{0x02, 0, 0, 0, 0, 0x0a}
	seqMAC := wire.MAC{0x02, 7, 0, 0, 1, 2} // run 7, sequence 258
	arp := func(dst, src wire.MAC, a wire.ARP) []byte {
		b := make([]byte, wire.MinFrameLen)
		wire.PutARP(b, dst, src, &a)
		return b
	}
	nd := func(dst, src wire.MAC, n wire.ND) []byte {
		b := make([]byte, wire.NDLenWithLinkLayer)
		wire.PutND(b, dst, src, &n)
		return b
	}
	tests := []struct {
		name  string
		frame []byte
		want  Frame
		ok    bool
	}{
		{"ARP probe request", arp(wire.BroadcastMAC, owner, wire.ARP{Op: wire.OpRequest, SenderMAC: seqMAC, SenderIP: client, TargetIP: v4}),
			Frame{Addr: v4, MAC: "02:00:00:00:00:0a", Kind: Request, Seq: 258}, true},
		{"ARP reply to a probe", arp(seqMAC, owner, wire.ARP{Op: wire.OpReply, SenderMAC: owner, SenderIP: v4, TargetMAC: seqMAC, TargetIP: client}),
			Frame{Addr: v4, MAC: "02:00:00:00:00:0a", Kind: Reply, Seq: 258}, true},
		{"gratuitous ARP request", arp(wire.BroadcastMAC, owner, wire.ARPAnnouncement(owner, v4, wire.OpRequest)),
			Frame{Addr: v4, MAC: "02:00:00:00:00:0a", Kind: Announcement}, true},
		{"gratuitous ARP reply", arp(wire.BroadcastMAC, owner, wire.ARPAnnouncement(owner, v4, wire.OpReply)),
			Frame{Addr: v4, MAC: "02:00:00:00:00:0a", Kind: Announcement}, true},
		{"ARP probe (RFC 5227) claims nothing", arp(wire.BroadcastMAC, owner, wire.ARPProbe(owner, v4)), Frame{}, false},
		{"another address", arp(wire.BroadcastMAC, owner, wire.ARPAnnouncement(owner, other, wire.OpRequest)), Frame{}, false},
		{"solicitation", nd(wire.GroupMAC(wire.SolicitedNode(v6)), owner, wire.ND{Type: wire.TypeNeighborSolicitation, Src: client6, Dst: wire.SolicitedNode(v6), Target: v6, LinkLayer: seqMAC, HasLinkLayer: true}),
			Frame{Addr: v6, MAC: "02:00:00:00:00:0a", Kind: Request, Seq: 258}, true},
		{"advertisement to a probe", nd(seqMAC, owner, wire.Advertisement(owner, v6, client6, true)),
			Frame{Addr: v6, MAC: "02:00:00:00:00:0a", Kind: Reply, Seq: 258}, true},
		{"unsolicited advertisement", nd(wire.GroupMAC(netip.MustParseAddr("ff02::1")), owner, wire.Advertisement(owner, v6, netip.MustParseAddr("ff02::1"), false)),
			Frame{Addr: v6, MAC: "02:00:00:00:00:0a", Kind: Announcement}, true},
		{"DAD probe claims nothing", nd(wire.GroupMAC(wire.SolicitedNode(v6)), owner, wire.DADProbe(v6)), Frame{}, false},
		{"garbage", []byte{1, 2, 3}, Frame{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Decode(tt.frame, t0, []netip.Addr{v4, v6}, 7)
			tt.want.At = t0
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
