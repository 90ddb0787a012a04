package bpfresp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/wire"
)

// MaxLinger bounds SetLinger: a lingering address keeps an entry in the
// held map, whose room is for addresses held.
const MaxLinger = time.Hour

// maxHeld is MAX_HELD of responder.c: the room of the held map, which
// lingering addresses share with the held ones.
const maxHeld = 16384

// lingerTimes are when an address began to linger and when it stops.
type lingerTimes struct{ since, until time.Time }

// Linger is what reached an address this interface released a moment ago
// and still counts (SetLinger): the packets sent to the interface's MAC for
// it since it was released, the latest one's time (zero when none came),
// and who sent them.
type Linger struct {
	Addr    netip.Addr
	Since   time.Time
	Until   time.Time
	Packets uint64
	Bytes   uint64
	Last    time.Time
	Senders []Sender
}

// Sender is one host that sent to a lingering address: its link-layer
// address, the address it sent from, how many packets and when the latest.
// The program remembers MAX_STALE senders an interface (responder.c); the
// address's own counts stay exact beyond them.
type Sender struct {
	MAC     wire.MAC
	From    netip.Addr
	Packets uint64
	Last    time.Time
}

// SetLinger has each address dropped from now on linger for d: not
// answered, but its traffic sent to this interface's MAC counted, with its
// senders, until d has passed or it is held again (Lingering reads them).
// Zero, as opened, forgets a dropped address at once.
func (r *Responder) SetLinger(d time.Duration) error {
	if d < 0 || d > MaxLinger {
		return fmt.Errorf("linger %v on %s: give from 0 to %v", d, r.ifname, MaxLinger)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.linger = d
	return nil
}

func (r *Responder) isLingering(a netip.Addr) bool {
	_, ok := r.lingering[a]
	return ok
}

// lingerLocked has the held addresses (held) and counted ones (counted)
// linger rather than go: their counters start again from zero, then their
// entries are marked lingering, so that the program counts what arrives
// after the release, and nothing before it.
func (r *Responder) lingerLocked(held, counted []netip.Addr, gone map[netip.Addr]bool) error {
	addrs := append(slices.Clip(held), counted...)
	if len(addrs) == 0 {
		return nil
	}
	keys := make([]responderHeldKey, len(addrs))
	vals := make([]responderHeldValue, len(addrs))
	for i, a := range addrs {
		keys[i] = r.key(a)
		vals[i] = responderHeldValue{Mac: r.mac, Flags: heldLinger}
	}
	// Marked first, then counted from zero, then the senders of an
	// earlier linger and of the moment between forgotten: what counts is
	// what came after the release, and nothing before.
	var errs []error
	n, err := batchUpdate(r.maps.Held, keys, vals, 1)
	if err != nil {
		// Those not marked are answered still: take them out instead,
		// or keep them held (and say so) where that fails too.
		d, derr := batchDelete(r.maps.Held, keys[n:])
		if derr != nil {
			errs = append(errs, fmt.Errorf("drop %d addresses on %s: %w", len(keys)-n-d, r.ifname, derr))
		}
		_, _ = batchDelete(r.maps.Counters, keys[n:n+d])
		for _, a := range addrs[n : n+d] {
			delete(r.addrs, a)
			delete(r.counted, a)
		}
	}
	if _, err := r.zeroCounters(keys[:n]); err != nil {
		errs = append(errs, fmt.Errorf("count anew the traffic of %d released addresses on %s: %w", n, r.ifname, err))
	}
	if err := r.forgetSendersLocked(addrs[:n]); err != nil {
		r.log.Warn("the senders to addresses released before stay remembered", "err", err)
	}
	now := time.Now()
	times := lingerTimes{since: now, until: now.Add(r.linger)}
	for _, a := range addrs[:n] {
		delete(r.addrs, a)
		delete(r.counted, a)
		r.lingering[a] = times
	}
	if n > 0 {
		r.expireByLocked(times.until)
	}
	if err := r.forgetAskersLocked(gone); err != nil {
		r.log.Warn("the askers of released addresses stay remembered", "err", err)
	}
	return errors.Join(errs...)
}

// expireByLocked has expire run by at the latest: one timer for every
// linger, set to the earliest end.
func (r *Responder) expireByLocked(at time.Time) {
	if r.expiry != nil && !at.Before(r.expiryAt) {
		return
	}
	if r.expiry != nil {
		r.expiry.Stop()
	}
	r.expiryAt = at
	r.expiry = time.AfterFunc(time.Until(at), r.expire)
}

// makeRoomLocked ends the oldest lingers so that n more addresses fit in
// the held map: a claim takes precedence over counting a release.
func (r *Responder) makeRoomLocked(n int) {
	over := len(r.addrs) + len(r.counted) + len(r.lingering) + n - maxHeld
	if over <= 0 || len(r.lingering) == 0 {
		return
	}
	oldest := make([]netip.Addr, 0, len(r.lingering))
	for a := range r.lingering {
		oldest = append(oldest, a)
	}
	slices.SortFunc(oldest, func(x, y netip.Addr) int { return r.lingering[x].since.Compare(r.lingering[y].since) })
	r.endLingersLocked(oldest[:min(over, len(oldest))])
}

// endLingerLocked forgets the senders of addrs that lingered and are held
// or counted again: their entries and counters are overwritten already.
func (r *Responder) endLingerLocked(addrs []netip.Addr) {
	var ended []netip.Addr
	for _, a := range addrs {
		if r.isLingering(a) {
			ended = append(ended, a)
			delete(r.lingering, a)
		}
	}
	if err := r.forgetSendersLocked(ended); err != nil {
		r.log.Warn("the senders to addresses held again stay remembered", "err", err)
	}
}

// expire takes out the addresses whose linger has ended, and sets the
// timer for the next end.
func (r *Responder) expire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expiry = nil
	if r.closed {
		return
	}
	now := time.Now()
	var due []netip.Addr
	next := time.Time{}
	for a, t := range r.lingering {
		if !now.Before(t.until) {
			due = append(due, a)
		} else if next.IsZero() || t.until.Before(next) {
			next = t.until
		}
	}
	if left := r.endLingersLocked(due); left > 0 {
		// Tried again in a second: an entry left would count for ever.
		next = now.Add(time.Second)
	}
	if !next.IsZero() {
		r.expireByLocked(next)
	}
}

