package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/failsafe"
	"github.com/vipctl/vip/internal/store"
)

// The owner's side of the failsafe: the rounds of questions while its
// renewals do not reach the store, and what it answers on.

// failsafeTick starts a round of questions when this owner's renewals no
// longer reach the store, one at a time.
func (m *Member) failsafeTick(ctx context.Context) {
	if m.fs == nil {
		return
	}
	m.mu.Lock()
	unreached := m.clock.Since(m.renewed) >= m.timing.unreachedAfter()
	fenced, owns := !m.fencedAt.IsZero(), m.claims.count(event.StateOwner) > 0
	m.mu.Unlock()
	if !unreached || fenced || !owns || !m.fs.asking.CompareAndSwap(false, true) {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.fs.asking.Store(false)
		m.failsafeRound(ctx)
	}()
}

// roundTargets returns the peers a round would ask now, sorted, under
// which lease, or why it would ask nobody and end the failsafe: a peer
// that runs without it, or no set in the store under this lease that the
// owner is sure of (unready). No targets and no reason: the owner is
// alone.
//
// It asks the nodes of the set the store has, as the owner wrote it, not
// the peers as last read: a node that joined since is left out of the set
// and waits for it (failsafeBlocks), and one the set names keeps its
// promises whichever of its agents answers. Peers read anew rewrite the
// set (recordSet), except while the owner answers on failsafe, which goes
// on asking the set's nodes.
func (m *Member) roundTargets() (targets []failsafe.Target, lease LeaseID, unready string) {
	fs := m.fs
	m.mu.Lock()
	lease = m.lease
	m.mu.Unlock()
	peers, keyless, recorded := fs.recordedSet(lease)
	if !recorded {
		fs.mu.Lock()
		peers, keyless, fs.shared = fs.peers, slices.Clone(fs.keyless), true
		fs.mu.Unlock()
	}
	if len(keyless) > 0 {
		// A node that cannot be asked could take any address once the
		// lease expires: no failsafe.
		return nil, 0, strings.Join(keyless, ", ") + " cannot promise (run without --failsafe, or a record that gives no key and address this agent reads)"
	}
	if len(peers) == 0 {
		return nil, 0, ""
	}
	if !recorded {
		// A node outside a set the store does not have would not
		// know to wait.
		return nil, 0, "its failsafe set is not in the store yet"
	}
	for n, p := range peers {
		targets = append(targets, failsafe.Target{Node: n, Addr: p.addr})
	}
	slices.SortFunc(targets, func(x, y failsafe.Target) int { return strings.Compare(x.Node, y.Node) })
	return targets, lease, ""
}

