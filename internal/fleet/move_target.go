package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// A move, at the target's end: it takes the address once the owner let
// go (its arrival), polls a move whose owner has not, marks the move live
// with the traffic it counted, and ends it.

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
	already := m.claims.place(mv.Addr) == event.StateOwner
	m.mu.Unlock()
	if already {
		// The owner's release and its key's deletion came in one
		// batch: the move was taken already.
		return
	}
	// The take's time is its history record's and the move record's
	// (Taken), so that vip history and the mover print one timeline.
	var (
		took, givenUp bool
		rev           int64
		err           error
		taken         time.Time
	)
	for try := 0; ; try++ {
		change := moveChange(mv)
		change.Time = m.clock.Now().UTC()
		taken = change.Time
		took, rev, err = m.takeKey(ctx, mv.Addr, taking{ifname: mv.Interface, opts: mv.Options, moveRev: crev, cond: MoveArrival(r.ModRev), home: mv.Home, change: change})
		if err != nil || took {
			break
		}
		var now store.MoveRecord
		now, givenUp, err = m.moveNow(ctx, mv.Addr, crev)
		if err != nil || givenUp || now.ModRev == r.ModRev || try == 2 {
			break
		}
		// The owner wrote the move since it was read here (its
		// release, with its key's deletion): take it on the record as
		// it is now, so that the history records the release too.
		r, mv = now, now.Move
	}
	if err == nil && givenUp {
		// The mover gave up (its lease went, and the record with it):
		// an address its owner let go is taken here all the same, as
		// the operator asked, if no move and no claim of it came since;
		// one its owner kept stays there.
		change := moveChange(mv)
		change.Time, change.Message = m.clock.Now().UTC(), "its mover had given up: taken all the same, as asked"
		taken = change.Time
		took, rev, err = m.takeKey(ctx, mv.Addr, taking{ifname: mv.Interface, opts: mv.Options, cond: MoveArrival(0), home: mv.Home, change: change})
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
		m.claims.await(r)
		m.mu.Unlock()
		m.retryMoves([]netip.Addr{mv.Addr})
		return
	}
	if !took {
		// The owner has not let go yet: it tells the inbox when it
		// does, and the key's deletion says so if it never does (its
		// lease expires).
		m.mu.Lock()
		m.claims.await(r)
		m.mu.Unlock()
		m.watchGone(mv.Addr, rev)
		m.pollIncoming(mv.Addr)
		return
	}
	m.forgetIncoming(mv.Addr)
	mv.Taken = taken
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
	before := event.StateNone
	m.mu.Lock()
	if _, ok := m.claims.standbyOf(mv.Addr); ok {
		before = event.StateStandby
	}
	m.mu.Unlock()
	m.notifyChange(announce.Event{Kind: event.Move, Addr: mv.Addr, Interface: mv.Interface, From: before, To: event.StateOwner, Peer: mv.From, Reason: event.ReasonMovedHere, Message: msg})
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
	if !m.claims.poll(a) {
		return
	}
	m.afterRenewLocked(func(ctx context.Context) {
		m.mu.Lock()
		m.claims.polled(a)
		_, waiting := m.claims.incomingOf(a)
		m.mu.Unlock()
		if waiting {
			m.moves(ctx, []netip.Addr{a})
		}
	})
}

// moveNow reads the move of a created at rev as the store has it now, or
// says it is over: its record gone, or another move's there now.
func (m *Member) moveNow(ctx context.Context, a netip.Addr, rev int64) (store.MoveRecord, bool, error) {
	recs, err := m.l.Moves(ctx, []netip.Addr{a})
	if err != nil {
		return store.MoveRecord{}, false, err
	}
	if len(recs) == 0 || recs[0].Rev != rev {
		return store.MoveRecord{}, true, nil
	}
	return recs[0], false, nil
}

// forgetIncoming stops waiting on a move of a to here.
func (m *Member) forgetIncoming(a netip.Addr) {
	m.mu.Lock()
	m.claims.forgetIncoming(a)
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
