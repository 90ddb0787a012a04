package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// resume brings the fenced claims back once the store answers again. When
// the lease is gone (leaseLost), the member first joins again under a new
// one. A key still this node's resumes with a fresh burst; a free one is
// taken again; one another node took is reported lost to it.
func (m *Member) resume(ctx context.Context, leaseLost bool) {
	for m.resumeOnce(ctx, leaseLost) && ctx.Err() == nil {
		leaseLost = false
	}
}

// fencedBeyond says whether the member, unfenced, still keeps fenced claims
// other than those of addrs: a claim that was being made when the fence
// came, committed as fenced after the resumption looked. They need a
// resumption of their own.
func (m *Member) fencedBeyond(addrs []netip.Addr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.fencedAt.IsZero() {
		return false
	}
	for _, a := range m.claims.addrs(event.StateFenced) {
		if !slices.Contains(addrs, a) {
			return true
		}
	}
	return false
}

// resumeOnce is one resumption of the fenced claims it finds; it says
// whether another is needed (fencedBeyond). Its steps, in order: wait for
// the fence's revocation, lock the fenced addresses, join again under a
// new lease if the old one is gone, take the keys again, mark those
// another node took as lost, record the fence, and resume the rest in the
// engine.
func (m *Member) resumeOnce(ctx context.Context, leaseLost bool) (again bool) {
	if !m.waitRevoked(ctx) {
		return false
	}
	// The fenced claims' addresses, locked; one fenced meanwhile waits
	// for the next resumption. A fenced member claims nothing new, so
	// the lease can change under the other operations: they refuse.
	addrs := m.fencedAddrs()
	unlock, err := m.locks.lock(ctx, addrs)
	if err != nil {
		return false
	}
	defer unlock()
	defer func() { again = again || m.fencedBeyond(addrs) }()
	if leaseLost {
		gctx, done, ok := m.rejoin(ctx)
		if !ok {
			return false
		}
		defer done()
		ctx = gctx
	}
	got, refused, err := m.acquire(ctx, m.fencedClaims(addrs))
	if err != nil {
		m.log.Warn("resume the fenced claims: staying fenced", "err", err)
		return false
	}
	now := m.clock.Now()
	fencedSince, ok := m.unfence(now, refused)
	if !ok {
		// The store went away again while the keys were read.
		m.dropKeys(ctx, freshOf(got, nil))
		return false
	}
	lostTo, changes := m.reportLost(now, refused)
	m.recordFence(ctx, fencedSince, now, addrs, got, changes)
	if len(got) == 0 {
		m.log.Info("the store answers again: unfenced", "resumed", 0, "lost", len(refused))
		m.notify(event.Resume, netip.Addr{}, "", fmt.Sprintf("the store answers again: resumed 0 claims, %d lost", len(refused)))
		m.reportStall(leaseLost, 0, lostTo)
		return false
	}
	st, unresumed, stopping := m.resumeInEngine(ctx, got)
	if stopping {
		// The agent is stopping: nothing to give up, the lease goes
		// with it. Only the keys this call made go now.
		m.dropKeys(ctx, freshOf(got, nil))
		return false
	}
	m.giveUp(ctx, unresumed)
	m.commit(st)
	m.log.Info("the store answers again: unfenced", "resumed", len(st), "lost", len(refused), "released", len(unresumed))
	msg := fmt.Sprintf("the store answers again: resumed %d claims with a fresh burst, %d lost", len(st), len(refused))
	if len(unresumed) > 0 {
		msg += fmt.Sprintf(", %d released (the engine refused them)", len(unresumed))
	}
	m.notify(event.Resume, netip.Addr{}, "", msg)
	m.reportStall(leaseLost, len(st), lostTo)
	return false
}

// waitRevoked waits for the fence's revocation: until it returned, the
// engine may hold claims whose keys went with the lease, and a new lease
// would open the deadline for them. False when ctx ended first.
func (m *Member) waitRevoked(ctx context.Context) bool {
	m.mu.Lock()
	revoked := m.revoking
	m.mu.Unlock()
	if revoked == nil {
		return true
	}
	select {
	case <-revoked:
		return true
	case <-ctx.Done():
		return false
	}
}

// fencedAddrs are the addresses of the fenced claims.
func (m *Member) fencedAddrs() []netip.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claims.addrs(event.StateFenced)
}

// fencedClaims are the claims of addrs still fenced.
func (m *Member) fencedClaims(addrs []netip.Addr) []announce.Claim {
	m.mu.Lock()
	defer m.mu.Unlock()
	claims := make([]announce.Claim, 0, len(addrs))
	for _, a := range addrs {
		if o, p := m.claims.claim(a); p == event.StateFenced {
			claims = append(claims, o.claim)
		}
	}
	return claims
}

// rejoin joins the fleet again under a new lease, after the old one was
// lost, and returns the context the keys are taken again under, and the
// end of that take (done); ok is false when it stays fenced.
func (m *Member) rejoin(ctx context.Context) (gctx context.Context, done func(), ok bool) {
	// The claims in flight under the lost lease finish first: each
	// commits as fenced, for the next pass (fencedBeyond).
	m.leaseOps.Lock()
	err := m.register(ctx)
	m.leaseOps.Unlock()
	if err != nil {
		m.log.Error("join the fleet again after the lease was lost: staying fenced", "err", err)
		return nil, nil, false
	}
	// Every key went with the lease: taking them again is a take
	// through the store, which waits for this node's promises and for
	// the failsafe sets that leave it out (mayTake). Another node may
	// have taken one of them meanwhile and, its lease gone in the same
	// outage, answer for it on failsafe on this node's promise. Under a
	// live lease the keys are still this node's (none can be taken from
	// a live lease), and resume at once.
	gctx, done, err = m.mayTake(ctx, true)
	if err != nil {
		m.log.Warn("resume the fenced claims: staying fenced", "err", err)
		return nil, nil, false
	}
	return gctx, done, true
}

