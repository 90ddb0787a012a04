package ifwatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Change is the state of one interface after a change. It is not
// announce.InterfaceChange: the agent converts it (internal/agent's
// interfaceChange), copying Name, Index, MAC, Up and Deleted and turning a
// MasterIndex into the engine's Port ("a port of bridge br0").
type Change struct {
	// Name is the interface's name. A renamed interface is reported as the
	// old name deleted and the new name appearing with the same Index.
	Name string
	// Index is the interface index; an interface deleted and created again
	// under the same name comes back with a new one.
	Index int
	// MAC is the interface's hardware address; nil for interfaces without
	// one.
	MAC net.HardwareAddr
	// Up is true when the interface is administratively up and its
	// operational state is up or unknown (as for dummy and tun devices,
	// which do not report one): when it can carry traffic.
	Up bool
	// Deleted is true when the interface is gone (deleted, renamed, or moved
	// to another namespace). Index and MAC are then its last known ones.
	Deleted bool
	// MasterIndex is the index of the interface's master (a bridge, bond
	// or VRF it was made a port of), or 0 when it has none.
	MasterIndex int
}

func (c Change) same(o Change) bool {
	return c.Name == o.Name && c.Index == o.Index && c.Up == o.Up && c.Deleted == o.Deleted && bytes.Equal(c.MAC, o.MAC) &&
		c.MasterIndex == o.MasterIndex
}

// AddrChange is an address added to an interface or removed from it.
type AddrChange struct {
	// Index is the index of the interface the address is on.
	Index int
	// Prefix is the address with its prefix length.
	Prefix netip.Prefix
	// Deleted is true when the address was removed.
	Deleted bool
}

// Options configure Watch.
type Options struct {
	// Namespace is the network namespace to watch; nil means the current
	// one. The handle is only used while subscribing: the caller may close
	// it once Watch has delivered the first change.
	Namespace *netns.NsHandle
	// Addrs, when set, is told of the interfaces' addresses too, as fn
	// is of the interfaces: first every address there is, then each one
	// added or removed, from the same goroutine as fn. Nil watches the
	// interfaces alone.
	Addrs func(AddrChange)
	// Log receives errors that the subscription survives (a message it
	// could not decode, an interrupted dump), as warnings. Nil discards
	// them.
	Log *slog.Logger
}

// updateBuffer is how many link (or address) messages may wait between the netlink
// socket and fn; beyond it they wait in the socket's receive buffer.
const updateBuffer = 256

// Watch reports the interfaces of a namespace to fn: first the current state
// of every interface, then every change, in the order the kernel announced
// them, one call at a time from Watch's own goroutine. With Options.Addrs it
// reports their addresses as well, on a subscription of their own: the
// order of a link change and an address change is not the kernel's then.
// fn should return quickly: while it runs, messages queue in the socket,
// and if the socket's buffer overflows the subscription breaks.
//
// Watch returns nil when ctx is done. It returns an error when it cannot
// subscribe, or when the subscription breaks (the kernel dropped messages
// because they were not read fast enough, or the socket failed); changes may
// have been lost then, and the caller should call Watch again, which starts
// with the current state of every interface once more. An interface deleted
// while no Watch ran is not reported: compare the first reports of the new
// Watch with what you knew.
func Watch(ctx context.Context, opts Options, fn func(Change)) error {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var (
		mu   sync.Mutex
		last error // the latest error reported by a subscription
	)
	var foreign int // messages dropped as not the kernel's
	onError := func(err error) {
		if ctx.Err() != nil {
			return // the socket was closed because we are stopping
		}
		if notFromKernel(err) {
			// Only the kernel reports changes of links and addresses:
			// a message from another port (a process multicasting on
			// the group, or writing to this socket) is none, and the
			// subscription drops it and reads on. Nothing is missed,
			// so it is no warning; the first is said, with the port
			// (ss -f netlink -p names its process).
			mu.Lock()
			foreign++
			n := foreign
			mu.Unlock()
			level := slog.LevelDebug
			if n == 1 {
				level = slog.LevelInfo
			}
			log.Log(ctx, level, "interface watch: ignored a netlink message that is not the kernel's; only the kernel reports interface changes, so none is missed", "err", err, "ignored", n)
			return
		}
		mu.Lock()
		last = err
		mu.Unlock()
		log.Warn("interface watch: netlink error", "err", err)
	}
	ended := func() error {
		if ctx.Err() != nil {
			return nil
		}
		mu.Lock()
		err := last
		mu.Unlock()
		if err == nil {
			err = errors.New("closed")
		}
		return fmt.Errorf("watch interfaces: subscription ended, changes may have been missed: %w", err)
	}
	updates := make(chan netlink.LinkUpdate, updateBuffer)
	done := make(chan struct{})
	err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		Namespace:     opts.Namespace,
		ListExisting:  true,
		ErrorCallback: onError,
	})
	if err != nil {
		close(done) // stops the goroutine that would close the socket
		return fmt.Errorf("watch interfaces: subscribe to link changes: %w", err)
	}
	// The subscription's goroutine closes updates once its socket is
	// closed; wait for that, draining what it still sends, so it is gone
	// when Watch returns.
	defer func() {
		close(done)
		for range updates {
		}
	}()
	// addrs stays nil, and so is never ready, unless addresses are
	// watched.
	var addrs chan netlink.AddrUpdate
	if opts.Addrs != nil {
		addrs = make(chan netlink.AddrUpdate, updateBuffer)
		addrDone := make(chan struct{})
		err := netlink.AddrSubscribeWithOptions(addrs, addrDone, netlink.AddrSubscribeOptions{
			Namespace:     opts.Namespace,
			ListExisting:  true,
			ErrorCallback: onError,
		})
		if err != nil {
			close(addrDone)
			return fmt.Errorf("watch interfaces: subscribe to address changes: %w", err)
		}
		defer func() {
			close(addrDone)
			for range addrs {
			}
		}()
	}

	t := newTracker()
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-updates:
			if !ok {
				return ended()
			}
			for _, c := range t.update(u) {
				fn(c)
			}
		case u, ok := <-addrs:
			if !ok {
				return ended()
			}
			if c, ok := t.addr(u); ok {
				opts.Addrs(c)
			}
		}
	}
}

