package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// Standby registers this node as a standby for addresses: when an owner's
// key vanishes with its lease, one standby (the store's transaction picks
// it) claims the address with the options given here.
func (m *Member) Standby(ctx context.Context, reqs []announce.Request, opts announce.ClaimOptions) ([]announce.Status, error) {
	if since, fenced := m.isFenced(); fenced {
		return nil, fencedError(since)
	}
	unlock, err := m.locks.lock(ctx, requestAddrs(reqs))
	if err != nil {
		return nil, err
	}
	defer unlock()
	raw, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	for _, r := range reqs {
		if m.claims.place(r.Addr) == event.StateOwner {
			m.mu.Unlock()
			return nil, fmt.Errorf("this node holds %s already: a standby is another node, ready to take it", r.Addr)
		}
	}
	m.mu.Unlock()
	// One record per address: a transaction refuses a key twice.
	seen := map[netip.Addr]bool{}
	reqs = slices.DeleteFunc(slices.Clone(reqs), func(r announce.Request) bool {
		dup := seen[r.Addr]
		seen[r.Addr] = true
		return dup
	})
	if err := m.wholeGroup(ctx, reqs, opts.Group); err != nil {
		return nil, err
	}
	now := m.clock.Now().UTC()
	var st []announce.Status
	// The standby records go in transactions of up to store.MaxReadsPerTxn
	// puts, not one round trip each.
	for start := 0; start < len(reqs); start += store.MaxReadsPerTxn {
		batch := reqs[start:min(start+store.MaxReadsPerTxn, len(reqs))]
		recs := make([]store.Standby, len(batch))
		for i, r := range batch {
			recs[i] = store.Standby{Addr: r.Addr, Node: m.cfg.Node, Interface: r.Interface, Since: now, Options: raw, Group: opts.Group}
		}
		rev, err := m.l.PutStandbys(ctx, recs)
		if err != nil {
			what := batch[0].Addr.String()
			if len(batch) > 1 {
				what = fmt.Sprintf("%d addresses from %s", len(batch), batch[0].Addr)
			}
			return st, fmt.Errorf("register as a standby for %s: %w", what, err)
		}
		// The history keeps the standbys added, as vip standby's are,
		// with who asked: after the records, which are what counts, so
		// a history that fails to take them changes nothing but itself.
		who := m.identified(store.ActorOf(ctx))
		added := make([]store.Change, len(recs))
		for i, rec := range recs {
			added[i] = store.Change{Kind: store.ChangeStandbyAdd, Addr: rec.Addr, Node: m.cfg.Node, Interface: rec.Interface,
				Group: rec.Group, Time: now, Actor: who}
		}
		if err := m.l.Record(ctx, added); err != nil {
			m.log.Warn("record the standbys added in the history", "addrs", len(added), "err", err)
		}
		for i, r := range batch {
			m.mu.Lock()
			m.claims.standBy(recs[i], rev)
			m.mu.Unlock()
			m.watchGone(r.Addr, rev)
			st = append(st, announce.Status{Claim: announce.Claim{Addr: r.Addr, Interface: r.Interface, ClaimedAt: now, Options: opts}, State: api.StateStandby})
			m.log.Info("standby", "addr", r.Addr, "interface", r.Interface)
			m.notifyChange(announce.Event{Kind: event.Standby, Addr: r.Addr, Interface: r.Interface, From: event.StateNone, To: event.StateStandby, Reason: event.ReasonStandbyAdded,
				Message: "registered as a standby: takes the address if its owner's lease expires"})
		}
	}
	return st, nil
}

// dropStandby forgets this node's standby for a. Called with a locked.
func (m *Member) dropStandby(ctx context.Context, a netip.Addr) error {
	if err := m.l.DeleteStandby(ctx, a, m.cfg.Node); err != nil {
		return fmt.Errorf("forget the standby for %s: %w", a, err)
	}
	m.mu.Lock()
	m.claims.dropStandby(a, -1)
	m.mu.Unlock()
	m.unwatchGone(a)
	return nil
}

// standbyOf is this node's standby record for the claim c, as of now.
func (m *Member) standbyOf(c announce.Claim, now time.Time) *store.Standby {
	raw, err := json.Marshal(c.Options)
	if err != nil {
		return nil
	}
	return &store.Standby{Addr: c.Addr, Node: m.cfg.Node, Interface: c.Interface, Since: now, Options: raw, Group: c.Options.Group}
}

// loadStandbys reads this node's standbys from the store, which no lease
// binds (an agent that restarts finds them there), and watches their
// addresses. It returns the revision read, from which the watch starts.
func (m *Member) loadStandbys(ctx context.Context) (int64, error) {
	mine, rev, err := m.l.Standbys(ctx, m.cfg.Node)
	if err != nil {
		return 0, err
	}
	// A record an older vip bound to its agent's lease would go with
	// it: written again, bound to none.
	var bound []store.Standby
	for _, s := range mine {
		if s.Lease != 0 {
			bound = append(bound, s)
		}
	}
	if len(bound) > 0 {
		if rev, err = m.l.PutStandbys(ctx, bound); err != nil {
			return 0, fmt.Errorf("keep the standby records an older agent bound to its lease: %w", err)
		}
	}
	for _, s := range mine {
		m.keepStandby(s, rev)
	}
	return rev, nil
}

