package assign

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Netlink adds claimed addresses to a network namespace's interfaces and
// removes them again, through rtnetlink; it is the engine's
// announce.Assigner. Add reports added=false, and changes nothing, when the
// address was already on the interface; the caller must then never Remove
// it. Remove of an address that is not there succeeds. It is safe for
// concurrent use.
type Netlink struct {
	h *netlink.Handle
}

// New returns a Netlink for the namespace ns, or for the current one if ns is
// nil. Close releases its socket.
func New(ns *netns.NsHandle) (*Netlink, error) {
	var (
		h   *netlink.Handle
		err error
	)
	if ns == nil {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		h, err = netlink.NewHandleAt(*ns, unix.NETLINK_ROUTE)
	}
	if err != nil {
		return nil, fmt.Errorf("open rtnetlink socket: %w", err)
	}
	return &Netlink{h: h}, nil
}

// Close closes the netlink socket.
func (n *Netlink) Close() error {
	n.h.Close()
	return nil
}

// Add puts a on the interface ifname as a host prefix (/32 or /128, IPv6
// without duplicate address detection) and reports added=true. If a is
// already on that interface, with any prefix length, it changes nothing and
// reports added=false.
func (n *Netlink) Add(ifname string, a netip.Addr) (added bool, err error) {
	return n.add(ifname, a, 0)
}

// AddFor is Add with a valid lifetime: unless Extend lengthens it first,
// the kernel removes the address by itself once life has passed, whatever
// became of the process that added it (see the package comment). life is
// cut to whole seconds, as the kernel counts it, and must be at least one.
func (n *Netlink) AddFor(ifname string, a netip.Addr, life time.Duration) (added bool, err error) {
	if life < time.Second {
		return false, fmt.Errorf("add %s to %s: a lifetime of %s is shorter than the kernel's shortest, a second", a, ifname, life)
	}
	return n.add(ifname, a, life)
}

// Extend gives a, which AddFor put on ifname, a valid lifetime of life
// from now, cut to whole seconds (at least one). An address the kernel
// removed meanwhile, its lifetime over, is put back: call it only for an
// address that is still to be there. An interface that is gone is an
// error.
func (n *Netlink) Extend(ifname string, a netip.Addr, life time.Duration) error {
	p, err := hostPrefix(a)
	if err != nil {
		return fmt.Errorf("extend %s on %s: %w", a, ifname, err)
	}
	if life < time.Second {
		return fmt.Errorf("extend %s on %s: a lifetime of %s is shorter than the kernel's shortest, a second", a, ifname, life)
	}
	link, err := n.h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("extend %s on %s: %w", p, ifname, linkErr(err))
	}
	if err := n.h.AddrReplace(link, netlinkAddr(p, life)); err != nil {
		return fmt.Errorf("extend %s on %s: %w", p, ifname, err)
	}
	return nil
}

func (n *Netlink) add(ifname string, a netip.Addr, life time.Duration) (added bool, err error) {
	p, err := hostPrefix(a)
	if err != nil {
		return false, fmt.Errorf("add %s to %s: %w", a, ifname, err)
	}
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("add %s to %s: %w", p, ifname, err)
	}
	link, err := n.h.LinkByName(ifname)
	if err != nil {
		return fail(linkErr(err))
	}
	has, err := n.has(link, a)
	if err != nil {
		return fail(err)
	}
	if has {
		return false, nil
	}
	err = n.h.AddrAdd(link, netlinkAddr(p, life))
	switch {
	case errors.Is(err, unix.EEXIST):
		// Added by someone else since we looked: not ours either.
		return false, nil
	case errors.Is(err, unix.EACCES) && a.Is6():
		return fail(fmt.Errorf("IPv6 is turned off on the interface: %w", err))
	case err != nil:
		return fail(err)
	}
	return true, nil
}

// Remove deletes the host prefix of a (/32 or /128) from the interface
// ifname. An address that is not there, or only with another prefix length,
// or an interface that is gone, is not an error: there is nothing of ours to
// remove.
func (n *Netlink) Remove(ifname string, a netip.Addr) error {
	p, err := hostPrefix(a)
	if err != nil {
		return fmt.Errorf("remove %s from %s: %w", a, ifname, err)
	}
	link, err := n.h.LinkByName(ifname)
	if err != nil {
		if errors.As(err, &netlink.LinkNotFoundError{}) {
			return nil // the address went with the interface
		}
		return fmt.Errorf("remove %s from %s: %w", p, ifname, linkErr(err))
	}
	err = n.h.AddrDel(link, netlinkAddr(p, 0))
	// EADDRNOTAVAIL: no such address (with that prefix length). ENODEV
	// (IPv4) and ENXIO (IPv6): the interface has no addresses of that
	// family at all, or has just gone.
	if err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("remove %s from %s: %w", p, ifname, err)
	}
	return nil
}

// has reports whether a is on link with any prefix length.
func (n *Netlink) has(link netlink.Link, a netip.Addr) (bool, error) {
	family := netlink.FAMILY_V4
	if a.Is6() {
		family = netlink.FAMILY_V6
	}
	// A dump that addresses changed under (the kernel's own, or the MLD
	// groups of a large claim) is interrupted: list again.
	var (
		addrs []netlink.Addr
		err   error
	)
	for range 5 {
		if addrs, err = n.h.AddrList(link, family); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return false, fmt.Errorf("list addresses: %w", err)
	}
	for _, x := range addrs {
		if got, ok := netip.AddrFromSlice(x.IP); ok && got.Unmap() == a {
			return true, nil
		}
	}
	return false, nil
}

// hostPrefix returns a as a /32 or /128, refusing what cannot be put on an
// interface as is.
func hostPrefix(a netip.Addr) (netip.Prefix, error) {
	switch {
	case !a.IsValid():
		return netip.Prefix{}, errors.New("no address")
	case a.Zone() != "":
		return netip.Prefix{}, errors.New("an address with a zone cannot be added")
	case a.Is4In6():
		return netip.Prefix{}, fmt.Errorf("an IPv4-mapped address cannot be added: use %s", a.Unmap())
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// netlinkAddr is p as netlink adds it, with a valid and preferred lifetime
// of life in whole seconds (0: forever). The preferred lifetime is the
// valid one: a deprecated address would be passed over as a source.
func netlinkAddr(p netip.Prefix, life time.Duration) *netlink.Addr {
	bits := p.Addr().BitLen()
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(bits, bits)}}
	if secs := int(life / time.Second); secs > 0 {
		addr.ValidLft, addr.PreferedLft = secs, secs
	}
	if p.Addr().Is6() {
		addr.Flags = unix.IFA_F_NODAD
	}
	return addr
}

// linkErr turns netlink's "Link not found" into a sentence an operator reads.
func linkErr(err error) error {
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return fmt.Errorf("no such interface: %w", err)
	}
	return err
}
