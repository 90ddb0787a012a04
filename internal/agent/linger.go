package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/announce/bpfresp"
	"github.com/vipctl/vip/internal/batchio"
	"github.com/vipctl/vip/internal/store"
)

// DefaultLinger is how long the in-kernel responder keeps counting the
// traffic of an address after releasing it (vip agent --linger): long
// enough for vip drain's longest wait (its --timeout defaults to 2m), and
// past Linux's longest REACHABLE time (45 s with the default
// base_reachable_time of 30 s) plus its probes, after which a neighbour
// that ignored every gratuitous advertisement has asked again.
const DefaultLinger = 5 * time.Minute

// lingerEvery is how often the agent reads what reached its lingering
// addresses and, when it changed, writes it to the store.
const lingerEvery = time.Second

// lingerHeartbeat is how often the agent writes the record while
// addresses linger, changed or not, so that vip drain can tell a quiet
// node from one whose writes stopped.
const lingerHeartbeat = 5 * time.Second

// lingerer is a port's responder that counts after a release
// (bpfresp.Responder).
type lingerer interface {
	SetLinger(time.Duration) error
	Lingering(func(bpfresp.Linger)) error
	LingerEnds() time.Time
	Same(ifindex int, mac net.HardwareAddr) bool
}

// lingerBook knows, for each interface with a port, whether it counts the
// traffic of the addresses it released, and reads those counts.
type lingerBook struct {
	linger time.Duration

	mu      sync.Mutex
	ports   map[string]lingerer
	sockets map[string]bool
	// parked are the responders whose port closed while addresses
	// linger on them: kept open, still counting, until the last linger
	// ends or a new port of the interface takes them.
	parked map[string]announce.KernelResponder
	// stopping is set once the agent stops (closeParked): a responder
	// then closes with its port.
	stopping bool
}

func newLingerBook(linger time.Duration) *lingerBook {
	return &lingerBook{linger: linger, ports: map[string]lingerer{}, sockets: map[string]bool{}, parked: map[string]announce.KernelResponder{}}
}

// parkedResponder is a port's in-kernel responder whose Close parks it
// while addresses linger on it (the engine closes a port with its last
// claim, which a drain's moves release).
type parkedResponder struct {
	announce.KernelResponder
	book *lingerBook
	name string
}

func (p *parkedResponder) Close() error { return p.book.park(p.name, p.KernelResponder) }

// wrap returns resp as its port takes it: parked on Close while its
// addresses linger.
func (b *lingerBook) wrap(ifname string, resp announce.KernelResponder) announce.KernelResponder {
	if _, ok := resp.(lingerer); !ok || b.linger == 0 {
		return resp
	}
	return &parkedResponder{KernelResponder: resp, book: b, name: ifname}
}

// park keeps resp open until its last linger ends, or closes it now when
// nothing lingers on it.
func (b *lingerBook) park(ifname string, resp announce.KernelResponder) error {
	l, ok := resp.(lingerer)
	end := time.Time{}
	if ok {
		end = l.LingerEnds()
	}
	b.mu.Lock()
	if end.IsZero() || b.stopping {
		b.mu.Unlock()
		return resp.Close()
	}
	old := b.parked[ifname]
	b.parked[ifname] = resp
	b.mu.Unlock()
	if old != nil && old != resp {
		_ = old.Close()
	}
	b.closeWhenDone(ifname, resp, l, end)
	return nil
}

// closeWhenDone closes the parked resp once its last linger has ended: at
// end, or later if addresses began to linger on it since (it served a port
// again meanwhile), unless a port took it back.
func (b *lingerBook) closeWhenDone(ifname string, resp announce.KernelResponder, l lingerer, end time.Time) {
	time.AfterFunc(time.Until(end)+100*time.Millisecond, func() {
		b.mu.Lock()
		parked := b.parked[ifname] == resp
		b.mu.Unlock()
		if !parked {
			return
		}
		if later := l.LingerEnds(); later.After(time.Now()) {
			b.closeWhenDone(ifname, resp, l, later)
			return
		}
		b.unpark(ifname, resp, true)
	})
}

// unpark takes resp off the parked ones, closing it if asked, when it is
// still the interface's parked responder.
func (b *lingerBook) unpark(ifname string, resp announce.KernelResponder, closeIt bool) bool {
	b.mu.Lock()
	ok := b.parked[ifname] == resp
	if ok {
		delete(b.parked, ifname)
	}
	b.mu.Unlock()
	if ok && closeIt {
		_ = resp.Close()
	}
	return ok
}

// takeParked returns the responder parked on ifi, for a new port there,
// when it still answers on that interface from its MAC; one that does not
// is closed.
func (b *lingerBook) takeParked(ifi *net.Interface) announce.KernelResponder {
	b.mu.Lock()
	resp := b.parked[ifi.Name]
	b.mu.Unlock()
	if resp == nil {
		return nil
	}
	if l, ok := resp.(lingerer); ok && l.Same(ifi.Index, ifi.HardwareAddr) && b.unpark(ifi.Name, resp, false) {
		return resp
	}
	b.unpark(ifi.Name, resp, true)
	return nil
}

