package loadgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/lab"
)

// FloorConfig configures a Floor responder.
type FloorConfig struct {
	// Netns is the network namespace to open the socket in ("" for the
	// caller's), Interface the interface to answer on.
	Netns, Interface string
	// Addr is the IPv4 address answered for.
	Addr netip.Addr
	// Spin reads without ever sleeping: the thread polls the socket in a
	// loop, using a whole core, and no frame waits for a wake-up.
	Spin bool
}

// Floor is the smallest userspace ARP responder: one thread locked to
// itself reads a packet socket and writes the reply, with nothing else
// around it (no filter, no table, no runtime poller). The benchmark runs it
// beside vip to show what any responder that sleeps between frames pays on
// the machine: the wake-up the kernel's own answer, given in the sender's
// context, never waits for.
type Floor struct {
	fd     int
	cfg    FloorConfig
	mac    net.HardwareAddr
	cancel context.CancelFunc
	done   chan error
	once   sync.Once

	answered uint64
}

// StartFloor opens the socket and starts answering until Stop.
func StartFloor(cfg FloorConfig) (*Floor, error) {
	if !cfg.Addr.Is4() {
		return nil, fmt.Errorf("floor responder: %s is not an IPv4 address", cfg.Addr)
	}
	f := &Floor{cfg: cfg, done: make(chan error, 1)}
	err := lab.InNetns(cfg.Netns, func() error {
		ifi, err := net.InterfaceByName(cfg.Interface)
		if err != nil {
			return err
		}
		f.mac = ifi.HardwareAddr
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind to %s: %w", cfg.Interface, err)
		}
		// A receive timeout lets a sleeping reader see Stop.
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000}); err != nil {
			unix.Close(fd)
			return err
		}
		f.fd = fd
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("floor responder on %s: %w", cfg.Interface, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { f.done <- f.serve(ctx) }()
	return f, nil
}

func (f *Floor) serve(ctx context.Context) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if f.cfg.Spin {
		if err := unix.SetNonblock(f.fd, true); err != nil {
			return err
		}
	}
	want := f.cfg.Addr.As4()
	buf := make([]byte, 1600)
	out := make([]byte, 42)
	for ctx.Err() == nil {
		n, err := unix.Read(f.fd, buf)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err != nil:
			return err
		}
		fr := buf[:n]
		// An ARP request (Ethernet, IPv4) for the address.
		if n < 42 || binary.BigEndian.Uint16(fr[20:]) != 1 || [4]byte(fr[38:42]) != want {
			continue
		}
		copy(out[0:6], fr[22:28]) // to the sender hardware address
		copy(out[6:12], f.mac)
		copy(out[12:22], fr[12:22])
		binary.BigEndian.PutUint16(out[20:], 2)
		copy(out[22:28], f.mac)
		copy(out[28:32], want[:])
		copy(out[32:38], fr[22:28])
		copy(out[38:42], fr[28:32])
		if _, err := unix.Write(f.fd, out); err == nil {
			f.answered++
		}
	}
	return nil
}

// Stop stops answering, closes the socket and returns how many replies
// went out.
func (f *Floor) Stop() (uint64, error) {
	var err error
	f.once.Do(func() {
		f.cancel()
		err = <-f.done
		err = errors.Join(err, unix.Close(f.fd))
	})
	return f.answered, err
}
