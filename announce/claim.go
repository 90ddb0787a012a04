package announce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Claim makes this host the owner of each requested address: it answers
// for it from now on and a gratuitous window opens (or, for an address
// already held, re-opens from now: a refresh, which also takes the new
// options). Claim returns once each address's first round has been sent,
// with the status of each address it claimed or refreshed.
//
// Each address stands alone: one that cannot be claimed (held on another
// interface, an interface that cannot be opened, an address that cannot be
// added or answered for) is refused, what was done for it undone, and the
// others are claimed all the same; the error is then a *RefusedError that
// names each refusal. Errors of the whole request (an address given twice,
// a book that cannot be written) claim nothing.
func (e *Engine) Claim(ctx context.Context, reqs []Request, opts ClaimOptions) ([]Status, error) {
	now := e.clock.Now()
	items := make([]Claim, len(reqs))
	for i, r := range reqs {
		items[i] = Claim{Addr: r.Addr, Interface: r.Interface, ClaimedAt: now, RefreshedAt: now, Options: opts}
	}
	return e.take(ctx, items, false, "claimed")
}

// Adopt takes over claims recorded by an earlier run (after a crash or a
// restart): each keeps its options, its ClaimedAt and whether vip added its
// address, and gets a fresh burst. A claim whose interface is gone waits
// for it. Each publishes a resume event (EventResume), not a claim event,
// that says "adopted from an earlier run".
func (e *Engine) Adopt(ctx context.Context, claims []Claim) ([]Status, error) {
	return e.adopt(ctx, claims, "adopted from an earlier run")
}

// Resume takes again, as Adopt does, claims that this run stopped without
// releasing them for good: those the fleet's fence suspended, once the
// store answers again, or one let go for a move that gave up. why is what
// their resume events say (and so a hook's VIP_REASON), since they are not
// an earlier run's.
func (e *Engine) Resume(ctx context.Context, claims []Claim, why string) ([]Status, error) {
	return e.adopt(ctx, claims, why)
}

func (e *Engine) adopt(ctx context.Context, claims []Claim, why string) ([]Status, error) {
	now := e.clock.Now()
	items := slices.Clone(claims)
	for i := range items {
		items[i].RefreshedAt = now
	}
	return e.take(ctx, items, true, why)
}

// take claims items, adopted or not; why is what each new claim's event
// says.
func (e *Engine) take(ctx context.Context, items []Claim, adopt bool, why string) ([]Status, error) {
	out, err := e.claim(ctx, items, adopt, why)
	if err != nil {
		return nil, err
	}
	for _, live := range out.lives {
		select {
		case <-live:
		case <-ctx.Done():
			// The new claims of an interrupted request are undone
			// (refreshes of held ones stand).
			if _, _, rerr := e.Release(context.WithoutCancel(ctx), out.fresh); rerr != nil {
				return nil, fmt.Errorf("interrupted before the first gratuitous round, and undoing the claims failed: %w", errors.Join(ctx.Err(), rerr))
			}
			return nil, fmt.Errorf("interrupted before the first gratuitous round, so nothing new is held: %w", ctx.Err())
		}
	}
	var st []Status
	if len(out.claimed) > 0 {
		st = e.Status(out.claimed...)
	}
	if len(out.refused) > 0 {
		slices.SortFunc(out.refused, func(x, y Refusal) int { return x.Addr.Compare(y.Addr) })
		return st, &RefusedError{Refused: out.refused}
	}
	return st, nil
}

// maxClaimLogLines is the most claims of one request logged a line each at
// the info level; a larger request logs one line for all (a claim of
// 10,000 addresses would otherwise write 10,000 lines under the engine's
// lock).
const maxClaimLogLines = 16