// tracker turns link messages into Changes: it remembers the last state
// reported for each name, and which name each index has; and address
// messages into AddrChanges: it remembers the addresses reported.
type tracker struct {
	byName  map[string]Change
	byIndex map[int]string
	addrs   map[AddrChange]bool // with Deleted false
}

func newTracker() *tracker {
	return &tracker{byName: make(map[string]Change), byIndex: make(map[int]string), addrs: make(map[AddrChange]bool)}
}

// addr returns the change that u makes, if any. The kernel sends
// RTM_NEWADDR again for an address it has when its flags or lifetimes
// change (an IPv6 address done with duplicate address detection, a
// lifetime renewed by a router advertisement), and a dump may repeat what
// the subscription told already: only an address that comes or goes is a
// change.
func (t *tracker) addr(u netlink.AddrUpdate) (AddrChange, bool) {
	a, ok := netip.AddrFromSlice(u.LinkAddress.IP)
	if !ok {
		return AddrChange{}, false
	}
	a = a.Unmap()
	ones, bits := u.LinkAddress.Mask.Size()
	if bits == 0 {
		return AddrChange{}, false // not a prefix mask
	}
	if bits == 128 && a.Is4() {
		ones -= 96
	}
	key := AddrChange{Index: u.LinkIndex, Prefix: netip.PrefixFrom(a, ones)}
	if u.NewAddr == t.addrs[key] {
		return AddrChange{}, false
	}
	if u.NewAddr {
		t.addrs[key] = true
		return key, true
	}
	delete(t.addrs, key)
	key.Deleted = true
	return key, true
}

// update returns the changes that u makes, usually none or one; a rename
// makes two.
func (t *tracker) update(u netlink.LinkUpdate) []Change {
	// The bridge module sends RTM_NEWLINK and RTM_DELLINK of family
	// AF_BRIDGE about bridge ports; a port leaving its bridge gets an
	// RTM_DELLINK although the interface stays. Only AF_UNSPEC messages
	// describe the interface itself.
	if u.IfInfomsg.Family != unix.AF_UNSPEC || u.Link == nil {
		return nil
	}
	attrs := u.Link.Attrs()
	index := int(u.IfInfomsg.Index)
	var out []Change
	if old, ok := t.byIndex[index]; ok && (u.Header.Type == unix.RTM_DELLINK || old != attrs.Name) {
		// Deleted, or renamed: either way the old name is gone.
		gone := t.byName[old]
		gone.Up, gone.Deleted = false, true
		delete(t.byName, old)
		delete(t.byIndex, index)
		out = append(out, gone)
	}
	if u.Header.Type != unix.RTM_NEWLINK {
		return out
	}
	c := Change{
		Name:        attrs.Name,
		Index:       index,
		MAC:         slices.Clone(attrs.HardwareAddr),
		Up:          attrs.RawFlags&unix.IFF_UP != 0 && (attrs.OperState == netlink.OperUp || attrs.OperState == netlink.OperUnknown),
		MasterIndex: attrs.MasterIndex,
	}
	if len(c.MAC) == 0 {
		c.MAC = nil
	}
	prev, ok := t.byName[c.Name]
	if ok && prev.same(c) {
		return out
	}
	if ok && prev.Index != index {
		// The name moved to another interface without a message saying
		// the old one lost it; forget the old index's claim to it.
		delete(t.byIndex, prev.Index)
	}
	t.byName[c.Name] = c
	t.byIndex[index] = c.Name
	return append(out, c)
}

// notFromKernel reports whether err is the subscription's report of a
// message from another sender than the kernel, which it dropped
// (vishvananda/netlink's "Wrong sender portid N, expected 0").
func notFromKernel(err error) bool {
	return strings.HasPrefix(err.Error(), "Wrong sender portid ")
}
