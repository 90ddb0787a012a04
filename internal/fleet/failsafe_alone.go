package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// An owner alone: its failsafe set in the store names no other node (a
// fleet of one, or the only node left). No node could take its addresses
// when its lease ends but one that joins later, and that one finds the
// set and waits (aloneHolds). So an owner alone whose renewals no longer
// reach the store answers on for failsafeAlone past its lease's deadline,
// with no one to ask: an etcd leader election, a restart of the store, an
// outage of up to that long darkens nothing.
//
// The proof, in the terms of the answer deadline: the owner answers until
// at most D+A, D its deadline (the last acknowledged renewal's send time
// plus FenceAfter), A the failsafeAlone. The store ends the lease at E: at
// its expiry, no earlier than that send time plus the TTL, past D; or at
// a revocation, after the last acknowledged renewal, so no earlier than D
// minus FenceAfter. A node that takes the address finds the lease gone at
// S, no earlier than E, and waits A plus the TTL from S (the set's
// AloneMS): it takes after S+A+TTL, which is past E+A+TTL, past D+A.

// failsafeAlone is how long past its lease's deadline an owner alone
// answers on failsafe: longer than etcd elects a leader or restarts, and
// short enough that a node which joins after the owner vanished, and
// finds its set, waits for no longer than that to take its addresses.
func (t Timing) failsafeAlone() time.Duration { return max(30*time.Second, 5*t.TTL) }

// aloneFor is how long after an owner alone's lease ends, however it
// ends, it may still answer (the set's AloneMS).
func (t Timing) aloneFor() time.Duration { return t.failsafeAlone() + t.TTL }

// aloneSighting is when this node first found a lapsed owner alone's set
// (its ModRev) with the owner's lease gone.
type aloneSighting struct {
	modRev int64
	at     time.Time
}

// failsafeAlone is the round of an owner whose set in the store names no
// other node: it moves the answer deadline to failsafeAlone past the one
// the last acknowledged renewal gave, and says so once an outage. The
// store back, a renewal moves it as always; one acknowledged late (a slow
// store) moves it earlier, and the next round moves it on again.
func (m *Member) failsafeAlone() {
	fs := m.fs
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	fs.mu.Lock()
	recorded := fs.recordedRev != 0 && fs.recordedLease == lease && fs.recordedNames == "" && fs.unsurePeers == nil
	on, leaseUntil := !fs.since.IsZero() && !fs.aloneUntil.IsZero(), fs.leaseUntil
	fs.mu.Unlock()
	if !recorded {
		// A node that joins would not know to wait.
		m.failsafeEnds("its failsafe set is not in the store yet")
		return
	}
	m.ackMu.Lock()
	defer m.ackMu.Unlock()
	m.mu.Lock()
	storeBack := m.clock.Since(m.renewed) < m.timing.unreachedAfter() || lease != m.lease
	m.mu.Unlock()
	at, now := m.cfg.Deadline.At()
	until := leaseUntil + m.timing.failsafeAlone()
	if storeBack || at == announce.ClosedAt || at <= now || until <= at {
		return
	}
	if !m.extendDeadline(until, until-now) {
		return
	}
	wall := m.clock.Now()
	fs.mu.Lock()
	if !on {
		fs.since, fs.ackedBy = wall, nil
	}
	fs.ackedAt, fs.aloneUntil = wall, wall.Add(until-now)
	fs.mu.Unlock()
	if on {
		return
	}
	msg := fmt.Sprintf("the store is unreachable: answering on failsafe alone (no other node could take its addresses) until %s at most",
		wall.Add(until-now).Local().Format("15:04:05"))
	m.log.Warn("failsafe: answering alone past the lease's deadline", "for", (until - now).Round(time.Millisecond))
	m.eng.Notify(announce.Event{Kind: event.Failsafe, State: "failsafe", Message: msg})
}

// aloneAfter is how much longer than FenceAfter past sentBoot the
// acknowledgement of a renewal sent then keeps the answer deadline:
// failsafeAlone while this owner answers on failsafe alone, under its set
// of lease, and the store answered later than an owner starts asking (a
// slow store: the outage goes on); else none. Moved earlier at each such
// answer, the deadline would take the addresses added with their
// lifetimes off the interface, to put them back at the next round.
func (m *Member) aloneAfter(sentBoot time.Duration, lease LeaseID) time.Duration {
	if m.fs == nil || m.cfg.Deadline.Now()-sentBoot < m.timing.unreachedAfter() {
		return 0
	}
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	fs := m.fs
	if fs.since.IsZero() || fs.aloneUntil.IsZero() || fs.recordedRev == 0 || fs.recordedLease != lease || fs.recordedNames != "" || fs.unsurePeers != nil {
		return 0
	}
	fs.aloneUntil = m.clock.Now().Add(sentBoot + m.timing.FenceAfter() + m.timing.failsafeAlone() - m.cfg.Deadline.Now())
	return m.timing.failsafeAlone()
}

// aloneHolds says why a lapsed owner alone's set s holds this node's
// takes, if it still does: for the set's AloneMS from when this node
// first found the lease gone. Once that passed, the owner answers no
// more, and this node clears the set.
func (m *Member) aloneHolds(ctx context.Context, s store.FailsafeSet) string {
	now := m.clock.Now()
	m.mu.Lock()
	seen, ok := m.aloneSeen[s.Node]
	if !ok || seen.modRev != s.ModRev {
		// Not noted (noteSightings runs first): from now.
		seen = aloneSighting{modRev: s.ModRev, at: now}
		m.aloneSeen[s.Node] = seen
	}
	m.mu.Unlock()
	if left := seen.at.Add(time.Duration(s.AloneMS) * time.Millisecond).Sub(now); left > 0 {
		return fmt.Sprintf("%s's lease is gone, and with no other node to ask it may answer alone on failsafe for %s more: this node takes nothing until then, or until %s is back",
			s.Node, left.Round(100*time.Millisecond), s.Node)
	}
	if ok, err := m.l.ClearFailsafeSet(ctx, s.Node, s.ModRev); err == nil && ok {
		m.log.Info("failsafe: cleared a lapsed owner alone's failsafe set: the longest it answers alone has passed", "owner", s.Node)
	}
	return ""
}

// noteSightings records when this node first found each lapsed owner
// alone's set (so that the waits for several run at once), and forgets
// the sets no longer in the store.
func (m *Member) noteSightings(sets []store.FailsafeSet, live map[string]store.Node) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for o, seen := range m.aloneSeen {
		if !slices.ContainsFunc(sets, func(s store.FailsafeSet) bool { return s.Node == o && s.ModRev == seen.modRev }) {
			delete(m.aloneSeen, o)
		}
	}
	for _, s := range sets {
		n, ok := live[s.Node]
		if s.Node == m.cfg.Node || !s.Alone() || (ok && n.Lease == s.Lease) {
			continue
		}
		if seen, ok := m.aloneSeen[s.Node]; !ok || seen.modRev != s.ModRev {
			m.aloneSeen[s.Node] = aloneSighting{modRev: s.ModRev, at: now}
		}
	}
}
