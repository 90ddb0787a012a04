package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// renewLoop renews the lease every Renew, and arms the fence after each
// renewal that succeeded. Renewals overlap: one that waits for a slow store
// does not hold up the next, and each that the store acknowledges, however
// late, moves the fence and the deadline to its own send time plus the
// fence's delay (see acked).
func (m *Member) renewLoop(ctx context.Context) {
	m.mu.Lock()
	m.fence = m.clock.AfterFunc(m.timing.FenceAfter(), m.fenceNow)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.fence.Stop()
		m.mu.Unlock()
	}()
	t := m.clock.NewTicker(m.timing.Renew)
	defer t.Stop()
	last := m.cfg.Deadline.Now()
	for {
		// A tick far later than due is a process that did not run
		// (SIGSTOP, a cgroup freezer, a paused VM, a starved CPU): the
		// clock counts on while it is stopped.
		if gap := m.cfg.Deadline.Now() - last; gap > m.timing.FenceAfter() {
			m.mu.Lock()
			m.stalled = max(m.stalled, gap)
			m.mu.Unlock()
			m.log.Warn("this agent did not run for longer than its fence delay: frozen or starved", "for", gap.Round(time.Millisecond))
		}
		m.renewAsync(ctx)
		m.failsafeTick(ctx)
		m.reportWithheld()
		last = m.cfg.Deadline.Now()
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// maxInFlight bounds the renewals waiting for the store at once: those
// sent over one fence delay, after which an answer no longer counts, and
// one more.
func (t Timing) maxInFlight() int { return int(t.FenceAfter()/t.Renew) + 2 }

// renewAsync sends a renewal and waits for its answer in the background,
// unless as many as maxInFlight already wait.
func (m *Member) renewAsync(ctx context.Context) {
	m.mu.Lock()
	if m.inFlight >= m.timing.maxInFlight() {
		n := m.inFlight
		m.mu.Unlock()
		m.log.Debug("renewal not sent: the store has not answered the earlier ones", "in_flight", n)
		return
	}
	m.inFlight++
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.renewOnce(ctx)
		m.mu.Lock()
		m.inFlight--
		m.mu.Unlock()
	}()
}

// renewOnce renews the lease once, waiting for the store's answer up to the
// fence's delay: an acknowledgement later than that would move the deadline
// to a time already past.
func (m *Member) renewOnce(ctx context.Context) {
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	sent, sentBoot := m.clock.Now(), m.cfg.Deadline.Now()
	err := m.l.Renew(ctx, lease, m.timing.FenceAfter())
	took := m.cfg.Deadline.Now() - sentBoot
	if took > m.timing.FenceAfter()+m.timing.Renew {
		// A renewal gives up after the fence's delay: one that took a
		// renewal period longer is a process stopped while it waited
		// (frozen mid-renewal, which renewLoop's gap between passes
		// does not see). Noted before the resumption, which tells it.
		m.mu.Lock()
		m.stalled = max(m.stalled, took)
		m.mu.Unlock()
		m.log.Warn("this agent did not run for longer than its fence delay, while it renewed: frozen or starved", "for", took.Round(time.Millisecond))
	}
	switch {
	case err == nil:
		m.acked(ctx, lease, sent, sentBoot, took)
	case errors.Is(err, ErrLeaseGone):
		m.mu.Lock()
		current := lease == m.lease
		if current {
			m.goneLease = lease
		}
		m.mu.Unlock()
		if !current {
			return // a renewal of a lease the member no longer has
		}
		// The store expired or revoked the lease: everything under it
		// is gone. Stop answering at once (if not already), then join
		// again under a new lease and take back what is still free.
		m.fenceWhy("the store no longer has this agent's lease")
		m.resumeAsync(ctx, true)
	case ctx.Err() == nil:
		m.mu.Lock()
		m.unanswered++
		m.mu.Unlock()
		m.log.Debug("renew the lease", "err", err)
	}
}

// acked takes the store's acknowledgement of a renewal of lease sent at
// sent (sentBoot on the deadline's clock), answered after took: the fence
// and the deadline move to its send time plus the fence's delay, unless a
// renewal sent later was acknowledged first, or the lease is no longer the
// member's, or that time has already passed.
func (m *Member) acked(ctx context.Context, lease LeaseID, sent time.Time, sentBoot, took time.Duration) {
	// ackMu orders the deadline's moves as the renewals' sends are
	// ordered: an earlier one never moves it back.
	m.ackMu.Lock()
	defer m.ackMu.Unlock()
	alone := m.aloneAfter(sentBoot, lease)
	m.mu.Lock()
	if lease != m.lease || lease == m.goneLease || !sent.After(m.renewed) || !m.clock.Now().Before(sent.Add(m.timing.FenceAfter()+alone)) {
		m.mu.Unlock()
		return
	}
	m.renewed = sent
	m.unanswered = 0
	m.answeredIn[m.answers%len(m.answeredIn)] = took
	m.answers++
	m.fence.Reset(m.clock.Until(sent.Add(m.timing.FenceAfter() + alone)))
	fenced := !m.fencedAt.IsZero()
	m.mu.Unlock()
	m.moveDeadline(sentBoot, alone)
	switch {
	case fenced:
		m.resumeAsync(ctx, false)
	case m.resuming.Load():
		// A resumption under way (the lease was lost, and this is
		// the new one's first renewal) tells of the stall, with
		// what it found: not this renewal, which knows nothing.
	default:
		// Woken before the fence's timer ran: nothing to resume.
		m.reportStall(false, 0, nil)
	}
}

// resumeAsync resumes in the background, so that the renewals go on
// while thousands of keys are read again; one resumption at a time.
func (m *Member) resumeAsync(ctx context.Context, leaseLost bool) {
	if !m.resuming.CompareAndSwap(false, true) {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.resuming.Store(false)
		m.resume(ctx, leaseLost)
		if _, fenced := m.isFenced(); !fenced {
			// A move that the inbox told of while fenced was passed
			// over (arrive, leave): acted on now.
			m.resync(ctx)
		}
	}()
}

// fenceNow is the fence's timer: no renewal sent in the last FenceAfter
// was acknowledged, or, on failsafe, the promises in force ran out.
func (m *Member) fenceNow() {
	if why := m.failsafeFenceWhy(); why != "" {
		m.fenceWhy(why)
		return
	}
	m.fenceWhy(m.noRenewal())
}

// noRenewal says why the fence's timer ran out, truthfully: when the last
// acknowledged renewal was sent, how fast the store answered before, and
// how many renewals sent since went unanswered.
func (m *Member) noRenewal() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg := fmt.Sprintf("no renewal of its lease was acknowledged since %s, when it was sent (lease TTL %s, fence after %s)",
		m.renewed.Local().Format("15:04:05.000"), m.timing.TTL, m.timing.FenceAfter())
	if n := min(m.answers, len(m.answeredIn)); n > 0 {
		var sum time.Duration
		for _, d := range m.answeredIn[:n] {
			sum += d
		}
		msg += fmt.Sprintf("; the store answered in %s on average before that", (sum / time.Duration(n)).Round(time.Millisecond))
	}
	if m.inFlight > 0 || m.unanswered > 0 {
		msg += fmt.Sprintf("; %d renewals sent since are unanswered, %d of them given up", m.inFlight+m.unanswered, m.unanswered)
	}
	return msg
}
