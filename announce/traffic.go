package announce

import (
	"net/netip"
	"sync"
	"time"

	"github.com/vipctl/vip/internal/wire"
)

// Traffic is what arrived for a held address: packets, and bytes of
// frames, whose IPv4 or IPv6 destination is the address, since it was
// held, and their rates over the latest interval of at least
// TrafficInterval. It is the proof an operator wants after a move:
// traffic now arrives here.
type Traffic struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// PacketsPerSecond and BytesPerSecond are zero until two readings
	// TrafficInterval apart were taken.
	PacketsPerSecond float64 `json:"packets_per_second"`
	BytesPerSecond   float64 `json:"bytes_per_second"`
}

// Counts are what a port counted for one address: the requests answered,
// and the traffic arriving where its responder counts it.
type Counts struct {
	Answered uint64
	Traffic  *Traffic
}

// TrafficInterval is the shortest interval a traffic rate is measured
// over: readings closer together than this keep the previous rate, so
// that two clients polling at their own pace see the same one.
const TrafficInterval = time.Second

// trafficMeter turns a KernelResponder's totals into rates. It takes no
// readings of its own: each Traffic call is one, so nothing runs while no
// one looks, and a rate spans the time since the reading before (at least
// TrafficInterval).
type trafficMeter struct {
	now func() time.Time

	mu   sync.Mutex
	last map[netip.Addr]trafficReading
}

type trafficReading struct {
	at             time.Time
	packets, bytes uint64
	pps, bps       float64
}

func newTrafficMeter(now func() time.Time) *trafficMeter {
	if now == nil {
		now = time.Now
	}
	return &trafficMeter{now: now, last: map[netip.Addr]trafficReading{}}
}

// read records the totals of addr read just now and returns them with
// the rates.
func (m *trafficMeter) read(addr netip.Addr, packets, bytes uint64) Traffic {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, ok := m.last[addr]
	switch {
	case !ok || packets < prev.packets || bytes < prev.bytes:
		// First reading, or the counters started again (held anew).
		m.last[addr] = trafficReading{at: now, packets: packets, bytes: bytes}
		return Traffic{Packets: packets, Bytes: bytes}
	case now.Sub(prev.at) >= TrafficInterval:
		dt := now.Sub(prev.at).Seconds()
		next := trafficReading{at: now, packets: packets, bytes: bytes,
			pps: float64(packets-prev.packets) / dt, bps: float64(bytes-prev.bytes) / dt}
		m.last[addr] = next
		prev = next
	}
	return Traffic{Packets: packets, Bytes: bytes, PacketsPerSecond: prev.pps, BytesPerSecond: prev.bps}
}

// forget drops the readings of addrs: they are no longer held.
func (m *trafficMeter) forget(addrs []netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range addrs {
		delete(m.last, a)
	}
}

// The kinds of what answers for a claim, as Status.Responder says it; an
// in-kernel responder names its own (bpfresp.Kind, "ebpf"). They are not
// the agent's --responder modes (agent.ResponderMode), which choose one.
const (
	// KindSocket is the Link's own packet-socket readers.
	KindSocket = "socket"
	// KindKernel is the kernel, for an address assigned to the
	// interface: the port stays silent for it (see silence.go).
	KindKernel = "kernel"
)

// AskerCount is one asker of an address that an in-kernel responder
// answers: who asked, how many of its requests were answered, and when the
// latest was.
type AskerCount struct {
	// Addr is the address asked for.
	Addr netip.Addr
	// MAC is the asker's link-layer address: the ARP sender's, or a
	// solicitation's source link-layer option, or else its Ethernet
	// source.
	MAC wire.MAC
	// From is the address it asked from: 0.0.0.0 for an ARP probe, :: for
	// duplicate address detection.
	From netip.Addr
	// Others marks the count of the requests from askers the responder
	// did not remember one by one (a flood of new ones): MAC and From
	// are zero.
	Others bool
	// Requests counts its requests answered since the responder started
	// remembering it: a total, which only grows until the asker is
	// forgotten (see KernelResponder.Askers).
	Requests uint64
	// Last is when the latest of them was answered.
	Last time.Time
}