// unfence lifts the fence at now, unless the store went away again while
// the keys were read (ok false, still fenced), and moves each claim
// another node holds (refused) from fenced to lost. It returns when the
// fence began.
func (m *Member) unfence(now time.Time, refused []announce.Refusal) (fencedSince time.Time, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.renewed) >= m.timing.FenceAfter() {
		return time.Time{}, false
	}
	for _, r := range refused {
		var held *HeldError
		if errors.As(r.Err, &held) {
			m.claims.lose(r.Addr, held.Node, now, held.Since)
		}
	}
	fencedSince = m.fencedAt
	m.fencedAt = time.Time{}
	return fencedSince, true
}

// reportLost logs and publishes each claim another node took while this
// one was fenced, and returns them by address with the history's records
// of them.
func (m *Member) reportLost(now time.Time, refused []announce.Refusal) (map[netip.Addr]string, []store.Change) {
	lostTo := map[netip.Addr]string{}
	var changes []store.Change
	for _, r := range refused {
		var held *HeldError
		if errors.As(r.Err, &held) {
			lostTo[r.Addr] = held.Node
			changes = append(changes, store.Change{Kind: store.ChangeLost, Addr: r.Addr, Node: m.cfg.Node, From: held.Node,
				Time: now, Message: "taken while this node was fenced" + TakenAt(held.Since)})
			m.log.Warn("lost to another node while fenced: staying silent", "addr", r.Addr, "to", held.Node, "taken", held.Since)
			m.notifyChange(announce.Event{Kind: event.Taken, Addr: r.Addr, From: event.StateFenced, To: event.StateLost, Peer: held.Node, Reason: event.ReasonTakenWhileFenced,
				Message: fmt.Sprintf("lost to %s while this node was fenced%s: it stays silent", held.Node, TakenAt(held.Since))})
		}
	}
	return lostTo, changes
}

// resumeInEngine resumes the claims whose keys were taken again (got) in
// the engine, keeping each claim's options and since, with a fresh burst,
// as Adopt does, but as this run's claims. It returns what the engine
// holds, the claims it refused, and whether the agent is stopping.
func (m *Member) resumeInEngine(ctx context.Context, got []taken) (st []announce.Status, unresumed []announce.Refusal, stopping bool) {
	resumed := make([]announce.Claim, len(got))
	for i, t := range got {
		resumed[i] = t.claim
	}
	st, err := m.eng.Resume(ctx, resumed, "resumed after the fence: the store answers again")
	var rf *announce.RefusedError
	switch {
	case err == nil:
	case errors.As(err, &rf):
		unresumed = rf.Refused
	case ctx.Err() != nil:
		return nil, nil, true
	default:
		st = nil
		for _, c := range resumed {
			unresumed = append(unresumed, announce.Refusal{Addr: c.Addr, Err: err})
		}
	}
	return st, unresumed, false
}

// recordFence writes the fence that lifted at now to the history, with the
// losses found then: a fenced node reaches no store, so its fence, from
// since over addrs, is written only once it is over, and the record of
// the node that took an address (store.ChangeStandby) comes first in the
// store's order.
func (m *Member) recordFence(ctx context.Context, since, now time.Time, addrs []netip.Addr, got []taken, lost []store.Change) {
	fence := store.Change{Kind: store.ChangeFence, Node: m.cfg.Node, Time: since, Since: since,
		Message: fmt.Sprintf("silent for %s: its lease could not be renewed in time", now.Sub(since).Round(time.Millisecond))}
	fence.SetAddrs(addrs)
	resume := store.Change{Kind: store.ChangeResume, Node: m.cfg.Node, Time: now, Since: since}
	back := make([]netip.Addr, len(got))
	for i, t := range got {
		back[i] = t.claim.Addr
	}
	resume.SetAddrs(back)
	if err := m.l.Record(ctx, append([]store.Change{fence}, append(lost, resume)...)); err != nil {
		m.log.Warn("write the fence to the history: left out of it", "err", err)
	}
}

// giveUp releases the fenced claims the engine refused to take back (say,
// their interface can no longer be opened): it deletes their keys, which
// are still this node's, so that no key of a node that does not answer
// keeps the others from the address, and says so for each. They are no
// longer reported as fenced.
func (m *Member) giveUp(ctx context.Context, refused []announce.Refusal) {
	if len(refused) == 0 {
		return
	}
	addrs := make([]netip.Addr, len(refused))
	for i, r := range refused {
		addrs[i] = r.Addr
	}
	m.dropKeys(ctx, addrs)
	m.mu.Lock()
	ifnames := make([]string, len(refused))
	for i, r := range refused {
		if o, p := m.claims.claim(r.Addr); p == event.StateFenced {
			ifnames[i] = o.claim.Interface
			m.claims.release(r.Addr)
		}
	}
	m.mu.Unlock()
	for i, r := range refused {
		m.log.Error("a fenced claim could not be taken back: released", "addr", r.Addr, "err", r.Err)
		m.notify(event.Release, r.Addr, ifnames[i], fmt.Sprintf("not resumed after the fence, so released and its key deleted: %v", r.Err))
	}
}

// TakenAt says when another node took an address, " (it took it at
// 15:04:05.000)", or nothing when the store did not say (a zero since).
func TakenAt(since time.Time) string {
	if since.IsZero() {
		return ""
	}
	return " (it took it at " + since.Local().Format("15:04:05.000") + ")"
}
