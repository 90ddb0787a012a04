package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// Claim claims addresses guarded by the store: each is claimed in the
// engine only once its key is this node's. An address another node holds
// is refused with a *HeldError, the others are claimed (the error is then
// an *announce.RefusedError naming each refusal, as the engine's is).
func (m *Member) Claim(ctx context.Context, reqs []announce.Request, opts announce.ClaimOptions) ([]announce.Status, error) {
	if since, fenced := m.isFenced(); fenced {
		return nil, fencedError(since)
	}
	unlock, err := m.locks.lock(ctx, requestAddrs(reqs))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := m.refuseOwn(reqs); err != nil {
		return nil, err
	}
	ctx, done, err := m.mayTake(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("nothing was claimed: %w", err)
	}
	defer done()
	now := m.clock.Now()
	items := make([]announce.Claim, len(reqs))
	for i, r := range reqs {
		items[i] = announce.Claim{Addr: r.Addr, Interface: r.Interface, ClaimedAt: now, RefreshedAt: now, Options: opts}
	}
	return m.claimOp(ctx, items, func(ctx context.Context, t []announce.Claim) ([]announce.Status, error) {
		rs := make([]announce.Request, len(t))
		for i, c := range t {
			rs[i] = announce.Request{Addr: c.Addr, Interface: c.Interface}
		}
		return m.eng.Claim(ctx, rs, opts)
	})
}

// refuseOwn refuses, before anything changes, a claim of an address the
// kernel already has on its interface: not vip's to guard. An address this
// node holds already (a refresh, an address vip assigned) is not refused.
func (m *Member) refuseOwn(reqs []announce.Request) error {
	if m.cfg.Own == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	own := map[string]map[netip.Addr]bool{}
	for _, r := range reqs {
		if m.claims.place(r.Addr) == event.StateOwner {
			continue
		}
		if _, ok := own[r.Interface]; !ok {
			own[r.Interface] = m.cfg.Own(r.Interface)
		}
		if own[r.Interface][r.Addr] {
			return fmt.Errorf("%s is %w %s, which its kernel answers for: a guarded claim could never hand it over; claim an address the interface does not have, or claim it without --store", r.Addr, ErrOwnAddress, r.Interface)
		}
	}
	return nil
}

// Adopt re-adopts the claims an agent of this node recorded before it
// died: each whose key is still this node's, or free, is taken; one another
// node took meanwhile is refused with a *HeldError.
//
// A free key is a take through the store like any other: it waits for the
// promises an earlier agent of this node made (kept on disk) and for any
// lapsed owner's failsafe set that leaves this node out (mayTake). An
// address whose owner answers on failsafe on such a promise may be one
// that was this node's before its agent died.
func (m *Member) Adopt(ctx context.Context, claims []announce.Claim) ([]announce.Status, error) {
	addrs := make([]netip.Addr, len(claims))
	for i, c := range claims {
		addrs[i] = c.Addr
	}
	unlock, err := m.locks.lock(ctx, addrs)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ctx, done, err := m.mayTake(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("re-adopt the claims of an earlier agent: %w", err)
	}
	defer done()
	return m.claimOp(ctx, claims, m.eng.Adopt)
}

// requestAddrs returns the addresses reqs ask for, in order.
func requestAddrs(reqs []announce.Request) []netip.Addr {
	addrs := make([]netip.Addr, len(reqs))
	for i, r := range reqs {
		addrs[i] = r.Addr
	}
	return addrs
}

// claimOp takes the keys of items, has the engine claim those taken with
// apply, and undoes the keys of what the engine refused. Called with the
// items' addresses locked.
func (m *Member) claimOp(ctx context.Context, items []announce.Claim, apply func(context.Context, []announce.Claim) ([]announce.Status, error)) ([]announce.Status, error) {
	m.leaseOps.RLock()
	defer m.leaseOps.RUnlock()
	got, refused, err := m.acquire(ctx, items)
	if err != nil {
		return nil, err
	}
	var st []announce.Status
	if len(got) > 0 {
		claims := make([]announce.Claim, len(got))
		for i, t := range got {
			claims[i] = t.claim
		}
		var rf *announce.RefusedError
		st, err = apply(ctx, claims)
		switch {
		case errors.As(err, &rf):
			refused = append(refused, rf.Refused...)
		case err != nil:
			m.dropKeys(ctx, freshOf(got, nil))
			return nil, err
		}
		if rf != nil {
			m.dropKeys(ctx, freshOf(got, rf))
		}
		m.commit(st)
	}
	if len(refused) > 0 {
		slices.SortFunc(refused, func(x, y announce.Refusal) int { return x.Addr.Compare(y.Addr) })
		return st, &announce.RefusedError{Refused: refused}
	}
	return st, nil
}