// reconcileStandbys reads this node's standby records and stands by as
// they say: for those it did not know of, and no more for those gone.
func (m *Member) reconcileStandbys(ctx context.Context) error {
	mine, rev, err := m.l.Standbys(ctx, m.cfg.Node)
	if err != nil {
		return err
	}
	have := map[netip.Addr]bool{}
	for _, s := range mine {
		have[s.Addr] = true
		m.mu.Lock()
		_, known := m.claims.standbyOf(s.Addr)
		m.mu.Unlock()
		if !known {
			m.keepStandby(s, rev)
		}
	}
	m.mu.Lock()
	var gone []netip.Addr
	m.claims.standbys(func(s store.Standby) {
		if !have[s.Addr] {
			gone = append(gone, s.Addr)
		}
	})
	m.mu.Unlock()
	for _, a := range gone {
		m.forgetStandbyAsOf(a, rev)
	}
	return nil
}

// forgetStandby stops standing by for a, whose record is gone.
func (m *Member) forgetStandby(a netip.Addr) { m.forgetStandbyAsOf(a, -1) }

// forgetStandbyAsOf stops standing by for a, whose record a read at rev
// did not find: unless the record was written or read since (a standby
// registered while the read was under way), or rev is below 0 (gone in
// any case).
func (m *Member) forgetStandbyAsOf(a netip.Addr, rev int64) {
	m.mu.Lock()
	s, had, kept := m.claims.dropStandby(a, rev)
	m.mu.Unlock()
	if !had || kept {
		return
	}
	m.unwatchGone(a)
	m.log.Info("no longer a standby", "addr", a, "by", "the store")
	m.notifyChange(announce.Event{Kind: event.Standby, Addr: a, Interface: s.Interface, From: event.StateStandby, To: event.StateNone, Reason: event.ReasonStandbyRemoved,
		Message: "removed from the address's standbys in the store (vip standby --remove)"})
}

// keepStandby notes this node's standby record s, read or written at rev,
// and watches its address.
func (m *Member) keepStandby(s store.Standby, rev int64) {
	s.Lease = 0
	if s.Group == "" {
		s.Group = groupOf(s.Options)
	}
	m.mu.Lock()
	m.claims.standBy(s, rev)
	m.mu.Unlock()
	m.watchGone(s.Addr, rev)
}

// syncStandby reads this node's standby record for a again, after a notice
// in its inbox (vip standby --on, from any host), and stands by for a, or
// no more, as the store says. Called with a locked.
func (m *Member) syncStandby(ctx context.Context, a netip.Addr) error {
	s, rev, err := m.l.StandbyOf(ctx, a, m.cfg.Node)
	if err != nil {
		m.log.Warn("read this node's standby record after a notice: read again once the store answers", "addr", a, "err", err)
		return err
	}
	m.mu.Lock()
	old, had := m.claims.standbyOf(a)
	m.mu.Unlock()
	switch {
	case s != nil && (!had || old.Interface != s.Interface || string(old.Options) != string(s.Options)):
		m.keepStandby(*s, rev)
		if !had {
			m.log.Info("standby", "addr", a, "interface", s.Interface, "by", "the store")
			m.notifyChange(announce.Event{Kind: event.Standby, Addr: a, Interface: s.Interface, From: event.StateNone, To: event.StateStandby, Reason: event.ReasonStandbySet,
				Message: "made a standby in the store (vip standby): takes the address if its owner's lease expires"})
		}
	case s == nil && had:
		m.forgetStandby(a)
	}
	return nil
}

// takeAsStandby is called when the key of addrs[0] vanished (addrs are
// it and the rest of its group that this node stands by for): if this
// node stands by for it, its owner's lease has expired (not a planned
// release or move), and no move of it is under way, it tries to take the
// keys, all of a group's in one transaction, and claims the addresses.
// Called with addrs locked.
func (m *Member) takeAsStandby(ctx context.Context, addrs []netip.Addr, prev *store.Claim) {
	a := addrs[0]
	m.mu.Lock()
	var ss []store.Standby
	for _, b := range addrs {
		if s, ok := m.claims.standbyOf(b); ok && m.standbyOnlyLocked(b) {
			ss = append(ss, s)
		}
	}
	_, first := m.claims.standbyOf(a)
	fenced := !m.fencedAt.IsZero()
	if fenced && first && len(ss) > 0 {
		// Looked at again once the member resumes (takeFreeStandbys).
		m.claims.missTake(a, prev)
	}
	m.mu.Unlock()
	if !first || len(ss) == 0 || fenced {
		return
	}
	m.log.Debug("an owner's key vanished: a standby looks", "addr", a, "group", ss[0].Group)
	var owner store.Claim
	if prev != nil {
		owner = *prev
		if prev.Lease != 0 {
			alive, err := m.l.LeaseAlive(ctx, LeaseID(prev.Lease))
			switch {
			case err != nil:
				m.log.Warn("tell whether an owner's lease expired: not taking over", "addr", a, "err", err)
				return
			case alive:
				// The owner is alive: it released the address on
				// purpose, and a standby does not overrule it.
				return
			}
		}
	}
	// Taken from a dead owner, the address keeps its home, or makes the
	// owner its home: vip uncordon --return takes it back there.
	home := owner.Home
	if home == "" {
		home = owner.Node
	}
	took, err := m.takeUncordoned(ctx, ss, owner, prev, home)
	if err != nil || !took {
		return
	}
	// The standby records stay: the set lasts, and this node stands by
	// again once the address leaves it.
	for _, s := range ss {
		msg := fmt.Sprintf("took the address as a standby: the lease of its owner %s expired", owner.Node)
		if s.Group != "" {
			msg += fmt.Sprintf(" (group %s, %d addresses in one transaction)", s.Group, len(ss))
		}
		m.log.Warn("standby took over", "addr", s.Addr, "interface", s.Interface, "from", owner.Node, "group", s.Group)
		m.notifyChange(announce.Event{Kind: event.Standby, Addr: s.Addr, Interface: s.Interface, From: event.StateStandby, To: event.StateOwner, Peer: owner.Node, Reason: event.ReasonOwnerExpired, Message: msg})
	}
}