func claimLogLevel(n int) slog.Level {
	if n > maxClaimLogLines {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// claimOutcome is what one claim request did.
type claimOutcome struct {
	// lives close once each claim's first round has been sent.
	lives []<-chan struct{}
	// claimed are the addresses claimed or refreshed; fresh those newly
	// claimed, which an interrupted request undoes.
	claimed, fresh []netip.Addr
	refused        []Refusal
}

// claimPlan is one claim request on its way through claim's steps.
type claimPlan struct {
	adopt bool
	// why is what the event of each new claim says.
	why string
	// refreshed are the held claims the request refreshes, and records
	// starts with their new records, in that order.
	refreshed []*claimState
	records   []Claim
	// news are the requests for new claims; fresh the new claims made of
	// them (by openOp), sorted by address, whose records follow the
	// refreshed ones'.
	news  []Claim
	fresh []*claimState
	// added are the new claims whose address vip added to the interface.
	added map[*claimState]bool
	// opened are the interfaces whose ports the request opened.
	opened  []string
	refused []Refusal
}

func (p *claimPlan) refuse(a netip.Addr, err error) {
	p.refused = append(p.refused, Refusal{Addr: a, Err: err})
}

// claim makes the claims of one request, in steps: plan (under mu), open
// ports, add addresses and answer (I/O, under op alone: status and the
// sender go on meanwhile), record in the book, commit (under mu), from
// where the claims are live, and sync the book's record while the first
// rounds go out. An address that cannot be claimed is refused and its
// steps undone; the others go on.
func (e *Engine) claim(ctx context.Context, items []Claim, adopt bool, why string) (claimOutcome, error) {
	e.op.Lock()
	defer e.op.Unlock()
	p, err := e.plan(items, adopt, why)
	if err != nil {
		return claimOutcome{}, err
	}
	byPort := e.prepareOp(p)
	e.holdNewOp(p, byPort)
	err = e.recordOp(ctx, p)
	e.closeUnusedOp(p.opened)
	if err != nil {
		return claimOutcome{}, err
	}
	e.logRequest(p)
	e.mu.Lock()
	out := e.commitLocked(ctx, p)
	e.mu.Unlock()
	for _, name := range p.opened {
		e.attachWaitingOp(name)
	}
	e.syncOp(ctx, p)
	return out, nil
}

// syncOp makes the records recordOp left unsynced durable, while the first
// rounds go out: a claim is answered only once its record would survive a
// power cut. A sync that fails leaves the claims live (the record is in
// the file, which a restarted agent reads) and says so. The caller holds
// e.op.
func (e *Engine) syncOp(ctx context.Context, p *claimPlan) {
	sb, ok := e.cfg.Book.(SyncBook)
	if !ok || len(p.records) == 0 {
		return
	}
	if err := sb.Sync(context.WithoutCancel(ctx)); err != nil {
		e.log.Error("the claims are live, but their record may not survive a power cut", "addresses", len(p.records), "err", err)
	}
}

// plan sorts a request, under mu, into new claims, refreshes of held ones
// (with their new records), and those refused as held on another
// interface. An address given twice, or an assign with no assigner, fails
// the whole request.
func (e *Engine) plan(items []Claim, adopt bool, why string) (*claimPlan, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := &claimPlan{adopt: adopt, why: why, added: map[*claimState]bool{}}
	var refreshedOpt []ClaimOptions
	seen := make(map[netip.Addr]bool, len(items))
	for _, c := range items {
		if seen[c.Addr] {
			return nil, fmt.Errorf("claim %s: address given twice", c.Addr)
		}
		seen[c.Addr] = true
		if c.Options.Assign && e.cfg.Assigner == nil {
			return nil, fmt.Errorf("claim %s with assign: %w", c.Addr, ErrNoAssigner)
		}
		cs, ok := e.claims[c.Addr]
		switch {
		case ok && cs.claim.Interface != c.Interface:
			p.refuse(c.Addr, fmt.Errorf("claim %s on %s: %w (%s); release it first", c.Addr, c.Interface, ErrHeldElsewhere, cs.claim.Interface))
		case ok:
			p.refreshed = append(p.refreshed, cs)
			refreshedOpt = append(refreshedOpt, c.Options)
		default:
			p.news = append(p.news, c)
		}
	}
	now := e.clock.Now()
	p.records = make([]Claim, 0, len(items))
	for i, cs := range p.refreshed {
		c := cs.claim
		c.RefreshedAt = now
		if !adopt {
			// A re-claim takes the new burst options; whether the
			// address is assigned stays as it was.
			c.Options = refreshedOpt[i]
			c.Options.Assign = cs.claim.Options.Assign
		}
		p.records = append(p.records, c)
	}
	return p, nil
}

// prepareOp opens the port of each new claim's interface and adds its
// address if it is to be assigned, and returns the new claims by port. A
// claim whose interface is waiting (adopted while it cannot be opened) has
// no port and joins p.fresh at once. The caller holds e.op.
func (e *Engine) prepareOp(p *claimPlan) map[*portRef][]*claimState {
	openErr := map[string]error{}
	byPort := map[*portRef][]*claimState{}
	for _, c := range p.news {
		if err := openErr[c.Interface]; err != nil {
			p.refuse(c.Addr, fmt.Errorf("claim %s on %s: %w", c.Addr, c.Interface, err))
			continue
		}
		port, err := e.portOp(c.Interface, p.adopt, &p.opened)
		if err != nil {
			openErr[c.Interface] = err
			p.refuse(c.Addr, fmt.Errorf("claim %s on %s: %w", c.Addr, c.Interface, err))
			continue
		}
		var added bool
		if c.Options.Assign && port != nil {
			added, err = e.cfg.Assigner.Add(c.Interface, c.Addr)
			if err != nil {
				p.refuse(c.Addr, fmt.Errorf("claim %s on %s: add the address: %w", c.Addr, c.Interface, err))
				continue
			}
			if !added && !c.AddedAddress {
				e.log.Info("address was already on the interface: vip will leave it there at release", "addr", c.Addr, "interface", c.Interface)
			}
			c.AddedAddress = c.AddedAddress || added
		}
		cs := newClaimState(c, port)
		p.added[cs] = added
		if port != nil {
			byPort[port] = append(byPort[port], cs)
		} else {
			p.fresh = append(p.fresh, cs)
		}
	}
	return byPort
}

// holdNewOp has each port answer for its new claims, one call a port; the
// claims of a port that cannot are refused and undone. The new claims then
// take their places in p.fresh and their records in p.records. The caller
// holds e.op.
func (e *Engine) holdNewOp(p *claimPlan, byPort map[*portRef][]*claimState) {
	for port, css := range byPort {
		if err := e.holdOp(port, css); err != nil {
			for _, cs := range css {
				e.undoNewOp(p, cs)
				p.refuse(cs.claim.Addr, fmt.Errorf("claim %s on %s: %w", cs.claim.Addr, port.Name(), err))
			}
			continue
		}
		port.refs += len(css)
		p.fresh = append(p.fresh, css...)
	}
	slices.SortFunc(p.fresh, func(x, y *claimState) int { return x.claim.Addr.Compare(y.claim.Addr) })
	for _, cs := range p.fresh {
		p.records = append(p.records, cs.claim)
	}
}

// recordOp writes the request's records to the book (a SyncBook's not yet
// synced: syncOp does, once the claims are armed). When the book cannot
// take them, every new claim is undone and the request fails: no Book
// records some claims and refuses others. The caller holds e.op.
func (e *Engine) recordOp(ctx context.Context, p *claimPlan) error {
	if len(p.records) == 0 {
		return nil
	}
	put := e.cfg.Book.Put
	if sb, ok := e.cfg.Book.(SyncBook); ok {
		put = sb.PutUnsynced // synced by syncOp, after the commit
	}
	if err := put(ctx, p.records...); err != nil {
		for _, cs := range p.fresh {
			e.undoNewOp(p, cs)
			if cs.port != nil {
				cs.port.refs--
			}
		}
		return fmt.Errorf("record the claims: %w", err)
	}
	return nil
}

// undoNewOp undoes what prepareOp and holdNewOp did for a new claim that
// will not be made, but its port's reference: the port stops answering
// for it, and an address vip added is removed. The caller holds e.op.
func (e *Engine) undoNewOp(p *claimPlan, cs *claimState) {
	// The address first, as a release does (release.go): the kernel
	// answers for it once the port no longer withholds for it.
	if p.added[cs] {
		_ = e.cfg.Assigner.Remove(cs.claim.Interface, cs.claim.Addr)
	}
	if cs.port != nil && cs.answering {
		_ = cs.port.LetGo(cs.claim.Addr)
		cs.answering = false
	}
}

// logRequest logs a large request in one line, not one per address (each
// claim's own line, in commitLocked, goes to the debug level then), and
// each refusal.
func (e *Engine) logRequest(p *claimPlan) {
	if fresh := p.fresh; len(fresh) > maxClaimLogLines {
		first, last := fresh[0].claim, fresh[len(fresh)-1].claim
		var ifaces []string
		for _, cs := range fresh {
			if !slices.Contains(ifaces, cs.claim.Interface) {
				ifaces = append(ifaces, cs.claim.Interface)
			}
		}
		e.log.Info("claim", "addresses", len(fresh), "first", first.Addr, "last", last.Addr, "interface", strings.Join(ifaces, ","),
			"window", e.burst(fresh[0]).Window, "interval", e.burst(fresh[0]).Interval, "frames", e.frames(fresh[0]).String(), "adopted", p.adopt)
	}
	for _, r := range p.refused {
		e.log.Warn("claim refused", "addr", r.Addr, "err", r.Err)
	}
}

// commitLocked makes the request's claims live: the new ones join the
// engine's claims, the refreshed ones take their new records, and each
// burst is armed. The caller holds e.mu.
func (e *Engine) commitLocked(ctx context.Context, p *claimPlan) claimOutcome {
	out := claimOutcome{lives: make([]<-chan struct{}, 0, len(p.fresh)+len(p.refreshed)), refused: p.refused}
	for _, cs := range p.fresh {
		if live := e.startLocked(ctx, cs, p, len(p.fresh)); live != nil {
			out.lives = append(out.lives, live)
		}
		out.fresh = append(out.fresh, cs.claim.Addr)
		out.claimed = append(out.claimed, cs.claim.Addr)
	}
	for i, cs := range p.refreshed {
		cs.claim = p.records[i]
		e.syncSendLocked(cs)
		e.armRefreshLocked(cs)
		e.log.Info("refresh", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
		e.publish(Event{Kind: EventRefresh, Addr: cs.claim.Addr, Interface: cs.claim.Interface})
		if cs.live() {
			out.lives = append(out.lives, e.armWithProbe(cs))
		}
		out.claimed = append(out.claimed, cs.claim.Addr)
	}
	return out
}

// startLocked makes a new claim of p, one of n, live, and returns what
// closes once its first round is sent; nil for a claim waiting for its
// interface. The caller holds e.mu.
func (e *Engine) startLocked(ctx context.Context, cs *claimState, p *claimPlan, n int) <-chan struct{} {
	e.claims[cs.claim.Addr] = cs
	e.byAddr = nil
	e.syncSendLocked(cs)
	e.armRefreshLocked(cs)
	mac := ""
	if cs.port != nil {
		mac = cs.port.MAC().String()
	}
	if level := claimLogLevel(n); e.log.Enabled(ctx, level) {
		e.log.Log(ctx, level, "claim", "addr", cs.claim.Addr, "interface", cs.claim.Interface, "mac", mac,
			"window", e.burst(cs).Window, "interval", e.burst(cs).Interval, "frames", e.frames(cs).String(), "adopted", p.adopt)
	}
	kind := EventClaim
	if p.adopt {
		// Taken back, not claimed anew: after a restart (Adopt), a fence
		// or a move that gave up (Resume). Hooks tell one from a change
		// of owner by it.
		kind = EventResume
	}
	e.publish(Event{Kind: kind, Addr: cs.claim.Addr, Interface: cs.claim.Interface, MAC: mac, State: e.stateLocked(cs), Message: p.why})
	if !cs.live() {
		e.probeLocked(cs, FirstProbeDelay) // probes go out once it is live
		e.log.Warn("claim is waiting for its interface", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
		return nil
	}
	return e.armWithProbe(cs)
}

// closeUnusedOp closes the ports this claim opened that no claim uses.
// The caller holds e.op.
func (e *Engine) closeUnusedOp(opened []string) {
	for _, name := range opened {
		if p := e.ports[name]; p != nil && p.refs == 0 {
			_ = p.Close()
			delete(e.ports, name)
		}
	}
}

// portOp returns the open port of an interface, opening it if needed.
// While adopting, an interface that cannot be opened is not an error: the
// claim waits for it (nil port). The caller holds e.op.
func (e *Engine) portOp(name string, adopt bool, opened *[]string) (*portRef, error) {
	if p, ok := e.ports[name]; ok {
		return p, nil
	}
	p, err := e.cfg.Open(name)
	if err != nil {
		if adopt {
			e.log.Warn("interface not available: the adopted claim waits for it", "interface", name, "err", err)
			return nil, nil
		}
		return nil, err
	}
	ref := &portRef{Port: p, up: true}
	e.ports[name] = ref
	*opened = append(*opened, name)
	return ref, nil
}

// window, interval and frames are the claim's burst with the engine's
// defaults filled in: the one place they are (status reports them so).
// A single-round claim has no window.
// burst is the claim's gratuitous burst, its options over the defaults.
func (e *Engine) burst(cs *claimState) Burst {
	o := &cs.claim.Options
	return e.sched.Burst(o.Window, o.Interval, o.SingleRound, e.frames(cs).PerRound(cs.claim.Addr.Is4()))
}

func (e *Engine) frames(cs *claimState) FrameKinds {
	if f := cs.claim.Options.Frames; f != 0 {
		return f
	}
	return e.cfg.Frames
}

// arm opens or extends the claim's window; its port must be up.
func (e *Engine) arm(cs *claimState) <-chan struct{} {
	return e.sched.Arm(cs.key(), e.burst(cs))
}

// armWithProbe arms the claim's window and probes for competing claimers
// shortly after, then every ProbeEvery: a stale owner that sends nothing is
// only found by asking.
func (e *Engine) armWithProbe(cs *claimState) <-chan struct{} {
	live := e.arm(cs)
	e.probeLocked(cs, FirstProbeDelay)
	return live
}

// FirstProbeDelay separates a claim (or a refresh) from its first probe,
// within RFC 5227's PROBE_WAIT of up to 1 s, so that the capture that hears
// the answers is listening on the claim's interface by then.
const FirstProbeDelay = 500 * time.Millisecond

func (e *Engine) probeEvery(cs *claimState) time.Duration {
	switch p := cs.claim.Options.ProbeEvery; {
	case cs.claim.Options.ProbesOff:
		return 0
	case p <= 0:
		return DefaultProbeEvery
	default:
		return p
	}
}

// armRefreshLocked (re)starts the claim's periodic refresh, if it has one.
func (e *Engine) armRefreshLocked(cs *claimState) {
	if cs.refresh != nil {
		cs.refresh.Stop()
		cs.refresh = nil
	}
	every := cs.claim.Options.RefreshEvery
	if every <= 0 {
		return
	}
	addr := cs.claim.Addr
	cs.refresh = e.clock.AfterFunc(every, func() { e.autoRefresh(addr) })
}

// autoRefresh is a periodic refresh. It re-arms the window like Refresh but
// leaves the book alone: recording it would rewrite a state file once per
// claim and period, and an agent that re-adopts claims re-arms them anyway.
func (e *Engine) autoRefresh(addr netip.Addr) {
	e.op.Lock() // it changes the claim, as Refresh does
	defer e.op.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	cs, ok := e.claims[addr]
	if !ok {
		return
	}
	cs.claim.RefreshedAt = e.clock.Now()
	e.armRefreshLocked(cs)
	e.log.Info("refresh", "addr", addr, "interface", cs.claim.Interface, "periodic", true)
	e.publish(Event{Kind: EventRefresh, Addr: addr, Interface: cs.claim.Interface, State: e.stateLocked(cs), Message: "periodic"})
	if cs.live() {
		e.armWithProbe(cs)
	}
}

// Refresh re-opens the gratuitous window of each held address from now. It
// returns the refreshed addresses and those not held, which it leaves alone.
func (e *Engine) Refresh(ctx context.Context, addrs []netip.Addr) (refreshed, notHeld []netip.Addr, err error) {
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	now := e.clock.Now()
	var records []Claim
	var states []*claimState
	for _, a := range addrs {
		cs, ok := e.claims[a]
		if !ok {
			notHeld = append(notHeld, a)
			continue
		}
		c := cs.claim
		c.RefreshedAt = now
		records = append(records, c)
		states = append(states, cs)
	}
	e.mu.Unlock()
	if len(records) == 0 {
		return nil, notHeld, nil
	}
	if err := e.cfg.Book.Put(ctx, records...); err != nil {
		return nil, notHeld, fmt.Errorf("record the refresh: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, cs := range states {
		cs.claim = records[i]
		e.syncSendLocked(cs)
		e.armRefreshLocked(cs)
		e.log.Info("refresh", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
		e.publish(Event{Kind: EventRefresh, Addr: cs.claim.Addr, Interface: cs.claim.Interface, State: e.stateLocked(cs)})
		if cs.live() {
			e.armWithProbe(cs)
		}
		refreshed = append(refreshed, cs.claim.Addr)
	}
	return refreshed, notHeld, nil
}