// commit records claims the engine now holds as owned. A fence that came
// while they were being claimed takes them back at once.
func (m *Member) commit(st []announce.Status) {
	m.mu.Lock()
	fenced := !m.fencedAt.IsZero()
	var back []netip.Addr
	for _, s := range st {
		m.claims.hold(s.Addr, owned{claim: s.Claim, mac: s.MAC}, fenced)
		if fenced {
			back = append(back, s.Addr)
		}
	}
	m.mu.Unlock()
	if len(back) > 0 {
		_, _, _ = m.eng.Suspend(back, "fenced")
	}
}

// dropKeys deletes the keys of addrs that are still this node's, each
// recorded in the history as a release by whoever ctx says asked. A key
// that cannot be deleted now is left, and said so in the log: it is bound
// to the lease, so it cannot outlive this agent in any case.
func (m *Member) dropKeys(ctx context.Context, addrs []netip.Addr) {
	m.dropKeysOf(ctx, addrs, m.groupsOf(addrs))
}

// groupsOf names the group of each of addrs this node holds or keeps
// fenced that has one, for the history's records of their release.
func (m *Member) groupsOf(addrs []netip.Addr) map[netip.Addr]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[netip.Addr]string{}
	for _, a := range addrs {
		if o, _ := m.claims.claim(a); o.claim.Options.Group != "" {
			out[a] = o.claim.Options.Group
		}
	}
	return out
}