// maxCordonLooks bounds how often a standby reads its cordon again when
// the cordon changed between its read and its take.
const maxCordonLooks = 3

// takeUncordoned takes the keys of ss's addresses as a standby, and claims
// the addresses, unless this node is cordoned: the cordon is read now, and
// the take compares it, so that one written since refuses it too; one that
// changed meanwhile is read again. An address left alone for a cordon is
// kept (passedOver) for when it lifts. It says whether it took the
// addresses. Called with them locked.
func (m *Member) takeUncordoned(ctx context.Context, ss []store.Standby, owner store.Claim, prev *store.Claim, home string) (bool, error) {
	a := ss[0].Addr
	for range maxCordonLooks {
		c, _, err := m.l.Cordon(ctx, m.cfg.Node)
		if err != nil {
			m.log.Warn("read this node's cordon: not taking over", "addr", a, "err", err)
			return false, err
		}
		cordonRev := int64(0)
		if c != nil {
			if now := m.clock.Now(); c.Active(now) {
				if prev != nil {
					// Kept for when the cordon lifts: the owner
					// it was taken from becomes its home.
					m.mu.Lock()
					m.claims.passOver(a, *prev)
					m.mu.Unlock()
				}
				for _, s := range ss {
					m.log.Warn("a standby for an address whose owner's lease expired does not take it: this node is cordoned", "addr", s.Addr, "cordon", c.Describe(now))
					m.notify(event.Standby, s.Addr, s.Interface, fmt.Sprintf("not taken: the lease of its owner %s expired, but %s", owner.Node, c.Describe(now)))
				}
				return false, nil
			}
			cordonRev = c.Rev
		}
		took, again, err := m.takeAsStandbyOnce(ctx, ss, cordonRev, home, owner.Node)
		if err != nil || took || !again {
			return took, err
		}
	}
	return false, nil
}

// takeAsStandbyOnce takes the keys of ss's addresses if they are free and
// the cordon is the one at cordonRev, all in one transaction, and claims
// the addresses. again says the take was refused with the keys still
// free: the cordon changed since it was read. from is the owner whose
// lease expired, for the history.
func (m *Member) takeAsStandbyOnce(ctx context.Context, ss []store.Standby, cordonRev int64, home, from string) (took, again bool, err error) {
	m.leaseOps.RLock()
	defer m.leaseOps.RUnlock()
	ch := store.Change{Kind: store.ChangeFailover, From: from}
	tks := make([]taking, len(ss))
	for i, s := range ss {
		tks[i] = taking{addr: s.Addr, ifname: s.Interface, opts: s.Options, cond: StandbyTake(cordonRev), home: home, change: ch}
	}
	took, err = m.takeKeys(ctx, tks)
	if err != nil {
		m.log.Debug("take an address as a standby", "addr", ss[0].Addr, "err", err)
		return false, false, err
	}
	if !took {
		c, _, err := m.l.Cordon(ctx, m.cfg.Node)
		changed := err == nil && (c == nil && cordonRev != 0 || c != nil && c.Rev != cordonRev)
		if !changed {
			m.log.Debug("another took the address first", "addr", ss[0].Addr)
		}
		return false, changed, nil
	}
	for _, s := range ss {
		if err := m.claimTaken(ctx, s.Addr, s.Interface, s.Options); err != nil {
			m.log.Error("take over as a standby", "addr", s.Addr, "err", err)
			return false, false, err
		}
	}
	return true, false, nil
}

// standbyOnlyLocked says whether this node only stands by for a: it is in
// a's standbys, and neither holds it nor keeps it fenced or lost (the set
// lasts through its turns as owner). Called with m.mu held.
func (m *Member) standbyOnlyLocked(a netip.Addr) bool {
	return m.claims.standbyOnly(a)
}
