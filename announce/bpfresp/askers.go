package bpfresp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/wire"
)

// A Responder is the one announce.KernelResponder: a Link answers
// through it in place of its socket readers.
var _ announce.KernelResponder = (*Responder)(nil)

// askerOthers is ASKER_OTHERS of responder.c: the entry that counts the
// requests of the askers not remembered one by one.
const askerOthers = 1

// askersBatch is how many askers one system call of Askers reads.
const askersBatch = 512

// Askers calls fn with each asker the program remembers of an address it
// answers for: who asked (its link-layer address and the address it asked
// from), how many of its requests were answered, and when the latest was.
// The program remembers the latest MAX_ASKERS askers of the interface
// (responder.c); an asker forgotten and seen again starts from one, and
// LetGo forgets the askers of the addresses it drops. Each CPU starts
// remembering at most NEW_ASKERS new askers a second: the requests of the
// others count in one entry per address, reported with Others set.
func (r *Responder) Askers(fn func(announce.AskerCount)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return net.ErrClosed
	}
	// The program stamps CLOCK_MONOTONIC; read it and the wall clock
	// together to turn one into the other.
	var mono unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		return fmt.Errorf("read the monotonic clock for the askers on %s: %w", r.ifname, err)
	}
	now, monoNow := time.Now(), mono.Nano()
	emit := func(k responderAskerKey, v responderAskerValue) {
		a := k.Target.addr()
		if !r.addrs[a] || v.Requests == 0 {
			return // dropped while a request was answered: LetGo forgot the rest
		}
		last := now.Add(-time.Duration(monoNow - int64(v.LastNs)))
		if k.Flags&askerOthers != 0 {
			fn(announce.AskerCount{Addr: a, Others: true, Requests: v.Requests, Last: last})
			return
		}
		from := netip.AddrFrom16(k.From)
		if a.Is4() {
			from = from.Unmap()
		}
		fn(announce.AskerCount{Addr: a, MAC: wire.MAC(k.Mac), From: from, Requests: v.Requests, Last: last})
	}
	return r.eachAskerLocked(emit)
}

// eachAskerLocked calls fn with every entry of the askers map.
func (r *Responder) eachAskerLocked(fn func(responderAskerKey, responderAskerValue)) error {
	if err := eachEntry(r.maps.Askers, fn); err != nil {
		return fmt.Errorf("read the askers on %s: %w", r.ifname, err)
	}
	return nil
}

// forgetAskersLocked deletes the askers of the addresses in gone, so that
// an address held again counts its askers from nothing.
func (r *Responder) forgetAskersLocked(gone map[netip.Addr]bool) error {
	if len(gone) == 0 {
		return nil
	}
	var doomed []responderAskerKey
	err := r.eachAskerLocked(func(k responderAskerKey, _ responderAskerValue) {
		if gone[k.Target.addr()] {
			doomed = append(doomed, k)
		}
	})
	for _, k := range doomed {
		if derr := r.maps.Askers.Delete(k); derr != nil && !errors.Is(derr, ebpf.ErrKeyNotExist) {
			err = errors.Join(err, fmt.Errorf("forget an asker of %s on %s: %w", k.Target.addr(), r.ifname, derr))
		}
	}
	return err
}
