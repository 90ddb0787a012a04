package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vipctl/vip/announce"
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
			in, waiting := m.incoming[a]
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
	defer unlock()
	m.mu.Lock()
	in, ok := m.incoming[a]
	m.mu.Unlock()
	if ok {
		m.arrive(ctx, in)
		return
	}
	m.takeAsStandby(ctx, addrs, prev)
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
	missed := m.missedTakes
	m.missedTakes = nil
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
	_, ok := m.owned[a]
	return ok
}

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
		was[a] = m.owned[a]
		delete(m.owned, a)
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
			m.notifyChange(event.Move, mv.Addr, "", event.StateStandby, mv.To, "released for a move to "+mv.To+"; this node stands by for it")
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
	m.notifyChange(event.Move, a, o.claim.Interface, event.StateOwner, to, "kept: the move to "+to+" gave up before it was handed over")
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

// arrive takes an address moving here once its key is free, claims it, and
// marks the move live (or failed). Called with its address locked.
func (m *Member) arrive(ctx context.Context, r MoveRecord) {
	mv, crev := r.Move, r.Rev
	if _, fenced := m.isFenced(); fenced {
		// Read again once the fence lifts (resumeAsync's resync).
		return
	}
	m.leaseOps.RLock()
	defer m.leaseOps.RUnlock()
	m.mu.Lock()
	_, already := m.owned[mv.Addr]
	m.mu.Unlock()
	if already {
		// The owner's release and its key's deletion came in one
		// batch: the move was taken already.
		return
	}
	took, rev, err := m.takeKey(ctx, mv.Addr, taking{ifname: mv.Interface, opts: mv.Options, moveRev: crev, cond: MoveArrival(), home: mv.Home, change: moveChange(mv)})
	givenUp := false
	if err == nil && !took {
		givenUp, err = m.moveGone(ctx, mv.Addr, crev)
	}
	if err == nil && givenUp {
		// The mover gave up (its lease went, and the record with it):
		// an address its owner let go is taken here all the same, as
		// the operator asked, if no move and no claim of it came since;
		// one its owner kept stays there.
		ch := moveChange(mv)
		ch.Message = "its mover had given up: taken all the same, as asked"
		took, rev, err = m.takeKey(ctx, mv.Addr, taking{ifname: mv.Interface, opts: mv.Options, cond: MoveArrival(), home: mv.Home, change: ch})
		if err == nil && !took {
			m.forgetIncoming(mv.Addr)
			m.log.Info("a move here gave up while its owner held the address: not taken", "addr", mv.Addr)
			return
		}
	}
	if err != nil {
		// The inbox told of the move once: without another look, a
		// move whose owner let go would leave the address free.
		m.log.Warn("take a key moving here: tried again once the store answers", "addr", mv.Addr, "err", err)
		m.mu.Lock()
		m.incoming[mv.Addr] = r
		m.mu.Unlock()
		m.retryMoves([]netip.Addr{mv.Addr})
		return
	}
	if !took {
		// The owner has not let go yet: it tells the inbox when it
		// does, and the key's deletion says so if it never does (its
		// lease expires).
		m.mu.Lock()
		m.incoming[mv.Addr] = r
		m.mu.Unlock()
		m.watchGone(mv.Addr, rev)
		m.pollIncoming(mv.Addr)
		return
	}
	m.forgetIncoming(mv.Addr)
	if err := m.claimTaken(ctx, mv.Addr, mv.Interface, mv.Options); err != nil {
		mv.Error = fmt.Sprintf("%s could not claim %s on %s: %v", m.cfg.Node, mv.Addr, mv.Interface, err)
		m.mark(ctx, mv, crev)
		return
	}
	mv.Live = m.clock.Now().UTC()
	if mv.TrafficWindow > 0 {
		m.markLive(ctx, mv, crev)
	} else {
		m.mark(ctx, mv, crev)
	}
	from := mv.From
	if from == "" {
		from = "nobody"
	}
	msg := "moved here from " + from
	if givenUp {
		msg += " (its mover had given up: taken all the same, as asked)"
	}
	m.log.Info("moved here", "addr", mv.Addr, "interface", mv.Interface, "from", from, "mover_gave_up", givenUp)
	m.notifyChange(event.Move, mv.Addr, mv.Interface, event.StateOwner, mv.From, msg)
}

