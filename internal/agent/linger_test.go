package agent

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/announce/bpfresp"
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
	if !r.ends.IsZero() {
		fn(bpfresp.Linger{Addr: netip.MustParseAddr("192.0.2.10"), Until: r.ends, Packets: 3})
	}
	return nil
}
func (r *lingeringResp) LingerEnds() time.Time { return r.ends }
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
	b.closeParked()
	if !last.isClosed() {
		t.Error("closeParked left a parked responder open")
	}
}