// endLingersLocked takes the lingering addrs out of the maps, and returns
// how many it could not.
func (r *Responder) endLingersLocked(addrs []netip.Addr) int {
	if len(addrs) == 0 {
		return 0
	}
	keys := make([]responderHeldKey, len(addrs))
	for i, a := range addrs {
		keys[i] = r.key(a)
	}
	n, err := batchDelete(r.maps.Held, keys)
	if err != nil {
		r.log.Warn("released addresses linger on", "interface", r.ifname, "count", len(keys)-n, "err", err)
	}
	_, _ = batchDelete(r.maps.Counters, keys[:n])
	for _, a := range addrs[:n] {
		delete(r.lingering, a)
	}
	if err := r.forgetSendersLocked(addrs[:n]); err != nil {
		r.log.Warn("the senders to addresses no longer lingering stay remembered", "err", err)
	}
	return len(addrs) - n
}

// forgetSendersLocked deletes the senders remembered of addrs.
func (r *Responder) forgetSendersLocked(addrs []netip.Addr) error {
	if len(addrs) == 0 {
		return nil
	}
	of := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		of[a] = true
	}
	var doomed []responderAskerKey
	err := eachEntry(r.maps.Stale, func(k responderAskerKey, _ responderAskerValue) {
		if of[k.Target.addr()] {
			doomed = append(doomed, k)
		}
	})
	if err != nil {
		err = fmt.Errorf("read the senders to released addresses on %s: %w", r.ifname, err)
	}
	for _, k := range doomed {
		if derr := r.maps.Stale.Delete(k); derr != nil && !errors.Is(derr, ebpf.ErrKeyNotExist) {
			err = errors.Join(err, fmt.Errorf("forget a sender to %s on %s: %w", k.Target.addr(), r.ifname, derr))
		}
	}
	return err
}

// Lingering calls fn with what reached each lingering address (SetLinger)
// since it was released, senders sorted by their latest packet, newest
// first.
func (r *Responder) Lingering(fn func(Linger)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return net.ErrClosed
	}
	if len(r.lingering) == 0 {
		return nil
	}
	var mono unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		return fmt.Errorf("read the monotonic clock for the released addresses on %s: %w", r.ifname, err)
	}
	now, monoNow := time.Now(), mono.Nano()
	wall := func(ns uint64) time.Time { return now.Add(-time.Duration(monoNow - int64(ns))) }
	senders := map[netip.Addr][]Sender{}
	err := eachEntry(r.maps.Stale, func(k responderAskerKey, v responderAskerValue) {
		a := k.Target.addr()
		if !r.isLingering(a) || v.Requests == 0 {
			return
		}
		from := netip.AddrFrom16(k.From)
		if a.Is4() {
			from = from.Unmap()
		}
		senders[a] = append(senders[a], Sender{MAC: wire.MAC(k.Mac), From: from, Packets: v.Requests, Last: wall(v.LastNs)})
	})
	if err != nil {
		return fmt.Errorf("read the senders to released addresses on %s: %w", r.ifname, err)
	}
	for a, t := range r.lingering {
		l := Linger{Addr: a, Since: t.since, Until: t.until, Senders: senders[a]}
		var per []responderCounters
		if err := r.maps.Counters.Lookup(r.key(a), &per); err == nil {
			var last uint64
			for _, p := range per {
				l.Packets += p.Packets
				l.Bytes += p.Bytes
				last = max(last, p.LastNs)
			}
			if last != 0 {
				l.Last = wall(last)
			}
		}
		slices.SortFunc(l.Senders, func(x, y Sender) int { return y.Last.Compare(x.Last) })
		fn(l)
	}
	return nil
}

// eachEntry calls fn with every entry of an asker-keyed map, read in
// batches of askersBatch (one by one on a kernel without batch lookups).
func eachEntry(m *ebpf.Map, fn func(responderAskerKey, responderAskerValue)) error {
	keys := make([]responderAskerKey, askersBatch)
	vals := make([]responderAskerValue, askersBatch)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			fn(keys[i], vals[i])
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			var k responderAskerKey
			var v responderAskerValue
			it := m.Iterate()
			for it.Next(&k, &v) {
				fn(k, v)
			}
			return it.Err()
		case err != nil:
			return err
		}
	}
}

// LingerEnds returns when the last lingering address stops lingering; zero
// when none lingers.
func (r *Responder) LingerEnds() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var end time.Time
	for _, t := range r.lingering {
		if t.until.After(end) {
			end = t.until
		}
	}
	return end
}

// Same says whether the responder answers on interface ifindex from mac:
// one kept open for its lingering addresses after its port closed can
// serve a new port of the same interface.
func (r *Responder) Same(ifindex int, mac net.HardwareAddr) bool {
	me, ok := wire.MACOf(mac)
	r.mu.Lock()
	defer r.mu.Unlock()
	return ok && !r.closed && r.ifindex == ifindex && r.mac == me
}
