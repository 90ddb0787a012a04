package loadgen

import (
	"testing"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"
)

func TestRecordFilterAndHeard(t *testing.T) {
	announce, _ := wiretest.ARPAnnouncement(responderMAC, target4)
	gratuitous, _ := wiretest.ARPGratuitousReply(responderMAC, target4)
	probe, _ := wiretest.ARPProbe(responderMAC, target4)
	unsolicited, _ := wiretest.NeighborAdvertisement(wiretest.MulticastMAC(wire.AllNodes), responderMAC, target6, wire.AllNodes, false)
	dad, _ := wiretest.DADSolicitation(responderMAC, target6)
	otherHost, _ := wiretest.ARPAnnouncement(askerMAC, target4)
	request := newTestRequest(t, target4, sender4).set(3) // from the asker's sequence MAC
	// An MLD report from the responder: ICMPv6, but neither NS nor NA.
	mld := append([]byte(nil), unsolicited...)
	mld[offICMP] = 143
	tests := []struct {
		name  string
		frame []byte
		keep  bool
		want  Heard
	}{
		{"arp announcement", announce, true, Heard{Addr: target4}},
		{"gratuitous arp reply", gratuitous, true, Heard{Addr: target4}},
		{"arp probe", probe, true, Heard{Addr: target4, Probe: true}},
		{"unsolicited na", unsolicited, true, Heard{Addr: target6}},
		{"dad solicitation", dad, true, Heard{Addr: target6, Probe: true}},
		{"another host's announcement", otherHost, false, Heard{}},
		{"a request from another host", request, false, Heard{}},
		{"mld report", mld, false, Heard{}},
	}
	for _, tt := range tests {
		if got := runFilter(t, recordFilter(responderMAC), tt.frame); got != tt.keep {
			t.Errorf("%s: filter keeps %v, want %v", tt.name, got, tt.keep)
		}
		if !tt.keep {
			continue
		}
		if got, ok := heardOf(tt.frame); !ok || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, ok, tt.want)
		}
	}
	if _, ok := heardOf(announce[:20]); ok {
		t.Error("a truncated frame: got it read")
	}
}
