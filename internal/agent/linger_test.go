package agent

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/announce/bpfresp"
	"github.com/vipctl/vip/internal/store"
)

// lingeringResp is a responder with addresses lingering until ends.
type lingeringResp struct {
	fakeResp
	mu     sync.Mutex
	ends   time.Time
	linger time.Duration
	index  int
	mac    net.HardwareAddr
}

func (r *lingeringResp) SetLinger(d time.Duration) error { r.linger = d; return nil }
func (r *lingeringResp) Lingering(fn func(bpfresp.Linger)) error {
	if ends := r.LingerEnds(); !ends.IsZero() {
		fn(bpfresp.Linger{Addr: netip.MustParseAddr("192.0.2.10"), Until: ends, Packets: 3})
	}
	return nil
}
func (r *lingeringResp) LingerEnds() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ends
}
func (r *lingeringResp) setEnds(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends = t
}
func (r *lingeringResp) Same(i int, m net.HardwareAddr) bool {
	return i == r.index && m.String() == r.mac.String()
}
func (r *lingeringResp) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}
func (r *lingeringResp) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// TestLingerBookParks: a port's responder with lingering addresses stays
// open when the port closes, still read, and serves the next port of the
// same interface; one with nothing lingering closes at once; a parked one
// closes when its linger ends, or when the interface changed.
func TestLingerBookParks(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	mac := net.HardwareAddr{0x02, 0, 0x5e, 0, 0x53, 1}
	ifi := &net.Interface{Name: "eth0", Index: 7, HardwareAddr: mac}
	b := newLingerBook(time.Minute)

	idle := &lingeringResp{index: 7, mac: mac}
	b.opened("eth0", idle, log)
	if idle.linger != time.Minute {
		t.Errorf("the responder lingers %v, want the book's minute", idle.linger)
	}
	if err := b.wrap("eth0", idle).Close(); err != nil || !idle.isClosed() {
		t.Errorf("a responder with nothing lingering: closed %v (%v), want closed at once", idle.isClosed(), err)
	}

	busy := &lingeringResp{index: 7, mac: mac, ends: time.Now().Add(time.Hour)}
	b.opened("eth0", busy, log)
	_ = b.wrap("eth0", busy).Close()
	if busy.isClosed() {
		t.Fatal("a responder with lingering addresses closed with its port")
	}
	if rec := b.record(log); len(rec.Addrs) != 1 || rec.Addrs[0].Packets != 3 || rec.Addrs[0].Interface != "eth0" {
		t.Errorf("record of the parked responder: %+v", rec)
	}
	if got := b.takeParked(ifi); got != busy {
		t.Errorf("takeParked: %v, want the parked responder", got)
	}
	if b.takeParked(ifi) != nil {
		t.Error("a parked responder was taken twice")
	}

	// Parked again, the interface changes MAC: closed, not served.
	_ = b.wrap("eth0", busy).Close()
	changed := &net.Interface{Name: "eth0", Index: 7, HardwareAddr: net.HardwareAddr{0x02, 0, 0x5e, 0, 0x53, 2}}
	if b.takeParked(changed) != nil || !busy.isClosed() {
		t.Errorf("a parked responder served an interface of another MAC (closed %v)", busy.isClosed())
	}

	// The linger ends: closed by itself.
	short := &lingeringResp{index: 7, mac: mac, ends: time.Now().Add(50 * time.Millisecond)}
	_ = b.wrap("eth0", short).Close()
	deadline := time.Now().Add(10 * time.Second)
	for !short.isClosed() {
		if time.Now().After(deadline) {
			t.Fatal("the parked responder is open 10s after its linger ended")
		}
		time.Sleep(10 * time.Millisecond)
	}

	last := &lingeringResp{index: 7, mac: mac, ends: time.Now().Add(time.Hour)}
	_ = b.wrap("eth0", last).Close()
	b.closeParked()()
	if !last.isClosed() {
		t.Error("closeParked left a parked responder open")
	}
}