// closeParked closes every parked responder, and from then on each
// port's responder closes with its port rather than parking: the agent
// stops, and nothing reads their counts after it. The closes run together
// in the background, beside the ports' own (each detach of a program
// waits for a grace period of the kernel's: batchio.CloseAll); the
// returned wait waits for them.
func (b *lingerBook) closeParked() (wait func()) {
	b.mu.Lock()
	b.stopping = true
	parked := b.parked
	b.parked = map[string]announce.KernelResponder{}
	b.mu.Unlock()
	closes := make([]func() error, 0, len(parked))
	for _, resp := range parked {
		closes = append(closes, resp.Close)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = batchio.CloseAll(closes...)
	}()
	return func() { <-done }
}

// opened notes the port opened on ifname: resp is its in-kernel responder,
// nil for one on sockets, which counts nothing after a release.
func (b *lingerBook) opened(ifname string, resp announce.KernelResponder, log *slog.Logger) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.ports, ifname)
	delete(b.sockets, ifname)
	l, ok := resp.(lingerer)
	if !ok {
		b.sockets[ifname] = true
		return
	}
	if err := l.SetLinger(b.linger); err != nil {
		log.Warn("the responder does not count the traffic of released addresses", "interface", ifname, "err", err)
		b.sockets[ifname] = true
		return
	}
	b.ports[ifname] = l
}

// record reads what reached every lingering address, as the store keeps
// it, addresses with the latest traffic first.
func (b *lingerBook) record(log *slog.Logger) store.Lingering {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec := store.Lingering{Linger: store.Duration(b.linger)}
	for name := range b.sockets {
		rec.Uncounted = append(rec.Uncounted, name)
	}
	slices.Sort(rec.Uncounted)
	for name, l := range b.ports {
		err := l.Lingering(func(g bpfresp.Linger) { rec.Addrs = append(rec.Addrs, lingerAddr(name, g)) })
		switch {
		case errors.Is(err, net.ErrClosed):
			delete(b.ports, name) // the interface's port closed
		case err != nil:
			log.Warn("read the traffic of released addresses", "interface", name, "err", err)
		}
	}
	slices.SortFunc(rec.Addrs, func(x, y store.LingerAddr) int { return x.Addr.Compare(y.Addr) })
	if len(rec.Addrs) > store.MaxLingerAddrs {
		rec.Omitted = len(rec.Addrs) - store.MaxLingerAddrs
		rec.Addrs = rec.Addrs[:store.MaxLingerAddrs]
	}
	boundSenders(rec.Addrs)
	return rec
}

// boundSenders keeps MaxLingerSendersAll senders in all, given to the
// addresses with the latest traffic first.
func boundSenders(addrs []store.LingerAddr) {
	order := make([]int, len(addrs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return addrs[y].Last.Compare(addrs[x].Last) })
	left := store.MaxLingerSendersAll
	for _, i := range order {
		la := &addrs[i]
		keep := min(len(la.Senders), left)
		la.MoreSenders += len(la.Senders) - keep
		for _, s := range la.Senders[keep:] {
			la.MorePackets += s.Packets
		}
		la.Senders = la.Senders[:keep]
		left -= keep
	}
}

// sameCounts says whether two records tell the same counts: the times of
// the latest packets, which each read of the kernel's clock moves by a
// little, are left out.
func sameCounts(x, y store.Lingering) bool {
	strip := func(l store.Lingering) store.Lingering {
		l.Addrs = slices.Clone(l.Addrs)
		for i := range l.Addrs {
			la := &l.Addrs[i]
			la.Last = time.Time{}
			la.Senders = slices.Clone(la.Senders)
			for j := range la.Senders {
				la.Senders[j].Last = time.Time{}
			}
		}
		return l
	}
	return reflect.DeepEqual(strip(x), strip(y))
}

func lingerAddr(ifname string, g bpfresp.Linger) store.LingerAddr {
	la := store.LingerAddr{
		Addr: g.Addr, Interface: ifname, Since: g.Since.UTC(), Until: g.Until.UTC(),
		Packets: g.Packets, Bytes: g.Bytes,
	}
	if !g.Last.IsZero() {
		la.Last = g.Last.UTC()
	}
	for i, s := range g.Senders {
		if i >= store.MaxLingerSenders {
			la.MoreSenders++
			la.MorePackets += s.Packets
			continue
		}
		la.Senders = append(la.Senders, store.LingerSender{
			MAC: net.HardwareAddr(s.MAC[:]).String(), From: s.From, Packets: s.Packets, Last: s.Last.UTC(),
		})
	}
	return la
}

// lingerPublisher is where the counts go: the fleet member.
type lingerPublisher interface {
	PublishLingering(ctx context.Context, rec store.Lingering) error
	Lease() (id int64, renewed, fencedAt time.Time)
}

// publishLingering writes the book's record to the store at once, then
// every lingerEvery when it changed or the lease did (a record goes with
// the lease it was written under), until ctx is done.
func publishLingering(ctx context.Context, b *lingerBook, p lingerPublisher, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last *store.Lingering
	var lastLease int64
	var written time.Time
	for {
		rec := b.record(log)
		lease, _, _ := p.Lease()
		beat := len(rec.Addrs) > 0 && time.Since(written) >= lingerHeartbeat
		if last == nil || lease != lastLease || beat || !sameCounts(*last, rec) {
			stamped := rec
			stamped.Updated = time.Now().UTC()
			if err := p.PublishLingering(ctx, stamped); err != nil {
				log.Debug("write the traffic of released addresses to the store", "err", err)
			} else {
				last, lastLease, written = &rec, lease, time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
