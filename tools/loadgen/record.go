package loadgen

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/internal/wire"
)

// A Recorder keeps the ARP frames and the neighbor solicitations and
// advertisements that one host sends, as another host on the segment
// receives them, with the kernel's receive timestamps: a host's gratuitous
// traffic and probes as the wire carries them.
type Recorder struct {
	fd    int
	stop  chan struct{}
	done  chan struct{}
	heard []Heard
	err   error
}

// Heard is one frame a Recorder kept.
type Heard struct {
	At time.Time
	// Addr is the address the frame is about: an ARP frame's sender
	// address (its target for a probe), a solicitation's or an
	// advertisement's target.
	Addr netip.Addr
	// Probe is set on an ARP probe (sender address 0.0.0.0) and on a
	// neighbor solicitation; announcements and advertisements leave it
	// unset.
	Probe bool
}

const ethPAll = 0x0003

// recordFilter lets in ARP frames, neighbor solicitations and neighbor
// advertisements whose Ethernet source is from.
func recordFilter(from net.HardwareAddr) []bpf.Instruction {
	hi, lo := binary.BigEndian.Uint32(from[0:4]), binary.BigEndian.Uint16(from[4:6])
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: 6, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: hi, SkipTrue: 10},
		bpf.LoadAbsolute{Off: 10, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(lo), SkipTrue: 8},
		bpf.LoadAbsolute{Off: offEtherType, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: wire.EtherTypeARP, SkipTrue: 7},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.EtherTypeIPv6, SkipTrue: 5},
		bpf.LoadAbsolute{Off: offIPv6 + 6, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 58, SkipTrue: 3},
		bpf.LoadAbsolute{Off: offICMP, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpLessThan, Val: wire.TypeNeighborSolicitation, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpLessOrEqual, Val: wire.TypeNeighborAdvertisement, SkipTrue: 1},
		bpf.RetConstant{Val: 0},
		bpf.RetConstant{Val: 0xffff},
	}
}

// Record starts keeping what the host with MAC from sends, as ifname
// inside the network namespace at netns (empty: the caller's) receives
// it. Stop ends it.
func Record(netns, ifname string, from net.HardwareAddr) (*Recorder, error) {
	if len(from) != 6 {
		return nil, fmt.Errorf("record: %q is no Ethernet address", from)
	}
	r := &Recorder{fd: -1, stop: make(chan struct{}), done: make(chan struct{})}
	err := lab.InNetns(netns, func() error {
		ifindex, _, err := interfaceIn(ifname)
		if err != nil {
			return err
		}
		r.fd, err = openReceiver(ifindex, ethPAll, recordFilter(from))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record on %s: %w", ifname, err)
	}
	go r.read()
	return r, nil
}

func (r *Recorder) read() {
	defer close(r.done)
	b := newBatch(64, unix.MSG_WAITFORONE)
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		n, err := b.recv(r.fd) // returns within pollTimeout
		if err != nil {
			r.err = fmt.Errorf("record: %w", err)
			return
		}
		for i := range n {
			h, ok := heardOf(b.frame(i))
			if !ok {
				continue
			}
			ns := b.rxTime(i)
			if ns == 0 {
				r.err = fmt.Errorf("record: a frame without a kernel timestamp")
				return
			}
			h.At = time.Unix(0, ns)
			r.heard = append(r.heard, h)
		}
	}
}

// heardOf reads what a frame the filter let in is about.
func heardOf(b []byte) (Heard, bool) {
	f, err := wire.Parse(b, wire.Answer)
	switch {
	case err != nil:
		return Heard{}, false
	case f.EtherType == wire.EtherTypeARP && f.ARP.SenderIP.IsUnspecified():
		return Heard{Addr: f.ARP.TargetIP, Probe: true}, true
	case f.EtherType == wire.EtherTypeARP:
		return Heard{Addr: f.ARP.SenderIP}, true
	default:
		return Heard{Addr: f.ND.Target, Probe: f.ND.Type == wire.TypeNeighborSolicitation}, true
	}
}

// Stop ends the recording and returns what was kept, in the order
// received, and how many frames the socket dropped.
func (r *Recorder) Stop() ([]Heard, uint32, error) {
	close(r.stop)
	<-r.done
	var drops uint32
	if st, err := unix.GetsockoptTpacketStats(r.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
		drops = st.Drops
	}
	unix.Close(r.fd)
	return r.heard, drops, r.err
}