// failsafeRound asks every peer at once. If all accept, the answer
// deadline moves to the earliest promise's end counted from the round's
// send time (a promise counts from its receipt, which is later), unless
// the deadline passed or closed meanwhile: once fenced, only the store
// opens it again. If any does not, the failsafe ends, and with it the
// answers, if the deadline in force is one the failsafe gave.
func (m *Member) failsafeRound(ctx context.Context) {
	fs := m.fs
	targets, lease, unready := m.roundTargets()
	switch {
	case unready != "":
		m.failsafeEnds(unready)
		return
	case len(targets) == 0:
		m.failsafeAlone()
		return
	}
	promise, assigned := m.timing.failsafePromise(), m.holdsAssigned()
	if assigned {
		promise = m.timing.failsafePromiseAssigned()
	}
	sent, sentBoot := m.clock.Now(), m.cfg.Deadline.Now()
	replies := fs.asker.Ask(ctx, targets, int64(lease), promise, m.timing.failsafeTimeout())
	var refused []string
	for _, r := range replies {
		switch {
		case r.Err != nil:
			refused = append(refused, fmt.Sprintf("%s did not answer (%v)", r.Node, r.Err))
		case r.Verdict != failsafe.Accepted:
			refused = append(refused, fmt.Sprintf("%s %s: %s", r.Node, r.Verdict, r.Why))
		default:
			promise = min(promise, r.Promise)
		}
	}
	if ctx.Err() != nil {
		return
	}
	if len(refused) > 0 {
		m.failsafeEnds(strings.Join(refused, "; "))
		return
	}
	m.ackMu.Lock()
	defer m.ackMu.Unlock()
	m.mu.Lock()
	storeBack := m.renewed.After(sent) || lease != m.lease
	m.mu.Unlock()
	at, now := m.cfg.Deadline.At()
	if storeBack || at == announce.ClosedAt || at <= now {
		return
	}
	end := promise
	if assigned {
		// The kernel removes an added address up to LifetimeLate
		// after its lifetime, which ends by the deadline: a promise's
		// end leaves no margin for that, so the deadline is that much
		// before it.
		end -= announce.LifetimeLate
	}
	if until := sentBoot + end; until > at && !m.extendDeadline(until, m.clock.Until(sent.Add(end))) {
		return
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Node
	}
	fs.mu.Lock()
	first := fs.since.IsZero()
	if first {
		fs.since = sent
	}
	fs.ackedBy, fs.ackedAt = names, m.clock.Now()
	fs.mu.Unlock()
	if first {
		msg := fmt.Sprintf("the store is unreachable: answering on failsafe, acknowledged by %s", strings.Join(names, ", "))
		m.log.Warn("failsafe: answering past the lease's deadline", "acknowledged_by", strings.Join(names, ","))
		m.eng.Notify(announce.Event{Kind: event.Failsafe, State: "failsafe", Message: msg})
	}
}

// holdsAssigned says whether this node owns an address it added to its
// interface (--assign), whose lifetime needs a longer promise.
func (m *Member) holdsAssigned() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	assigned := false
	m.claims.in(func(_ netip.Addr, e *claimEntry) {
		assigned = assigned || e.owned.claim.Options.Assign
	}, event.StateOwner)
	return assigned
}

// extendDeadline moves the answer deadline to until, on the failsafe's
// word, and the fence's timer to fire in after, under ackMu; false if it
// could not, or a fence closed the deadline meanwhile.
func (m *Member) extendDeadline(until, after time.Duration) bool {
	was, _ := m.cfg.Deadline.At()
	if err := m.cfg.Deadline.Set(until); err != nil {
		// A watcher that failed keeps the earlier deadline: so do the
		// others, and the fence's timer.
		m.log.Error("failsafe: move the answer deadline: it stays where it was", "err", err)
		_ = m.cfg.Deadline.Set(was)
		return false
	}
	if _, fenced := m.isFenced(); fenced {
		// A fence closed the deadline between the caller's look and
		// the move (fenceWhy takes no lock): closed again.
		if err := m.cfg.Deadline.Close(); err != nil {
			m.log.Error("fence: close the answer deadline", "err", err)
		}
		return false
	}
	m.mu.Lock()
	m.fence.Reset(after)
	m.mu.Unlock()
	return true
}

// failsafeEnds takes a round that not every peer accepted: if the deadline
// in force is one the failsafe gave, the owner fences at once, as the
// failsafe's rule says (a node that answers it reaches the store, or does
// not answer, ends it). Answering on until the promises in force end would
// be safe if every promise binds as it should, and spares a second of dark
// when a quorum comes back to a standby first; the 30-minute nemesis run
// that tried it (seed 20261208) had a former owner answer 25 ms after
// another node took its address, unexplained yet, so the rule stays strict.
func (m *Member) failsafeEnds(why string) {
	at, _ := m.cfg.Deadline.At()
	m.fs.mu.Lock()
	on, leaseUntil := !m.fs.since.IsZero(), m.fs.leaseUntil
	m.fs.mu.Unlock()
	if at != announce.ClosedAt && at > leaseUntil {
		m.fenceWhy("the failsafe ended: " + why)
		return
	}
	if on {
		m.log.Debug("failsafe: not every peer accepted", "why", why)
	}
}

