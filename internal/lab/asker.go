package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/wire"
)

// An Asker asks a lab's segment who has some addresses, from one host, as
// a client whose cache has lapsed does: an ARP request to broadcast for an
// IPv4 address, a neighbor solicitation to the solicited-node group for an
// IPv6 one, each from the host's own address and MAC, so that every answer
// comes back to it. It sends on a packet socket of its own, opened in the
// host's namespace, and never touches the host's neighbour table; a
// Witness on the same host counts the answers.
type Asker struct {
	fd         int
	ifindex    int
	mac        wire.MAC
	src4, src6 netip.Addr
}

// OpenAsker opens an Asker on ifname of the host whose namespace is at
// netnsPath, asking from src4 and src6 (either may be the zero Addr, and
// then that family is not asked).
func OpenAsker(netnsPath, ifname string, src4, src6 netip.Addr) (*Asker, error) {
	a := &Asker{fd: -1, src4: src4, src6: src6}
	err := InNetns(netnsPath, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		mac, err := wire.MACFrom(ifi.HardwareAddr)
		if err != nil {
			return err
		}
		// Protocol 0: a socket that sends and receives nothing.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		a.fd, a.ifindex, a.mac = fd, ifi.Index, mac
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open a packet socket to ask from %s: %w", ifname, err)
	}
	return a, nil
}

// Ask sends one request for addr.
func (a *Asker) Ask(addr netip.Addr) error {
	var (
		b   [wire.NDLenWithLinkLayer]byte
		n   int
		dst wire.MAC
	)
	switch {
	case addr.Is4() && a.src4.IsValid():
		dst = wire.BroadcastMAC
		n = wire.PutARP(b[:], dst, a.mac, &wire.ARP{Op: wire.OpRequest, SenderMAC: a.mac, SenderIP: a.src4, TargetIP: addr})
	case addr.Is6() && a.src6.IsValid():
		group := wire.SolicitedNode(addr)
		dst = wire.GroupMAC(group)
		n = wire.PutND(b[:], dst, a.mac, &wire.ND{Type: wire.TypeNeighborSolicitation, Src: a.src6, Dst: group, Target: addr, LinkLayer: a.mac, HasLinkLayer: true})
	default:
		return fmt.Errorf("no source address to ask for %s from", addr)
	}
	frame := b[:n]
	if len(frame) < wire.MinFrameLen {
		padded := make([]byte, wire.MinFrameLen)
		copy(padded, frame)
		frame = padded
	}
	sa := &unix.SockaddrLinklayer{Ifindex: a.ifindex, Halen: 6}
	copy(sa.Addr[:], dst[:])
	if err := unix.Sendto(a.fd, frame, 0, sa); err != nil {
		return fmt.Errorf("ask who has %s: %w", addr, err)
	}
	return nil
}

// Run asks for each of addrs every period until ctx is done (nil), or
// until a send fails (its error): a witness whose asker stopped would
// hear silence that proves nothing.
func (a *Asker) Run(ctx context.Context, every time.Duration, addrs ...netip.Addr) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, addr := range addrs {
			if err := a.Ask(addr); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Close closes the Asker's socket.
func (a *Asker) Close() error {
	if a.fd < 0 {
		return nil
	}
	err := unix.Close(a.fd)
	a.fd = -1
	return err
}