// moveChange is the history's record of the move mv arriving here: who
// asked and why, where from, and its timeline so far.
func moveChange(mv store.Move) store.Change {
	ch := store.Change{Kind: store.ChangeMove, From: mv.From, Actor: mv.Actor, Asked: mv.Asked, Released: mv.Released}
	if mv.TakeOver {
		ch.Kind = store.ChangeTakeOver
	}
	return ch
}

// pollIncoming reads the move of a again a renewal period from now, and so
// on while this node waits on it: a move whose mover gives up ends with its
// record, which no watch of this node sees, and a move given up while its
// owner still held the address must be forgotten here before that owner
// lets go of it for another reason (a release), or this node would take it.
func (m *Member) pollIncoming(a netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.polling[a] {
		return
	}
	m.polling[a] = true
	m.afterRenewLocked(func(ctx context.Context) {
		m.mu.Lock()
		delete(m.polling, a)
		_, waiting := m.incoming[a]
		m.mu.Unlock()
		if waiting {
			m.moves(ctx, []netip.Addr{a})
		}
	})
}

// moveGone says whether the move of a created at rev is over in the store:
// its record gone, or another move's there now.
func (m *Member) moveGone(ctx context.Context, a netip.Addr, rev int64) (bool, error) {
	recs, err := m.l.Moves(ctx, []netip.Addr{a})
	if err != nil {
		return false, err
	}
	return len(recs) == 0 || recs[0].Rev != rev, nil
}

// forgetIncoming stops waiting on a move of a to here.
func (m *Member) forgetIncoming(a netip.Addr) {
	m.mu.Lock()
	delete(m.incoming, a)
	m.mu.Unlock()
	m.unwatchGone(a)
}

// markLive writes that the move is live, then counts the traffic that
// arrives for the address over the window the mover asked for and writes
// that too, and deletes the record, in the background: the address
// answers here from the start, and the mover, which waits for the count,
// is told at once that it does.
func (m *Member) markLive(ctx context.Context, mv store.Move, crev int64) {
	if !m.put(ctx, mv, crev) {
		return
	}
	before, counted := m.traffic(mv.Addr)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		window := time.Duration(mv.TrafficWindow)
		select {
		case <-m.runCtx.Done():
			return
		case <-m.clock.After(window):
		}
		after, ok := m.traffic(mv.Addr)
		t := &store.Traffic{Counted: counted && ok, Window: mv.TrafficWindow}
		if t.Counted {
			t.Packets, t.Bytes = after.Packets-before.Packets, after.Bytes-before.Bytes
		}
		mv.Traffic = t
		m.mark(m.runCtx, mv, crev)
	}()
}

// traffic returns the traffic counted for a held address so far, and
// whether its responder counts it.
func (m *Member) traffic(a netip.Addr) (announce.Traffic, bool) {
	st := m.eng.Status(a)
	if len(st) != 1 || st[0].Traffic == nil {
		return announce.Traffic{}, false
	}
	return *st[0].Traffic, true
}

// put writes the move record as it is now, if it is still the same move.
func (m *Member) put(ctx context.Context, mv store.Move, crev int64) bool {
	if err := m.l.MarkMove(ctx, mv, crev, false); err != nil {
		m.log.Warn("mark a move", "addr", mv.Addr, "err", err)
		return false
	}
	return true
}

// mark writes the move's outcome for the mover to read, then deletes the
// record: the mover's watch sees both.
func (m *Member) mark(ctx context.Context, mv store.Move, crev int64) {
	if err := m.l.MarkMove(ctx, mv, crev, true); err != nil {
		m.log.Warn("mark a move", "addr", mv.Addr, "err", err)
	}
}
