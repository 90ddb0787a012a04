package fleet

import (
	"context"
	"net/netip"

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
// look at the addresses they stand by for.
func (m *Member) setCordon(c *store.Cordon) {
	now := m.clock.Now()
	m.mu.Lock()
	was := m.cordoned
	same := c != nil && m.cordon != nil && c.Rev == m.cordon.Rev
	m.cordon = c
	if m.cordonEnd != nil {
		m.cordonEnd.Stop()
		m.cordonEnd = nil
	}
	is := c != nil && c.Active(now)
	m.cordoned = is
	if is && !c.Until.IsZero() && !m.closed {
		// The key may outlive Until (etcd renews leases in full on a
		// new leader): the cordon ends at Until all the same.
		rev := c.Rev
		m.cordonEnd = m.clock.AfterFunc(c.Until.Sub(now), func() { m.cordonEnded(rev) })
	}
	m.mu.Unlock()
	switch {
	case is && !was:
		m.log.Warn("this node is cordoned: it takes no address by move, take-over or standby", "cordon", c.Describe(now))
		m.notify(event.Cordon, netip.Addr{}, "", c.Describe(now)+": takes no address by move, take-over or standby, and keeps what it holds")
	case is && !same:
		m.log.Info("this node's cordon changed", "cordon", c.Describe(now))
	case was && !is:
		m.log.Info("this node's cordon lifted")
		m.notify(event.Cordon, netip.Addr{}, "", "cordon lifted: this node takes addresses again")
		m.afterUncordon()
	}
}

// cordonEnded is called at the end of the cordon last modified at rev.
func (m *Member) cordonEnded(rev int64) {
	m.mu.Lock()
	c := m.cordon
	m.mu.Unlock()
	if c != nil && c.Rev == rev {
		// Recorded again as it is: no longer active, so it lifts.
		m.setCordon(c)
	}
}

// afterUncordon has the standbys look at their addresses once the cordon
// lifted: one whose owner's lease expired while the node was cordoned is
// free, and is taken now.
func (m *Member) afterUncordon() {
	m.mu.Lock()
	if m.closed || m.runCtx == nil {
		m.mu.Unlock()
		return
	}
	addrs := make([]netip.Addr, 0, len(m.standby))
	for a := range m.standby {
		addrs = append(addrs, a)
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		for _, a := range addrs {
			if m.runCtx.Err() != nil {
				return
			}
			m.gone(a, nil)
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
