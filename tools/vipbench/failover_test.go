package main

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// arpPacket is an ARP frame from mac as the client's capture holds it, at.
func arpPacket(t *testing.T, at time.Time, mac string, op uint16, sender, target netip.Addr) gopacket.Packet {
	t.Helper()
	hw, err := net.ParseMAC(mac)
	if err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	err = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{},
		&layers.Ethernet{SrcMAC: hw, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: op, SourceHwAddress: hw, SourceProtAddress: sender.AsSlice(),
			DstHwAddress: make([]byte, 6), DstProtAddress: target.AsSlice()})
	if err != nil {
		t.Fatal(err)
	}
	pk := gopacket.NewPacket(buf.Bytes(), layers.LinkTypeEthernet, gopacket.Default)
	pk.Metadata().Timestamp = at
	return pk
}

func TestTakeoverOf(t *testing.T) {
	const oldMAC, newMAC, other = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:0c"
	addr, asker, elsewhere := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.13"), netip.MustParseAddr("192.0.2.99")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	killed := at(1000)
	answer := func(ms int, mac string) gopacket.Packet {
		return arpPacket(t, at(ms), mac, layers.ARPReply, addr, asker)
	}
	announce := func(ms int, mac string) gopacket.Packet {
		return arpPacket(t, at(ms), mac, layers.ARPRequest, addr, addr)
	}
	tests := []struct {
		name  string
		pkts  []gopacket.Packet
		want  takeover
		fails bool
	}{
		{
			name: "a clean takeover: the old owner silent from the kill on",
			pkts: []gopacket.Packet{
				answer(900, oldMAC), answer(990, oldMAC),
				announce(3400, newMAC), // an announcement is no answer
				answer(3410, newMAC), answer(3500, newMAC), answer(5400, newMAC),
				answer(5420, newMAC), // past the window
			},
			want: takeover{First: at(3410), LastOld: at(990), Late: 0, Answered: 2},
		},
		{
			name: "the dead owner's host goes on answering beside the new owner",
			pkts: []gopacket.Packet{
				answer(900, oldMAC),
				answer(3100, newMAC), answer(3105, oldMAC), announce(3110, oldMAC),
				answer(3200, newMAC), answer(3201, oldMAC),
				answer(9000, oldMAC), // past the window
			},
			want: takeover{First: at(3100), LastOld: at(9000), Late: 3, Answered: 1},
		},
		{
			name: "frames that are not about the address, or from neither owner, do not count",
			pkts: []gopacket.Packet{
				answer(900, oldMAC),
				arpPacket(t, at(1500), newMAC, layers.ARPReply, elsewhere, asker),
				arpPacket(t, at(1600), oldMAC, layers.ARPRequest, asker, addr), // a request, from the address's asker
				answer(2000, other),
				answer(3000, newMAC),
			},
			want: takeover{First: at(3000), LastOld: at(900)},
		},
		{
			name: "an answer of the new owner's before the kill is not the takeover",
			pkts: []gopacket.Packet{answer(500, newMAC), answer(900, oldMAC), answer(4000, newMAC)},
			want: takeover{First: at(4000), LastOld: at(900)},
		},
		{name: "no takeover", pkts: []gopacket.Packet{answer(900, oldMAC)}, fails: true},
		{name: "the old owner never answered", pkts: []gopacket.Packet{answer(3000, newMAC)}, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := takeoverOf(arpFor(tt.pkts, addr, asker), oldMAC, newMAC, killed, 2*time.Second)
			if tt.fails {
				if err == nil {
					t.Fatalf("got %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Killed, tt.want.After = killed, 2*time.Second
			if got != tt.want {
				t.Errorf("got %+v,\nwant %+v", got, tt.want)
			}
		})
	}
}
