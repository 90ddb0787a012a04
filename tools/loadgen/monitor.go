package loadgen

import (
	"context"
	"fmt"
	"github.com/vipctl/vip/internal/lab"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/wire"
)

// Monitor watches an interface for gratuitous frames (ARP announcements and
// gratuitous replies, unsolicited neighbor advertisements) and tells when
// the first one for an address arrived, by the kernel's receive timestamp.
type Monitor struct {
	mu     sync.Mutex
	fds    map[uint16]int // by EtherType
	closed bool
}

// announceFilters let in ARP frames, and ICMPv6 neighbor advertisements.
func announceFilters() map[uint16][]bpf.Instruction {
	return map[uint16][]bpf.Instruction{
		wire.EtherTypeARP: {
			bpf.LoadAbsolute{Off: offEtherType, Size: 2},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.EtherTypeARP, SkipTrue: 1},
			bpf.RetConstant{Val: 0xffff},
			bpf.RetConstant{Val: 0},
		},
		wire.EtherTypeIPv6: {
			bpf.LoadAbsolute{Off: offEtherType, Size: 2},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.EtherTypeIPv6, SkipTrue: 5},
			bpf.LoadAbsolute{Off: offIPv6 + 6, Size: 1},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 58, SkipTrue: 3},
			bpf.LoadAbsolute{Off: offICMP, Size: 1},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wire.TypeNeighborAdvertisement, SkipTrue: 1},
			bpf.RetConstant{Val: 0xffff},
			bpf.RetConstant{Val: 0},
		},
	}
}

// OpenMonitor starts watching ifname inside the network namespace at netns
// (empty: the caller's). Frames that arrive from then on are seen.
func OpenMonitor(netns, ifname string) (*Monitor, error) {
	m := &Monitor{fds: map[uint16]int{}}
	err := lab.InNetns(netns, func() error {
		ifindex, _, err := interfaceIn(ifname)
		if err != nil {
			return err
		}
		for proto, prog := range announceFilters() {
			fd, err := openReceiver(ifindex, proto, prog)
			if err != nil {
				return err
			}
			m.fds[proto] = fd
		}
		return nil
	})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("monitor %s: %w", ifname, err)
	}
	return m, nil
}

// First returns the receive time of the first gratuitous frame for addr
// that arrived since the monitor opened or since the previous First. It
// waits until one comes or ctx is done.
func (m *Monitor) First(ctx context.Context, addr netip.Addr) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return time.Time{}, fmt.Errorf("monitor: closed")
	}
	proto := uint16(wire.EtherTypeARP)
	if addr.Is6() {
		proto = wire.EtherTypeIPv6
	}
	fd, ok := m.fds[proto]
	if !ok {
		return time.Time{}, fmt.Errorf("monitor: no socket for %s", addr)
	}
	b := newBatch(16, unix.MSG_WAITFORONE)
	for ctx.Err() == nil {
		n, err := b.recv(fd) // returns within pollTimeout
		if err != nil {
			return time.Time{}, fmt.Errorf("monitor: %w", err)
		}
		for i := range n {
			if announcementOf(b.frame(i), addr) {
				if ns := b.rxTime(i); ns != 0 {
					return time.Unix(0, ns), nil
				}
				return time.Time{}, fmt.Errorf("monitor: a frame for %s without a kernel timestamp", addr)
			}
		}
	}
	return time.Time{}, fmt.Errorf("no gratuitous frame for %s: %w", addr, ctx.Err())
}

// Close stops watching.
func (m *Monitor) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for _, fd := range m.fds {
		unix.Close(fd)
	}
	clear(m.fds)
	return nil
}