// dropKeysOf is dropKeys, each record naming the address's group in
// groups (the caller read them while it still held the addresses).
func (m *Member) dropKeysOf(ctx context.Context, addrs []netip.Addr, groups map[netip.Addr]string) {
	if len(addrs) == 0 {
		return
	}
	ch := m.releaseChange(ctx)
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	var (
		g      errgroup.Group
		mu     sync.Mutex
		failed []netip.Addr
	)
	g.SetLimit(keyConcurrency)
	for _, a := range addrs {
		g.Go(func() error {
			one := ch
			one.Group = groups[a]
			if err := m.l.Release(context.WithoutCancel(ctx), lease, a, one); err != nil {
				m.log.Warn("delete a released claim's key: deleted once the store answers", "addr", a, "err", err)
				mu.Lock()
				failed = append(failed, a)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	ch.Message = "its key deleted once the store answered again"
	m.retryDrops(lease, failed, ch, groups)
}

// releaseChange is the history's record of a release by this node, asked
// for as ctx says.
func (m *Member) releaseChange(ctx context.Context) store.Change {
	return store.Change{Kind: store.ChangeRelease, Node: m.cfg.Node, Actor: store.ActorOf(ctx)}
}

// retryDrops deletes, in the background, the keys that a release could not
// delete: bound to this agent's lease, which lives as long as the agent, a
// key left would keep every other node from its address, answered by
// nobody. It tries again every renewal period until the store takes it, the
// address is this node's again (claimed, or fenced for a resumption), or
// the lease changed (the keys went with the old one), or the member stops.
// Each deletion is recorded as ch, naming the address's group in groups.
func (m *Member) retryDrops(lease LeaseID, addrs []netip.Addr, ch store.Change, groups map[netip.Addr]string) {
	if len(addrs) == 0 {
		return
	}
	addrs = slices.Clone(addrs)
	m.afterRenew(func(ctx context.Context) {
		unlock, err := m.locks.lock(ctx, addrs)
		if err != nil {
			return
		}
		defer unlock()
		m.mu.Lock()
		if m.lease != lease {
			m.mu.Unlock()
			return
		}
		addrs = slices.DeleteFunc(addrs, func(a netip.Addr) bool {
			p := m.claims.place(a)
			return p == event.StateOwner || p == event.StateFenced
		})
		m.mu.Unlock()
		var left []netip.Addr
		for _, a := range addrs {
			one := ch
			one.Group = groups[a]
			if err := m.l.Release(ctx, lease, a, one); err != nil {
				left = append(left, a)
				continue
			}
			m.log.Info("deleted a released claim's key once the store answered", "addr", a)
		}
		m.retryDrops(lease, left, ch, groups)
	})
}

// afterRenew runs fn in the background a renewal period from now, under
// the member's own context, unless the member stops first.
func (m *Member) afterRenew(fn func(ctx context.Context)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.afterRenewLocked(fn)
}

// afterRenewLocked is afterRenew with m.mu held.
func (m *Member) afterRenewLocked(fn func(ctx context.Context)) {
	ctx := m.runCtx
	if ctx == nil || ctx.Err() != nil {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(m.timing.Renew):
		}
		fn(ctx)
	}()
}

// claimRecord is the record of this node's claim of a on ifname.
func (m *Member) claimRecord(a netip.Addr, ifname, mac string, since time.Time, opts json.RawMessage) store.Claim {
	return store.Claim{Addr: a, Node: m.cfg.Node, Interface: ifname, MAC: mac, Since: since.UTC(), Options: opts, Group: groupOf(opts)}
}

// claimTaken has the engine claim a, whose key takeKey took, with the
// options of its record; when the engine refuses, the key goes again.
func (m *Member) claimTaken(ctx context.Context, a netip.Addr, ifname string, opts json.RawMessage) error {
	var o announce.ClaimOptions
	_ = json.Unmarshal(opts, &o)
	st, err := m.eng.Claim(ctx, []announce.Request{{Addr: a, Interface: ifname}}, o)
	if err != nil {
		m.dropKeys(ctx, []netip.Addr{a})
		return err
	}
	m.commit(st)
	return nil
}

// macs returns each interface's MAC, for the claims' records.
func (m *Member) macs() map[string]string {
	out := map[string]string{}
	if m.cfg.Interfaces == nil {
		return out
	}
	for _, ifc := range m.cfg.Interfaces() {
		out[ifc.Name] = ifc.MAC
	}
	return out
}

// Release releases addresses: the engine stops answering for each first,
// and only then is its key deleted, so whoever takes it next never
// overlaps. Fenced, lost and standby entries are forgotten too.
func (m *Member) Release(ctx context.Context, addrs []netip.Addr) (released, notHeld []netip.Addr, err error) {
	unlock, err := m.locks.lock(ctx, addrs)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	var inEngine, local, standbys []netip.Addr
	groups := m.groupsOf(addrs) // before they go from owned and fenced
	m.mu.Lock()
	for _, a := range addrs {
		p := m.claims.place(a)
		_, s := m.claims.standbyOf(a)
		switch {
		case p == event.StateFenced || p == event.StateLost:
			m.claims.release(a)
			local = append(local, a)
		case !s || p == event.StateOwner:
			inEngine = append(inEngine, a)
		}
		// Released here, the address has this node as a standby no
		// more either: the operator gives it up.
		if s {
			standbys = append(standbys, a)
		}
	}
	m.mu.Unlock()
	if len(inEngine) > 0 {
		released, notHeld, err = m.eng.Release(ctx, inEngine)
		if err != nil {
			return nil, nil, err
		}
		m.mu.Lock()
		for _, a := range released {
			m.claims.releaseOwner(a)
		}
		m.mu.Unlock()
	}
	m.dropKeysOf(ctx, append(slices.Clone(released), local...), groups)
	if len(local) > 0 && m.cfg.Forget != nil {
		if err := m.cfg.Forget(ctx, local...); err != nil {
			return released, notHeld, fmt.Errorf("forget the fenced claims: %w", err)
		}
	}
	for _, a := range standbys {
		if err := m.dropStandby(ctx, a); err != nil {
			return released, notHeld, err
		}
	}
	released = append(append(released, local...), standbys...)
	slices.SortFunc(released, func(x, y netip.Addr) int { return x.Compare(y) })
	released = slices.Compact(released)
	notHeld = slices.DeleteFunc(notHeld, func(a netip.Addr) bool { return slices.Contains(standbys, a) })
	return released, notHeld, nil
}

// Refresh re-arms the bursts of owned claims; a fenced agent refuses.
func (m *Member) Refresh(ctx context.Context, addrs []netip.Addr) (refreshed, notHeld []netip.Addr, err error) {
	if since, fenced := m.isFenced(); fenced {
		return nil, nil, fencedError(since)
	}
	refreshed, notHeld, err = m.eng.Refresh(ctx, addrs)
	if err != nil || len(refreshed) == 0 {
		return refreshed, notHeld, err
	}
	m.recordRefresh(ctx, refreshed)
	return refreshed, notHeld, nil
}

// recordRefresh writes to the history an operator's refresh of the
// addresses this node holds in the store, with who asked and why. The
// refresh is done by then: a store that fails to take the record loses it
// and says so in the log.
func (m *Member) recordRefresh(ctx context.Context, refreshed []netip.Addr) {
	who := m.identified(store.ActorOf(ctx))
	var changes []store.Change
	m.mu.Lock()
	for _, a := range refreshed {
		if o, place := m.claims.claim(a); place == event.StateOwner {
			changes = append(changes, store.Change{Kind: store.ChangeRefresh, Addr: a, Node: m.cfg.Node, Interface: o.claim.Interface,
				Group: o.claim.Options.Group, Actor: who})
		}
	}
	m.mu.Unlock()
	if len(changes) == 0 {
		return
	}
	if err := m.l.Record(ctx, changes); err != nil {
		m.log.Warn("record a refresh in the history: not recorded", "addresses", len(changes), "err", err)
	}
}

// StandingBy returns the addresses this node stands by for and does not
// hold, each on the interface it would claim it on.
func (m *Member) StandingBy() []announce.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []announce.Request
	m.claims.standbys(func(s store.Standby) {
		if m.claims.standbyOnly(s.Addr) {
			out = append(out, announce.Request{Addr: s.Addr, Interface: s.Interface})
		}
	})
	slices.SortFunc(out, func(x, y announce.Request) int { return x.Addr.Compare(y.Addr) })
	return out
}

// Held returns the addresses the engine holds and those fenced, which this
// node still means to hold.
func (m *Member) Held() []netip.Addr {
	out := m.eng.Held()
	m.mu.Lock()
	out = append(out, m.claims.addrs(event.StateFenced)...)
	m.claims.standbys(func(s store.Standby) { out = append(out, s.Addr) })
	m.mu.Unlock()
	slices.SortFunc(out, func(x, y netip.Addr) int { return x.Compare(y) })
	return slices.Compact(out)
}

// Subscribe passes the engine's events on; Notify publishes one.
func (m *Member) Subscribe(n int) (<-chan announce.Event, func()) { return m.eng.Subscribe(n) }

// SubscribeSince passes the engine's events on, starting with those it
// keeps from after since.
func (m *Member) SubscribeSince(n int, since time.Time) (<-chan announce.Event, func()) {
	return m.eng.SubscribeSince(n, since)
}

// Config returns the engine's configuration.
func (m *Member) Config() announce.EngineConfig { return m.eng.Config() }

// notify publishes an event of the member's own.
func (m *Member) notify(kind event.Kind, a netip.Addr, ifname, msg string) {
	m.eng.Notify(announce.Event{Time: m.clock.Now(), Kind: kind, Addr: a, Interface: ifname, Message: msg})
}

// notifyChange publishes ev, an event that changes this node's place for
// an address (its From, To, Peer and Reason: see event.Event), at now.
func (m *Member) notifyChange(ev announce.Event) {
	ev.Time = m.clock.Now()
	m.eng.Notify(ev)
}

// identified is a, asked of this agent, with the identity the store knows
// the agent by, when a names none.
func (m *Member) identified(a store.Actor) store.Actor {
	if a.Identity == "" {
		a.Identity = m.l.Identity()
	}
	return a
}
