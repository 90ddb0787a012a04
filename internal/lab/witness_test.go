package lab

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/sniff"
)

var (
	witnessV4  = netip.MustParseAddr("192.0.2.10")
	witnessV6  = netip.MustParseAddr("2001:db8::10")
	witnessT0  = time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	macA, macB = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
)

func at(ms int) time.Time { return witnessT0.Add(time.Duration(ms) * time.Millisecond) }

// TestWitnessKeepsAnswers: the frames that bind a watched address to a
// MAC are kept, an ARP reply by its sender and an advertisement by its
// target link-layer option; requests, and answers for other addresses, are
// not.
func TestWitnessKeepsAnswers(t *testing.T) {
	w := NewWitness(witnessV4, witnessV6)
	mac, _ := wire.MACFrom(mustMAC(t, macA))
	client, _ := wire.MACFrom(mustMAC(t, "02:00:00:00:00:03"))
	frame := func(build func(b []byte) int) sniff.Observation {
		b := make([]byte, 128)
		o, err := sniff.Decode(b[:build(b)], at(0))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	w.Observe(frame(func(b []byte) int {
		return wire.PutARP(b, client, mac, &wire.ARP{Op: wire.OpReply, SenderMAC: mac, SenderIP: witnessV4, TargetMAC: client, TargetIP: netip.MustParseAddr("192.0.2.3")})
	}))
	w.Observe(frame(func(b []byte) int {
		na := wire.Advertisement(mac, witnessV6, netip.MustParseAddr("2001:db8::3"), true)
		return wire.PutND(b, client, mac, &na)
	}))
	w.Observe(frame(func(b []byte) int { // a request: no answer
		return wire.PutARP(b, wire.BroadcastMAC, client, &wire.ARP{Op: wire.OpRequest, SenderMAC: client, SenderIP: netip.MustParseAddr("192.0.2.3"), TargetIP: witnessV4})
	}))
	w.Observe(frame(func(b []byte) int { // another address's answer
		return wire.PutARP(b, client, mac, &wire.ARP{Op: wire.OpReply, SenderMAC: mac, SenderIP: netip.MustParseAddr("192.0.2.11"), TargetMAC: client, TargetIP: netip.MustParseAddr("192.0.2.3")})
	}))
	for _, a := range []netip.Addr{witnessV4, witnessV6} {
		if got := w.Count(a, at(0), at(1)); len(got) != 1 || got[macA] != 1 {
			t.Errorf("%s: kept %v, want one answer from %s", a, got, macA)
		}
	}
}

// TestWitnessHandover: a clean handover, and the one the demo must fail:
// the old owner answering after the new one's first answer (a frozen
// owner that wakes and answers), or the new one never answering.
func TestWitnessHandover(t *testing.T) {
	w := NewWitness(witnessV4)
	for _, a := range []Answer{
		{at(0), witnessV4, macA}, {at(100), witnessV4, macA}, // a answers
		{at(2300), witnessV4, macB}, {at(2400), witnessV4, macB}, // b took over
	} {
		w.Add(a)
	}
	for ms := 2500; ms < 6000; ms += 100 {
		w.Add(Answer{at(ms), witnessV4, macB})
	}
	h := w.Handover(witnessV4, macA, macB, at(50), at(6000))
	if err := h.Err(time.Second); err != nil || h.NewAnswers != 37 || !h.LastOld.Equal(at(100)) || !h.FirstNew.Equal(at(2300)) {
		t.Fatalf("clean handover: %+v, %v", h, err)
	}
	// The client heard nothing for 3 s after b's first answer: no proof
	// of a's silence either.
	if err := w.Handover(witnessV4, macA, macB, at(50), at(9000)).Err(time.Second); err == nil || !strings.Contains(err.Error(), "capture stopped") {
		t.Errorf("a watch that heard nothing for 3 s: %v; want it said", err)
	}
	w.Add(Answer{at(4000), witnessV4, macA}) // a wakes and answers
	h = w.Handover(witnessV4, macA, macB, at(50), at(6000))
	if err := h.Err(time.Second); err == nil || h.OldAfterNew != 1 || !strings.Contains(err.Error(), "answered twice") {
		t.Fatalf("a's answer after b's first: %+v, %v; want it named", h, err)
	}
	if err := w.Handover(witnessV4, macA, "02:00:00:00:00:0c", at(50), at(6000)).Err(time.Second); err == nil {
		t.Fatal("a handover to a MAC that never answered passed")
	}
	// A third MAC (both standbys took it) is answered twice too.
	w2 := NewWitness(witnessV4)
	for ms := 0; ms < 3000; ms += 100 {
		w2.Add(Answer{at(ms), witnessV4, macB})
	}
	w2.Add(Answer{at(1500), witnessV4, "02:00:00:00:00:0c"})
	if err := w2.Handover(witnessV4, macA, macB, at(0), at(3000)).Err(time.Second); err == nil || !strings.Contains(err.Error(), "02:00:00:00:00:0c 1 times") {
		t.Errorf("a third MAC after b's first: %v; want it named", err)
	}
}

// TestWitnessSilence: the longest stretch without an answer counts from
// the window's start and to its end too.
func TestWitnessSilence(t *testing.T) {
	w := NewWitness(witnessV4)
	for _, ms := range []int{100, 200, 1500, 1600} {
		w.Add(Answer{at(ms), witnessV4, macA})
	}
	s := w.Silence(witnessV4, at(0), at(2000))
	if s.Longest != 1300*time.Millisecond || !s.At.Equal(at(200)) || s.MACs[macA] != 4 {
		t.Errorf("silence: %+v, want 1.3 s from 200 ms, 4 answers", s)
	}
	if s := w.Silence(witnessV4, at(1600), at(5000)); s.Longest != 3400*time.Millisecond {
		t.Errorf("silence to the window's end: %v, want 3.4 s", s.Longest)
	}
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	hw, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return hw
}
