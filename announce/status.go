package announce

import (
	"errors"
	"net/netip"
	"slices"

	"github.com/vipctl/vip/internal/api"
)

func (e *Engine) stateLocked(cs *claimState) string {
	if !cs.live() {
		return api.StateWaiting
	}
	if _, recent := e.claimersLocked(cs); recent {
		return api.StateConflict
	}
	if e.sched.State(cs.key()).Active {
		return api.StateAnnouncing
	}
	return api.StateHolding
}

// Status reports the given addresses that are held, or every claim when
// none are given, ordered by address.
func (e *Engine) Status(addrs ...netip.Addr) []Status {
	out, answering, counting := e.statusLocked(addrs)
	fillResponders(out, answering, counting)
	return out
}

// statusLocked reports the claims as Status does, under the lock, with
// the port that answers for each (nil where the kernel does, or none).
func (e *Engine) statusLocked(addrs []netip.Addr) ([]Status, []*portRef, []bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var held []*claimState
	if len(addrs) == 0 {
		held = e.sortedLocked()
	} else {
		for _, a := range addrs {
			if cs, ok := e.claims[a]; ok {
				held = append(held, cs)
			}
		}
		slices.SortStableFunc(held, func(x, y *claimState) int { return x.claim.Addr.Compare(y.claim.Addr) })
	}
	out := make([]Status, len(held))
	// answering are the ports that answer for each claim, or count its
	// traffic while the kernel answers (counting), read after the lock:
	// the in-kernel responder's counters are a system call away.
	answering := make([]*portRef, len(held))
	counting := make([]bool, len(held))
	// Claims share a few ports: format each port's MAC once, not once per
	// claim.
	var macPort *portRef
	var mac string
	for i, cs := range held {
		st := &out[i]
		// A port that counts in the kernel is read after the lock, all
		// its claims in one pass (fillResponders): here only what
		// closed ports answered before.
		answered := e.answeredBefore[cs.claim.Addr]
		if cs.port == nil || !cs.answering || !cs.port.CanSnapshot() {
			answered = e.answeredLocked(cs)
		}
		b := e.burst(cs)
		*st = Status{Claim: cs.claim, State: api.StateWaiting, Answered: answered,
			Window: b.Window, Interval: b.Interval, Frames: e.frames(cs)}
		if cs.port != nil {
			if cs.port != macPort {
				macPort, mac = cs.port, cs.port.MAC().String()
			}
			st.MAC = mac
			st.Responder = KindKernel
			answering[i], counting[i] = cs.port, !cs.answering
		}
		if cs.live() {
			st.State = api.StateHolding
			if b := e.sched.State(cs.key()); b.Active {
				st.State, st.WindowEnd = api.StateAnnouncing, b.WindowEnd
			}
		}
		var recent bool
		st.Claimers, recent = e.claimersLocked(cs)
		if recent && cs.live() {
			st.State = api.StateConflict
		}
	}
	// One hold of sentMu for every claim, but not around sched.State: the
	// scheduler takes sentMu within its own lock.
	e.sentMu.Lock()
	for i := range out {
		out[i].GratuitousFrames = e.sent[out[i].Addr]
	}
	e.sentMu.Unlock()
	return out, answering, counting
}

// fillResponders sets the responder and traffic of each status whose port
// answers for it (answering[i], nil where none does), and the answers of
// those whose port is read by Snapshot. Where the kernel answers
// (counting[i]) the responder stays the kernel, and the port's traffic, if
// it counts it, is still filled in.
func fillResponders(out []Status, answering []*portRef, counting []bool) {
	var last *portRef
	var kind, hook string
	var snap map[netip.Addr]Counts
	var snapped, records bool
	for i, p := range answering {
		if p == nil {
			continue
		}
		if p != last {
			last = p
			kind, hook = p.Kind(), p.Hook()
			records = p.RecordsAskers()
			snap, snapped = nil, false
			if p.CanSnapshot() {
				snap, snapped = p.Snapshot()
			}
		}
		if !counting[i] {
			out[i].Responder, out[i].Hook, out[i].AskersRecorded = kind, hook, records
		}
		if snapped {
			c, ok := snap[out[i].Addr]
			if !ok {
				continue
			}
			if !counting[i] {
				out[i].Answered += c.Answered
			}
			if c.Traffic != nil {
				out[i].Traffic = c.Traffic
			}
			continue
		}
		if p.CanSnapshot() && !counting[i] {
			// Its snapshot failed: the statusLocked left its answers
			// to it, so read them one by one.
			out[i].Answered += p.Answered(out[i].Addr)
		}
		if t, ok := p.Traffic(out[i].Addr); ok {
			out[i].Traffic = &t
		}
	}
}

// sortedLocked returns every claim ordered by address. The order is kept
// until a claim comes or goes: with 10,000 claims, sorting took a third of
// a status.
func (e *Engine) sortedLocked() []*claimState {
	if e.byAddr == nil {
		e.byAddr = make([]*claimState, 0, len(e.claims))
		for _, cs := range e.claims {
			e.byAddr = append(e.byAddr, cs)
		}
		slices.SortFunc(e.byAddr, func(x, y *claimState) int { return x.claim.Addr.Compare(y.claim.Addr) })
	}
	return e.byAddr
}

// Askers calls fn with each asker that the in-kernel responders of the
// claimed interfaces remember, and the interface it asked on; a port that
// does not remember them (the socket responder, which a capture reads
// beside) adds nothing. The ports are read outside the engine's lock.
func (e *Engine) Askers(fn func(iface string, a AskerCount)) error {
	e.mu.Lock()
	var ports []*portRef
	for _, cs := range e.claims {
		if cs.port != nil && cs.answering && !slices.Contains(ports, cs.port) && cs.port.RecordsAskers() {
			ports = append(ports, cs.port)
		}
	}
	e.mu.Unlock()
	var errs []error
	for _, p := range ports {
		name := p.Name()
		if err := p.Askers(func(a AskerCount) { fn(name, a) }); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
