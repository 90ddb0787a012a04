package fleet

import (
	"context"
	"errors"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/vipctl/vip/internal/store"
)

// register grants a lease and writes the node's registration under it,
// taking over that of this host's dead predecessor, if any.
func (m *Member) register(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, store.DefaultTimeout)
	defer cancel()
	sent, sentBoot := m.clock.Now(), m.cfg.Deadline.Now()
	ifs := m.interfaces()
	set := m.setToRegister()
	lease, other, rev, err := m.l.Register(rctx, m.cfg.TTL, m.nodeRecord(ifs), set, m.predecessor)
	if err != nil {
		return err
	}
	if set != nil {
		m.takeRegistered(set, lease, rev)
	}
	switch {
	case other == nil:
	case !other.Stopped.IsZero():
		m.log.Info("took over the records of this node's agent, which stopped for a restart", "pid", other.PID, "stopped", other.Stopped)
	default:
		// Its record does not say it stopped: it was killed or
		// crashed, or the store did not answer as it stopped.
		m.log.Info("took over the records of this node's agent that died (it recorded no stop)", "pid", other.PID)
	}
	// A lease granted when the request was sent lives at least TTL from
	// then: the same deadline as after a renewal.
	m.moveDeadline(sentBoot, 0)
	m.mu.Lock()
	m.lease, m.renewed, m.registered = lease, sent, ifs
	if m.fence != nil {
		// A new lease after the old one was lost: the fence counts
		// from its grant.
		m.fence.Reset(m.clock.Until(sent.Add(m.timing.FenceAfter())))
	}
	m.mu.Unlock()
	if m.fs != nil {
		// The peers read again, and the failsafe set written under
		// the new lease, now: a set left under the lost one holds the
		// takes of the nodes it leaves out (failsafeBlocks) until then.
		// The sets too: owners that lapsed in the same outage may have
		// left sets this node is to clear.
		m.setsDue()
		select {
		case m.fs.reread <- struct{}{}:
		default:
		}
	}
	// A resumption's registration read the interfaces before its write,
	// and a change told meanwhile may have been read, and written under
	// the lost lease, before it: compare once more (at join, before the
	// member runs, this does nothing).
	m.InterfacesChanged()
	return nil
}

// markStopped writes into the registration that the agent stops for a
// restart, so that its successor tells a stop from a death. Under the
// lease, which it leaves to run out; a fenced member, or a store that does
// not answer within a second (the stop waits for it), leaves the record
// as it was, and the successor then says the agent died.
func (m *Member) markStopped() {
	if _, fenced := m.isFenced(); fenced {
		return
	}
	m.mu.Lock()
	lease, ifs := m.lease, m.registered
	m.mu.Unlock()
	rec := m.nodeRecord(ifs)
	rec.Stopped = m.clock.Now().UTC()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if wrote, err := m.l.Reregister(ctx, lease, rec); err != nil || !wrote {
		m.log.Warn("record the stop in this node's registration: its successor will say it died", "err", err)
	}
}

// interfaces reads this host's interfaces for the registration.
func (m *Member) interfaces() []store.Interface {
	if m.cfg.Interfaces == nil {
		return nil
	}
	return m.cfg.Interfaces()
}

// nodeRecord is this node's registration, with its interfaces ifs.
func (m *Member) nodeRecord(ifs []store.Interface) store.Node {
	rec := store.Node{
		Node: m.cfg.Node, Version: m.cfg.Version, Host: m.host, PID: os.Getpid(), BootID: m.boot,
		Started: m.start.UTC(), LeaseTTL: store.Duration(m.cfg.TTL), Interfaces: ifs,
	}
	m.failsafeRecord(&rec)
	return rec
}

// predecessor says whether other is this host's own agent that died.
func (m *Member) predecessor(other store.Node) bool {
	if other.Host != m.host || other.BootID == "" || other.BootID != m.boot || other.PID == os.Getpid() {
		return false
	}
	err := syscall.Kill(other.PID, 0)
	return errors.Is(err, syscall.ESRCH)
}

// InterfacesChanged tells the member that this host's interfaces, or their
// addresses, changed: it reads Config.Interfaces again and, if the list is
// not the one registered, writes the registration again, so that the
// store knows the host's own addresses as they are now (a move of one to or
// from here is refused; see store.Node.OwnAddress). It never blocks: the
// write is the member's, in the background, one at a time; changes that
// come while one is under way are read once it is done, the latest state
// then. A write the store fails is tried again a renewal period later.
// While the member is fenced nothing is written (the store does not
// answer); once it is not, the list is compared with the registration
// again, which a resumption that joined under a new lease wrote afresh.
func (m *Member) InterfacesChanged() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.runCtx == nil {
		return
	}
	if m.refreshing {
		m.refreshAgain = true
		return
	}
	m.refreshing = true
	ctx := m.runCtx
	// Under mu, which Close takes before it waits: an Add after the wait
	// began would be lost to it.
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.refreshRegistration(ctx)
	}()
}

// refreshRegistration writes the registration again until it matches the
// interfaces as they are, for as long as changes keep coming; if the store
// fails it hands over to a try a renewal period later, still in flight.
func (m *Member) refreshRegistration(ctx context.Context) {
	for {
		m.mu.Lock()
		m.refreshAgain = false
		m.mu.Unlock()
		if m.refreshOnce(ctx) {
			m.afterRenew(m.refreshRegistration)
			return
		}
		m.mu.Lock()
		if !m.refreshAgain {
			m.refreshing = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
	}
}

// refreshOnce writes the registration again if the interfaces are not
// those registered. It says whether to try again later: the member is
// fenced, or the store failed.
func (m *Member) refreshOnce(ctx context.Context) (retry bool) {
	for {
		if _, fenced := m.isFenced(); fenced {
			return true
		}
		ifs := m.interfaces()
		m.mu.Lock()
		lease, same := m.lease, sameInterfaces(ifs, m.registered)
		m.mu.Unlock()
		if same {
			return false
		}
		wrote, err := m.l.Reregister(ctx, lease, m.nodeRecord(ifs))
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("write this node's changed interfaces to the store: trying again a renewal period later", "err", err)
			}
			return true
		}
		m.mu.Lock()
		now, fenced := m.lease, !m.fencedAt.IsZero()
		if wrote && now == lease {
			m.registered = ifs
		}
		m.mu.Unlock()
		switch {
		case now != lease:
			// Joined again under a new lease meanwhile, with the
			// interfaces as read then: compare with those.
			continue
		case wrote:
			m.log.Info("wrote this node's changed interfaces to the store", "interfaces", len(ifs), "prefixes", prefixCount(ifs))
			return false
		case fenced:
			// The lease went with the record: the resumption
			// registers afresh.
			return true
		}
		// The record is not bound to the lease, which the member still
		// holds and was not told is gone: the lease is gone (the
		// renewals will find out, and the resumption registers anew),
		// or another agent's record took the name. Either way it is not
		// this write's to overwrite.
		m.log.Warn("this node's registration in the store is no longer under this agent's lease: not writing its changed interfaces")
		return false
	}
}

// sameInterfaces says whether a and b list the same interfaces, in the same
// order, as the registration has them.
func sameInterfaces(a, b []store.Interface) bool {
	return slices.EqualFunc(a, b, func(x, y store.Interface) bool {
		return x.Name == y.Name && x.MAC == y.MAC && x.Up == y.Up && slices.Equal(x.Prefixes, y.Prefixes)
	})
}

func prefixCount(ifs []store.Interface) int {
	n := 0
	for _, ifc := range ifs {
		n += len(ifc.Prefixes)
	}
	return n
}
