package fleet

import (
	"context"
	"net/netip"
	"slices"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// A move, at the owner's end: it lets go of the address in one
// transaction with the move record and the target's notice, or keeps it
// when the move gave up. The target's end is in move_target.go, the
// mover in mover.go, and the inbox that starts both in watch.go.

// leave releases addresses moving away: the engine stops answering first,
// then one transaction per address deletes the claim and marks the move
// released, so the target never overlaps with this node. Called with the
// moves' addresses locked.
func (m *Member) leave(ctx context.Context, moves []MoveRecord) {
	addrs := make([]netip.Addr, len(moves))
	for i, r := range moves {
		addrs[i] = r.Move.Addr
	}
	released, _, err := m.eng.Release(ctx, addrs)
	if err != nil {
		m.log.Error("release for a move", "err", err)
		return
	}
	m.mu.Lock()
	lease := m.lease
	was := make(map[netip.Addr]owned, len(released))
	for _, a := range released {
		o, _ := m.claims.claim(a)
		if !m.claims.releaseOwner(a) {
			o = owned{}
		}
		was[a] = o
	}
	m.mu.Unlock()
	now := m.clock.Now().UTC()
	for i := range moves {
		moves[i].Move.Released = now
		// The old owner stands by in the target's place, with the
		// claim's interface and options, written with the hand-over.
		if o, ok := was[moves[i].Move.Addr]; ok {
			moves[i].Standby = m.standbyOf(o.claim, now)
		}
	}
	// A group's addresses go in one transaction: no reader of the store
	// sees part of it here and part at the target.
	for _, batch := range groupBatches(moves, func(r MoveRecord) string { return was[r.Move.Addr].claim.Options.Group }) {
		done, rev, err := m.l.HandOver(ctx, lease, batch)
		for _, r := range batch {
			mv := r.Move
			switch {
			case err != nil:
				// The target takes it when the key goes (it watches
				// it): deleted once the store answers.
				m.log.Warn("hand a moved claim's key over: its key is deleted once the store answers", "addr", mv.Addr, "err", err)
				m.retryDrops(lease, []netip.Addr{mv.Addr}, store.Change{Kind: store.ChangeRelease, Node: m.cfg.Node,
					Message: "for a move to " + mv.To + ", whose hand-over failed: its key deleted once the store answered again"},
					map[netip.Addr]string{mv.Addr: was[mv.Addr].claim.Options.Group})
				continue
			case !done:
				// The move was given up meanwhile (its mover's lease
				// gone), or the key is no longer this lease's.
				if o, ok := was[mv.Addr]; ok {
					m.keepHome(ctx, o, lease, mv.To)
				} else {
					m.dropKeys(ctx, []netip.Addr{mv.Addr})
				}
				continue
			}
			m.log.Info("released for a move", "addr", mv.Addr, "to", mv.To)
			m.notifyChange(announce.Event{Kind: event.Move, Addr: mv.Addr, From: event.StateOwner, To: event.StateStandby, Peer: mv.To, Reason: event.ReasonMovedAway,
				Message: "released for a move to " + mv.To + "; this node stands by for it"})
			if r.Standby != nil {
				m.keepStandby(*r.Standby, rev)
			}
		}
	}
}

// keepHome claims o's address again after a move of it gave up just as
// this node let go: the hand-over changed nothing in the store, so the
// address stays where it was, as if the move had never been asked, rather
// than nobody's. A key that is no longer this node's (another took it, or
// the lease went with a fence) is left.
func (m *Member) keepHome(ctx context.Context, o owned, lease LeaseID, to string) {
	a := o.claim.Addr
	if _, fenced := m.isFenced(); fenced {
		m.dropKeys(ctx, []netip.Addr{a})
		return
	}
	_, err := m.acquireOne(ctx, o.claim, o.mac, lease)
	if err != nil {
		m.log.Warn("a move gave up as its address was released here, which another node holds now", "addr", a, "to", to, "err", err)
		m.dropKeys(ctx, []netip.Addr{a})
		return
	}
	st, err := m.eng.Resume(ctx, []announce.Claim{o.claim}, "claimed again: the move to "+to+" gave up before it was handed over")
	if err != nil {
		m.log.Error("claim an address again after its move gave up", "addr", a, "err", err)
		m.dropKeys(ctx, []netip.Addr{a})
		return
	}
	m.commit(st)
	m.log.Warn("a move gave up before its address was handed over: kept here", "addr", a, "to", to)
	m.notifyChange(announce.Event{Kind: event.Move, Addr: a, Interface: o.claim.Interface, From: event.StateOwner, To: event.StateOwner, Peer: to, Reason: event.ReasonMoveGaveUp,
		Message: "kept: the move to " + to + " gave up before it was handed over"})
}

// retryMoves reads the moves of addrs again a renewal period from now, in
// the background: the store failed while they were read or taken, and
// their inbox notices, seen once, will not come again. It stops with the
// member; a move that ended meanwhile has no record left to act on.
func (m *Member) retryMoves(addrs []netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	addrs = slices.Clone(addrs)
	m.afterRenew(func(ctx context.Context) { m.moves(ctx, addrs) })
}
