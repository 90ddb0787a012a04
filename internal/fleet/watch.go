package fleet

import (
	"context"
	"net/netip"
	"slices"

	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// watchLoop follows this node's inbox from rev on: the mover writes there
// when a move's target or owner is this node, and the owner when it let go
// (see store.Keys.Inbox), so a move reaches its two agents, not the whole
// fleet. After the watch breaks it reads the inbox again.
func (m *Member) watchLoop(ctx context.Context, rev int64) {
	m.resync(ctx)
	for ctx.Err() == nil {
		rev = m.l.WatchInbox(ctx, m.cfg.Node, rev, func(addrs []netip.Addr) { m.moves(ctx, addrs) })
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(m.timing.Renew):
		}
		m.resync(ctx)
	}
}

// resync acts on every move in the inbox, as if each had just come, and
// reads this node's standbys again: a notice of a change may have expired
// while the watch was broken.
func (m *Member) resync(ctx context.Context) {
	if err := m.reconcileStandbys(ctx); err != nil {
		m.log.Debug("read this node's standbys again", "err", err)
	}
	m.takeFreeStandbys(ctx)
	addrs, err := m.l.Inbox(ctx, m.cfg.Node)
	if err != nil {
		m.log.Debug("read the inbox", "err", err)
		return
	}
	m.moves(ctx, addrs)
}

// moves reads the move records of addrs and acts on each: it arrives here,
// or it leaves from here.
func (m *Member) moves(ctx context.Context, addrs []netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	unlock, err := m.locks.lock(ctx, addrs)
	if err != nil {
		return
	}
	defer unlock()
	var away []MoveRecord
	for start := 0; start < len(addrs); start += store.MaxReadsPerTxn {
		batch := addrs[start:min(start+store.MaxReadsPerTxn, len(addrs))]
		recs, err := m.l.Moves(ctx, batch)
		if err != nil {
			m.log.Warn("read the moves in the inbox: read again once the store answers", "err", err)
			m.retryMoves(addrs[start:])
			return
		}
		// A move this node waits on whose record went (its mover gave
		// up) is looked at again: its owner may have let go.
		for _, a := range batch {
			m.mu.Lock()
			in, waiting := m.claims.incomingOf(a)
			m.mu.Unlock()
			if waiting && !slices.ContainsFunc(recs, func(r MoveRecord) bool { return r.Rev == in.Rev }) {
				m.arrive(ctx, in)
			}
		}
		// A notice may be of a change of this node's standby record
		// (vip standby --on, from any host), whether or not a move of
		// the address is under way: read it again.
		var unread []netip.Addr
		for _, a := range batch {
			if err := m.syncStandby(ctx, a); err != nil {
				unread = append(unread, a)
			}
		}
		m.retryMoves(unread)
		for _, rec := range recs {
			mv := rec.Move
			if !mv.Live.IsZero() || mv.Error != "" {
				continue
			}
			switch {
			case mv.To == m.cfg.Node:
				m.arrive(ctx, rec)
			case mv.Released.IsZero() && m.owns(mv.Addr):
				away = append(away, rec)
			}
		}
	}
	if len(away) > 0 {
		m.leave(ctx, away)
	}
}

// gone is called when a's owner's key vanished, for an address this node
// waits on: a move here, or a standby's. Called without op, from the
// watch of a's key, which what it does may stop: it acts under the
// member's own context.
func (m *Member) gone(a netip.Addr, prev *store.Claim) {
	ctx := m.runCtx
	if prev != nil && prev.Node == m.cfg.Node {
		return
	}
	addrs := m.standbyGroup(a)
	unlock, err := m.locks.lock(ctx, addrs)
	if err != nil {
		return
	}
	m.mu.Lock()
	_, incoming := m.claims.incomingOf(a)
	m.mu.Unlock()
	if !incoming {
		m.takeAsStandby(ctx, addrs, prev)
		unlock()
		return
	}
	unlock()
	// A move here: its record is read again, as the owner's notice in the
	// inbox would have it read, not taken from the copy kept since the
	// mover's notice. The key's deletion can come first, and that copy
	// does not say when the owner let go, which the take's history
	// records. A record gone meanwhile (the mover gave up) is looked at
	// again there too.
	m.moves(ctx, []netip.Addr{a})
}

// takeFreeStandbys takes, as their standby, the addresses whose owner's
// key went while this node was fenced (takeAsStandby passed them over,
// and no other deletion will come), each judged as then: not if its owner
// let it go on purpose.
func (m *Member) takeFreeStandbys(ctx context.Context) {
	if _, fenced := m.isFenced(); fenced {
		return
	}
	m.mu.Lock()
	missed := m.claims.takeMissed()
	m.mu.Unlock()
	for a, prev := range missed {
		if ctx.Err() != nil {
			return
		}
		m.log.Info("an owner's key went while this node was fenced: its standby looks again", "addr", a)
		m.gone(a, prev)
	}
}

// owns reports whether the engine holds a for this node.
func (m *Member) owns(a netip.Addr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	ok := m.claims.place(a) == event.StateOwner
	return ok
}