// TestLingerBookParkedTwice: a parked responder that served a port again
// and was parked with a later linger is not closed at the first one's end.
func TestLingerBookParkedTwice(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0, 0x5e, 0, 0x53, 1}
	ifi := &net.Interface{Name: "eth0", Index: 7, HardwareAddr: mac}
	b := newLingerBook(time.Minute)
	r := &lingeringResp{index: 7, mac: mac}
	r.setEnds(time.Now().Add(100 * time.Millisecond))
	_ = b.wrap("eth0", r).Close()
	if b.takeParked(ifi) != r {
		t.Fatal("the parked responder was not served again")
	}
	r.setEnds(time.Now().Add(time.Hour))
	_ = b.wrap("eth0", r).Close()
	time.Sleep(400 * time.Millisecond) // past the first linger's end and its timer
	if r.isClosed() {
		t.Fatal("the responder closed at its first linger's end, while a later one lasts")
	}
	b.closeParked()()
}

// TestLingerRecordBounds: the record counts senders in all, the addresses
// with the latest traffic first, and a read whose only change is the
// times of the latest packets is the same counts.
func TestLingerRecordBounds(t *testing.T) {
	now := time.Now()
	var addrs []store.LingerAddr
	for i := range store.MaxLingerSendersAll {
		a := store.LingerAddr{Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 250)}), Last: now.Add(-time.Duration(i) * time.Second)}
		for range store.MaxLingerSenders {
			a.Senders = append(a.Senders, store.LingerSender{MAC: "02:00:5e:00:53:01", Packets: 2})
		}
		addrs = append(addrs, a)
	}
	boundSenders(addrs)
	kept := 0
	for _, a := range addrs {
		kept += len(a.Senders)
	}
	if kept != store.MaxLingerSendersAll || len(addrs[0].Senders) != store.MaxLingerSenders || len(addrs[len(addrs)-1].Senders) != 0 || addrs[len(addrs)-1].MoreSenders != store.MaxLingerSenders {
		t.Errorf("kept %d senders (newest address %d, oldest %d), want %d in all, the newest first", kept, len(addrs[0].Senders), len(addrs[len(addrs)-1].Senders), store.MaxLingerSendersAll)
	}
	// What the senders left out sent is kept, so that the senders add
	// up to the address's count (issue 31).
	if got, want := addrs[len(addrs)-1].MorePackets, uint64(2*store.MaxLingerSenders); got != want || addrs[0].MorePackets != 0 {
		t.Errorf("the senders left out sent %d packets (the newest address's %d), want %d (and 0)", got, addrs[0].MorePackets, want)
	}
	g := bpfresp.Linger{Addr: netip.MustParseAddr("192.0.2.10"), Packets: 20}
	for i := range store.MaxLingerSenders + 2 {
		g.Senders = append(g.Senders, bpfresp.Sender{From: netip.MustParseAddr("192.0.2.99"), Packets: uint64(i + 1)})
	}
	if la := lingerAddr("eth0", g); len(la.Senders) != store.MaxLingerSenders || la.MoreSenders != 2 ||
		la.MorePackets != uint64(store.MaxLingerSenders+1+store.MaxLingerSenders+2) {
		t.Errorf("an address's record keeps %d senders and leaves out %d that sent %d, want %d, 2 and %d",
			len(la.Senders), la.MoreSenders, la.MorePackets, store.MaxLingerSenders, store.MaxLingerSenders+1+store.MaxLingerSenders+2)
	}
	x := store.Lingering{Addrs: []store.LingerAddr{{Addr: netip.MustParseAddr("192.0.2.10"), Packets: 3, Last: now, Senders: []store.LingerSender{{MAC: "m", Packets: 3, Last: now}}}}}
	y := store.Lingering{Addrs: []store.LingerAddr{{Addr: netip.MustParseAddr("192.0.2.10"), Packets: 3, Last: now.Add(time.Microsecond), Senders: []store.LingerSender{{MAC: "m", Packets: 3, Last: now.Add(time.Microsecond)}}}}}
	if !sameCounts(x, y) {
		t.Error("records that differ only in the times' jitter are not the same counts")
	}
	y.Addrs[0].Packets = 4
	if sameCounts(x, y) {
		t.Error("records with other counts are the same counts")
	}
	if x.Addrs[0].Last.IsZero() {
		t.Error("sameCounts changed its argument")
	}
}
