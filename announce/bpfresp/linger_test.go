package bpfresp

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/arp"

	"github.com/vipctl/vip/test/wiretest"
)

// lingers returns what Lingering reports, by address.
func lingers(t *testing.T, r *Responder) map[netip.Addr]Linger {
	t.Helper()
	got := map[netip.Addr]Linger{}
	if err := r.Lingering(func(l Linger) { got[l.Addr] = l }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestLinger: a dropped address lingers: it is answered no more, and what
// is sent to this MAC for it (IPv4 and IPv6 traffic, a unicast ARP check)
// counts with its sender, while a broadcast request and a frame sent to
// another MAC do not. Held again it is answered and counted from zero as
// ever; the linger ends by itself.
func TestLinger(t *testing.T) {
	for _, hook := range []Hook{TCX, XDPGeneric} {
		t.Run(hook.String(), func(t *testing.T) {
			r := requireBPF(t, hook)
			if err := r.SetLinger(time.Minute); err != nil {
				t.Fatal(err)
			}
			udp := corpusFrame(t, "IPv4 packet to the held address")
			runOK(t, r, udp) // before the release: not part of the linger
			released := time.Now()
			if err := r.LetGo(wiretest.CorpusHeld4, wiretest.CorpusHeld6); err != nil {
				t.Fatal(err)
			}
			if out := runOK(t, r, corpusFrame(t, "ARP who-has")); out != nil {
				t.Errorf("a lingering address was answered: % x", out)
			}
			if out := runOK(t, r, corpusFrame(t, "unicast solicitation (NUD)")); out != nil {
				t.Errorf("a lingering IPv6 address was answered: % x", out)
			}
			runOK(t, r, udp)
			runOK(t, r, udp)
			other := append([]byte(nil), udp...)
			copy(other[0:6], net.HardwareAddr{0x02, 0, 0x5e, 0, 0x53, 0x77})
			runOK(t, r, other)
			checker := net.HardwareAddr{0x02, 0, 0x5e, 0, 0x53, 0x44}
			check, err := wiretest.ARPFrame(wiretest.CorpusMAC, checker, arp.OperationRequest, checker, netip.MustParseAddr("192.0.2.44"), make(net.HardwareAddr, 6), wiretest.CorpusHeld4)
			if err != nil {
				t.Fatal(err)
			}
			runOK(t, r, check)

			got := lingers(t, r)
			l4, ok := got[wiretest.CorpusHeld4]
			if !ok || len(got) != 2 {
				t.Fatalf("lingering: got %v, want both addresses", got)
			}
			if l4.Packets != 3 || l4.Bytes != uint64(2*len(udp)+len(check)) {
				t.Errorf("%v: got %d packets, %d bytes; want 3, %d", l4.Addr, l4.Packets, l4.Bytes, 2*len(udp)+len(check))
			}
			if l4.Since.Before(released.Add(-time.Second)) || l4.Until.Sub(l4.Since) != time.Minute {
				t.Errorf("%v lingers from %v to %v, released at %v for a minute", l4.Addr, l4.Since, l4.Until, released)
			}
			if l4.Last.Before(released.Add(-time.Second)) || l4.Last.After(time.Now().Add(time.Second)) {
				t.Errorf("%v: last packet at %v, not since the release at %v", l4.Addr, l4.Last, released)
			}
			senders := map[string]uint64{}
			for _, s := range l4.Senders {
				senders[net.HardwareAddr(s.MAC[:]).String()+" "+s.From.String()] = s.Packets
			}
			want := map[string]uint64{"02:00:5e:00:53:03 192.0.2.3": 2, "02:00:5e:00:53:44 192.0.2.44": 1}
			if len(senders) != len(want) || senders["02:00:5e:00:53:03 192.0.2.3"] != 2 || senders["02:00:5e:00:53:44 192.0.2.44"] != 1 {
				t.Errorf("senders to %v: got %v, want %v", l4.Addr, senders, want)
			}
			if l6 := got[wiretest.CorpusHeld6]; l6.Packets != 1 || len(l6.Senders) != 1 {
				t.Errorf("%v: got %d packets from %d senders, want the NUD check: 1 from 1", l6.Addr, l6.Packets, len(l6.Senders))
			}
			snap := 0
			if err := r.Snapshot(func(netip.Addr, uint64, uint64, uint64) { snap++ }); err != nil || snap != 0 {
				t.Errorf("Snapshot reported %d lingering addresses (err %v), want none", snap, err)
			}

			if err := r.Hold(wiretest.CorpusHeld4); err != nil {
				t.Fatal(err)
			}
			if runOK(t, r, corpusFrame(t, "ARP who-has")) == nil {
				t.Error("held again, the address is not answered")
			}
			if p, _ := r.Traffic(wiretest.CorpusHeld4); p != 0 {
				t.Errorf("held again: traffic %d, want 0", p)
			}
			runOK(t, r, other)
			if p, _ := r.Traffic(wiretest.CorpusHeld4); p != 1 {
				t.Errorf("held again: traffic %d, want 1 (any MAC counts for a held address)", p)
			}
			if got := lingers(t, r); len(got) != 1 {
				t.Errorf("lingering after a new hold: got %v, want only %v", got, wiretest.CorpusHeld6)
			}

			if err := r.SetLinger(50 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if err := r.LetGo(wiretest.CorpusHeld4); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				got := lingers(t, r)
				if _, ok := got[wiretest.CorpusHeld4]; !ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the linger of 50ms has not ended after 10s: %v", got)
				}
				time.Sleep(20 * time.Millisecond)
			}
			runOK(t, r, udp)
			var k responderHeldValue
			if err := r.maps.Held.Lookup(r.key(wiretest.CorpusHeld4), &k); err == nil {
				t.Errorf("the linger ended but its entry stays: %+v", k)
			}
		})
	}
}

// TestSetLingerBounds refuses a linger below zero or above MaxLinger.
func TestSetLingerBounds(t *testing.T) {
	r := &Responder{ifname: "eth0"}
	for _, d := range []time.Duration{-time.Second, MaxLinger + time.Second} {
		if err := r.SetLinger(d); err == nil {
			t.Errorf("SetLinger(%v): got no error", d)
		}
	}
}

// TestLingerMakesRoom: lingering addresses share the held map with the
// held ones, and a claim that needs their room ends the oldest lingers
// rather than fail.
func TestLingerMakesRoom(t *testing.T) {
	r := requireBPF(t, TCX)
	if err := r.SetLinger(time.Minute); err != nil {
		t.Fatal(err)
	}
	addr := func(i int) netip.Addr {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 12: byte(i >> 16), 13: byte(i >> 8), 14: byte(i), 15: 1})
	}
	var first []netip.Addr
	for i := range 100 {
		first = append(first, addr(i))
	}
	if err := r.Hold(first...); err != nil {
		t.Fatal(err)
	}
	if err := r.LetGo(first...); err != nil {
		t.Fatal(err)
	}
	var more []netip.Addr
	for i := 100; len(more) < maxHeld-2-100+16; i++ {
		more = append(more, addr(i))
	}
	if err := r.Hold(more...); err != nil {
		t.Fatalf("hold %d addresses beside 100 lingering: %v", len(more), err)
	}
	if got := len(lingers(t, r)); got != 84 {
		t.Errorf("%d addresses linger, want 84: the 16 oldest ended to make room", got)
	}
}
