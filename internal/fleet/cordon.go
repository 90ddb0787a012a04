package fleet

import (
	"context"
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// The member's own cordon (vip cordon NODE): a cordoned node takes nothing
// new, as a move's target (the mover refuses), a take-over (the same
// mover) or a standby (takeAsStandby), and keeps what it holds. The member
// follows its cordon key to show it (status, metrics, the live view) and,
// when it lifts, to take as a standby what it stood by for and what
// nobody took meanwhile.

// cordonLoop reads this node's cordon and follows it: after the watch
// breaks it reads the key again.
func (m *Member) cordonLoop(ctx context.Context) {
	for ctx.Err() == nil {
		c, rev, err := m.l.Cordon(ctx, m.cfg.Node)
		if err == nil {
			m.setCordon(c)
			m.l.WatchCordon(ctx, m.cfg.Node, rev, m.setCordon)
		} else {
			m.log.Debug("read this node's cordon", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(m.timing.Renew):
		}
	}
}

// setCordon records this node's cordon as the store has it now (nil:
// none). A cordon that lifts, by uncordon or at its end, has the standbys
// look again at the addresses they left alone while it held.
func (m *Member) setCordon(c *store.Cordon) {
	m.mu.Lock()
	tr := m.applyCordonLocked(c)
	m.mu.Unlock()
	m.reportCordon(tr)
}

// cordonTransition is what a change of the cordon did, for reportCordon.
type cordonTransition struct {
	c             *store.Cordon
	now           time.Time
	was, is, same bool
}

// applyCordonLocked records c and arms its end. Called with m.mu held.
func (m *Member) applyCordonLocked(c *store.Cordon) cordonTransition {
	now := m.clock.Now()
	tr := cordonTransition{c: c, now: now, was: m.cordoned, same: c != nil && m.cordon != nil && c.Rev == m.cordon.Rev}
	m.cordon = c
	if m.cordonEnd != nil {
		m.cordonEnd.Stop()
		m.cordonEnd = nil
	}
	tr.is = c != nil && c.Active(now)
	m.cordoned = tr.is
	if tr.is && !c.Until.IsZero() && !m.closed {
		// The key may outlive Until (etcd renews leases in full on a
		// new leader): the cordon ends at Until all the same.
		rev := c.Rev
		m.cordonEnd = m.clock.AfterFunc(c.Until.Sub(now), func() { m.cordonEnded(rev) })
	}
	return tr
}

// reportCordon says what a change of the cordon did, and has the standbys
// look again once it lifted.
func (m *Member) reportCordon(tr cordonTransition) {
	switch {
	case tr.is && !tr.was:
		m.log.Warn("this node is cordoned: it takes no address by move, take-over or standby", "cordon", tr.c.Describe(tr.now))
		m.notify(event.Cordon, netip.Addr{}, "", tr.c.Describe(tr.now)+": takes no address by move, take-over or standby, and keeps what it holds")
	case tr.is && !tr.same:
		m.log.Info("this node's cordon changed", "cordon", tr.c.Describe(tr.now))
	case tr.was && !tr.is:
		m.log.Info("this node's cordon lifted")
		m.notify(event.Cordon, netip.Addr{}, "", "cordon lifted: this node takes addresses again")
		m.afterUncordon()
	}
}

// cordonEnded is called at the end of the cordon last modified at rev: if
// it is still the one recorded, it lifts (checked and applied at once, so
// that a cordon written meanwhile stays).
func (m *Member) cordonEnded(rev int64) {
	m.mu.Lock()
	if m.closed || m.cordon == nil || m.cordon.Rev != rev {
		m.mu.Unlock()
		return
	}
	tr := m.applyCordonLocked(m.cordon)
	m.mu.Unlock()
	m.reportCordon(tr)
}

// afterUncordon has the standbys look again at the addresses they left
// alone while the node was cordoned, each with the owner whose lease had
// expired then: one still free is taken now. An address an owner released
// on purpose, with its lease alive, is not among them, and stays free.
func (m *Member) afterUncordon() {
	m.mu.Lock()
	if m.closed || m.runCtx == nil {
		m.mu.Unlock()
		return
	}
	type look struct {
		a    netip.Addr
		prev store.Claim
	}
	var looks []look
	for a, prev := range m.claims.takePassedOver() {
		looks = append(looks, look{a, prev})
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		for _, l := range looks {
			if m.runCtx.Err() != nil {
				return
			}
			m.gone(l.a, &l.prev)
		}
	}()
}

// Cordon returns this node's cordon while it holds, as last read.
func (m *Member) Cordon() (store.Cordon, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cordon == nil || !m.cordon.Active(m.clock.Now()) {
		return store.Cordon{}, false
	}
	return *m.cordon, true
}