// failsafeFenceWhy says why the fence's timer ran out while this owner
// answered on failsafe: no round accepted in time (empty: it did not).
func (m *Member) failsafeFenceWhy() string {
	if m.fs == nil {
		return ""
	}
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if m.fs.since.IsZero() {
		return ""
	}
	if !m.fs.aloneUntil.IsZero() {
		return fmt.Sprintf("it answered alone on failsafe since %s, the longest an owner with no other node to ask does (%s past its lease's deadline)",
			m.fs.since.Local().Format("15:04:05.000"), m.timing.failsafeAlone())
	}
	return fmt.Sprintf("the failsafe's promises ran out with no round accepted since %s", m.fs.ackedAt.Local().Format("15:04:05.000"))
}

// failsafeRenewed notes the lease's deadline a renewal sent at sent (the
// Deadline's clock) gave, and ends a failsafe under way if the store
// acknowledged it in time: the store is back. A store that answers, but
// later than an owner starts asking, ends nothing: its rounds go on (and
// say nothing new) rather than a failsafe begun and ended at each answer.
func (m *Member) failsafeRenewed(sent time.Duration) {
	if m.fs == nil {
		return
	}
	now := m.clock.Now()
	timely := m.cfg.Deadline.Now()-sent < m.timing.unreachedAfter()
	m.fs.mu.Lock()
	m.fs.leaseUntil = sent + m.timing.FenceAfter()
	if !timely {
		m.fs.mu.Unlock()
		return
	}
	since, by, at, alone := m.fs.since, m.fs.ackedBy, m.fs.ackedAt, !m.fs.aloneUntil.IsZero()
	m.fs.since, m.fs.ackedBy, m.fs.aloneUntil = time.Time{}, nil, time.Time{}
	m.fs.mu.Unlock()
	if !since.IsZero() {
		// A set that waited for the store (recordSet) is written now.
		select {
		case m.fs.reread <- struct{}{}:
		default:
		}
		m.log.Info("failsafe: the store is back", "after", now.Sub(since).Round(time.Millisecond))
		m.eng.Notify(announce.Event{Kind: event.Failsafe, State: "store",
			Message: fmt.Sprintf("the store is back: answered on failsafe for %s", now.Sub(since).Round(time.Millisecond))})
		m.recordFailsafe(since, now, by, at, alone)
	}
}

// recordFailsafe writes to the history, in the background, that this
// owner answered on failsafe from since until the store acknowledged it
// again at now, last on the promises of by at at: who answered on
// failsafe, and for how long, for vip history on any host. A fence that
// ended it earlier has a record of its own, written at the resumption.
func (m *Member) recordFailsafe(since, now time.Time, by []string, at time.Time, alone bool) {
	m.mu.Lock()
	addrs := m.claims.addrs(event.StateOwner, event.StateFenced)
	m.mu.Unlock()
	msg := fmt.Sprintf("the store unreachable, it answered on the promises of %s for %s (the last at %s)",
		strings.Join(by, ", "), now.Sub(since).Round(time.Millisecond), at.Local().Format("15:04:05.000"))
	if alone {
		msg = fmt.Sprintf("the store unreachable, it answered on failsafe alone (no other node could take its addresses) for %s",
			now.Sub(since).Round(time.Millisecond))
	}
	ch := store.Change{Kind: store.ChangeFailsafe, Node: m.cfg.Node, Time: now, Since: since, Message: msg}
	ch.SetAddrs(addrs)
	m.afterRenew(func(ctx context.Context) {
		if err := m.l.Record(ctx, []store.Change{ch}); err != nil {
			m.log.Warn("write the failsafe to the history: left out of it", "err", err)
		}
	})
}

// FailsafeInfo says whether this owner answers on failsafe: since when,
// acknowledged last by whom and when, or alone until when (zero since: it
// does not).
func (m *Member) FailsafeInfo() (since time.Time, ackedBy []string, ackedAt, aloneUntil time.Time) {
	if m.fs == nil {
		return
	}
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	return m.fs.since, slices.Clone(m.fs.ackedBy), m.fs.ackedAt, m.fs.aloneUntil
}
