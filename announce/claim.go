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
// added, one the book refuses) is refused, what was done for it undone, and
// the others are claimed all the same; the error is then a *RefusedError
// that names each refusal. Errors of the whole request (an address given
// twice, a book that cannot be written at all) claim nothing.
func (e *Engine) Claim(ctx context.Context, reqs []Request, opts ClaimOptions) ([]Status, error) {
	now := e.clock.Now()
	items := make([]Claim, len(reqs))
	for i, r := range reqs {
		items[i] = Claim{Addr: r.Addr, Interface: r.Interface, ClaimedAt: now, RefreshedAt: now, Options: opts}
	}
	return e.take(ctx, items, false)
}

// Adopt takes over claims recorded by an earlier run (after a crash): each
// keeps its options, its ClaimedAt and whether vip added its address, and
// gets a fresh burst. A claim whose interface is gone waits for it.
func (e *Engine) Adopt(ctx context.Context, claims []Claim) ([]Status, error) {
	now := e.clock.Now()
	items := slices.Clone(claims)
	for i := range items {
		items[i].RefreshedAt = now
	}
	return e.take(ctx, items, true)
}

func (e *Engine) take(ctx context.Context, items []Claim, adopt bool) ([]Status, error) {
	lives, claimed, fresh, refused, err := e.claim(ctx, items, adopt)
	if err != nil {
		return nil, err
	}
	for _, live := range lives {
		select {
		case <-live:
		case <-ctx.Done():
			// The new claims of an interrupted request are undone
			// (refreshes of held ones stand).
			if _, _, rerr := e.Release(context.WithoutCancel(ctx), fresh); rerr != nil {
				return nil, fmt.Errorf("interrupted before the first gratuitous round, and undoing the claims failed: %w", errors.Join(ctx.Err(), rerr))
			}
			return nil, fmt.Errorf("interrupted before the first gratuitous round, so nothing new is held: %w", ctx.Err())
		}
	}
	var st []Status
	if len(claimed) > 0 {
		st = e.Status(claimed...)
	}
	if len(refused) > 0 {
		slices.SortFunc(refused, func(x, y Refusal) int { return x.Addr.Compare(y.Addr) })
		return st, &RefusedError{Refused: refused}
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

func (e *Engine) claim(ctx context.Context, items []Claim, adopt bool) (lives []<-chan struct{}, claimed, freshAddrs []netip.Addr, refused []Refusal, err error) {
	e.op.Lock()
	defer e.op.Unlock()
	refuse := func(a netip.Addr, err error) { refused = append(refused, Refusal{Addr: a, Err: err}) }

	// Plan, under mu: which requests are new claims, which refresh held
	// ones, and which cannot be.
	var (
		refreshed    []*claimState
		refreshedOpt []ClaimOptions
		news         []Claim
	)
	e.mu.Lock()
	seen := make(map[netip.Addr]bool, len(items))
	for _, c := range items {
		if seen[c.Addr] {
			e.mu.Unlock()
			return nil, nil, nil, nil, fmt.Errorf("claim %s: address given twice", c.Addr)
		}
		seen[c.Addr] = true
		if c.Options.Assign && e.cfg.Assigner == nil {
			e.mu.Unlock()
			return nil, nil, nil, nil, fmt.Errorf("claim %s with assign: %w", c.Addr, ErrNoAssigner)
		}
		cs, ok := e.claims[c.Addr]
		switch {
		case ok && cs.claim.Interface != c.Interface:
			refuse(c.Addr, fmt.Errorf("claim %s on %s: %w (%s); release it first", c.Addr, c.Interface, ErrHeldElsewhere, cs.claim.Interface))
		case ok:
			refreshed = append(refreshed, cs)
			refreshedOpt = append(refreshedOpt, c.Options)
		default:
			news = append(news, c)
		}
	}
	now := e.clock.Now()
	records := make([]Claim, 0, len(items))
	for i, cs := range refreshed {
		c := cs.claim
		c.RefreshedAt = now
		if !adopt {
			// A re-claim takes the new burst options; whether the
			// address is assigned stays as it was.
			c.Options = refreshedOpt[i]
			c.Options.Assign = cs.claim.Options.Assign
		}
		records = append(records, c)
	}
	e.mu.Unlock()

	// The I/O, under op alone: status and the sender go on meanwhile. An
	// address that cannot be claimed is refused and its steps undone; the
	// others go on.
	var (
		opened  []string
		openErr = map[string]error{}
		fresh   []*claimState
		added   = map[*claimState]bool{} // vip added the address for this claim
	)
	undo := func(cs *claimState) {
		if cs.port != nil && cs.answering {
			_ = cs.port.Drop(cs.claim.Addr)
			cs.answering = false
		}
		if added[cs] {
			_ = e.cfg.Assigner.Remove(cs.claim.Interface, cs.claim.Addr)
		}
	}
	byPort := map[*portRef][]*claimState{}
	for _, c := range news {
		if err := openErr[c.Interface]; err != nil {
			refuse(c.Addr, fmt.Errorf("claim %s on %s: %w", c.Addr, c.Interface, err))
			continue
		}
		p, err := e.portOp(c.Interface, adopt, &opened)
		if err != nil {
			openErr[c.Interface] = err
			refuse(c.Addr, fmt.Errorf("claim %s on %s: %w", c.Addr, c.Interface, err))
			continue
		}
		var ok bool
		if c.Options.Assign && p != nil {
			ok, err = e.cfg.Assigner.Add(c.Interface, c.Addr)
			if err != nil {
				refuse(c.Addr, fmt.Errorf("claim %s on %s: add the address: %w", c.Addr, c.Interface, err))
				continue
			}
			if !ok && !c.AddedAddress {
				e.log.Info("address was already on the interface: vip will leave it there at release", "addr", c.Addr, "interface", c.Interface)
			}
			c.AddedAddress = c.AddedAddress || ok
		}
		cs := newClaimState(c, p)
		added[cs] = ok
		if p != nil {
			byPort[p] = append(byPort[p], cs)
		} else {
			fresh = append(fresh, cs)
		}
	}
	for p, css := range byPort {
		if err := e.holdOp(p, css); err != nil {
			for _, cs := range css {
				undo(cs)
				refuse(cs.claim.Addr, fmt.Errorf("claim %s on %s: %w", cs.claim.Addr, p.Name(), err))
			}
			continue
		}
		p.refs += len(css)
		fresh = append(fresh, css...)
	}
	slices.SortFunc(fresh, func(x, y *claimState) int { return x.claim.Addr.Compare(y.claim.Addr) })
	for _, cs := range fresh {
		records = append(records, cs.claim)
	}
	if len(records) > 0 {
		err := e.cfg.Book.Put(ctx, records...)
		var some *RefusedError
		switch {
		case errors.As(err, &some):
			// The book refused these, and recorded the others.
			no := some.byAddr()
			refreshed, records = keepRefreshed(refreshed, records, no)
			kept := fresh[:0]
			for _, cs := range fresh {
				if why, ok := no[cs.claim.Addr]; ok {
					e.dropFreshOp(cs, undo)
					refuse(cs.claim.Addr, why)
				} else {
					kept = append(kept, cs)
				}
			}
			fresh = kept
			for a, why := range no {
				if !slices.ContainsFunc(refused, func(r Refusal) bool { return r.Addr == a }) {
					refuse(a, why)
				}
			}
		case err != nil:
			for _, cs := range fresh {
				e.dropFreshOp(cs, undo)
			}
			e.closeUnusedOp(opened)
			return nil, nil, nil, nil, fmt.Errorf("record the claims: %w", err)
		}
	}
	e.closeUnusedOp(opened)
	if len(fresh) > maxClaimLogLines {
		// One line for a large request, not one per address (each
		// claim's own line goes to the debug level).
		first, last := fresh[0].claim, fresh[len(fresh)-1].claim
		var ifaces []string
		for _, cs := range fresh {
			if !slices.Contains(ifaces, cs.claim.Interface) {
				ifaces = append(ifaces, cs.claim.Interface)
			}
		}
		e.log.Info("claim", "addresses", len(fresh), "first", first.Addr, "last", last.Addr, "interface", strings.Join(ifaces, ","),
			"window", e.window(fresh[0]), "interval", e.interval(fresh[0]), "frames", e.frames(fresh[0]).String(), "adopted", adopt)
	}
	for _, r := range refused {
		e.log.Warn("claim refused", "addr", r.Addr, "err", r.Err)
	}

	// Commit, under mu: the claims are live from here.
	e.mu.Lock()
	lives = make([]<-chan struct{}, 0, len(items))
	for _, cs := range fresh {
		e.claims[cs.claim.Addr] = cs
		e.byAddr = nil
		e.syncSendLocked(cs)
		e.armRefreshLocked(cs)
		mac := ""
		if cs.port != nil {
			mac = cs.port.MAC().String()
		}
		msg := "claimed"
		if adopt {
			msg = "adopted from an earlier run"
		}
		if level := claimLogLevel(len(fresh)); e.log.Enabled(ctx, level) {
			e.log.Log(ctx, level, "claim", "addr", cs.claim.Addr, "interface", cs.claim.Interface, "mac", mac,
				"window", e.window(cs), "interval", e.interval(cs), "frames", e.frames(cs).String(), "adopted", adopt)
		}
		e.publish(Event{Kind: EventClaim, Addr: cs.claim.Addr, Interface: cs.claim.Interface, MAC: mac, State: e.stateLocked(cs), Message: msg})
		if cs.live() {
			lives = append(lives, e.armWithProbe(cs))
		} else {
			e.probeLocked(cs, FirstProbeDelay) // probes go out once it is live
			e.log.Warn("claim is waiting for its interface", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
		}
		freshAddrs = append(freshAddrs, cs.claim.Addr)
		claimed = append(claimed, cs.claim.Addr)
	}
	for i, cs := range refreshed {
		cs.claim = records[i]
		e.syncSendLocked(cs)
		e.armRefreshLocked(cs)
		e.log.Info("refresh", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
		e.publish(Event{Kind: EventRefresh, Addr: cs.claim.Addr, Interface: cs.claim.Interface})
		if cs.live() {
			lives = append(lives, e.armWithProbe(cs))
		}
		claimed = append(claimed, cs.claim.Addr)
	}
	e.mu.Unlock()
	for _, name := range opened {
		e.attachWaitingOp(name)
	}
	return lives, claimed, freshAddrs, refused, nil
}

// keepRefreshed drops from refreshed, and from the records that start with
// theirs, the claims the book refused: they stay as they were.
func keepRefreshed(refreshed []*claimState, records []Claim, no map[netip.Addr]error) ([]*claimState, []Claim) {
	var keptCS []*claimState
	var keptRec []Claim
	for i, cs := range refreshed {
		if _, ok := no[cs.claim.Addr]; !ok {
			keptCS = append(keptCS, cs)
			keptRec = append(keptRec, records[i])
		}
	}
	return keptCS, append(keptRec, records[len(refreshed):]...)
}

// dropFreshOp undoes a new claim that will not be made: what undo undoes,
// and its port reference. The caller holds e.op.
func (e *Engine) dropFreshOp(cs *claimState, undo func(*claimState)) {
	undo(cs)
	if cs.port != nil {
		cs.port.refs--
	}
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
func (e *Engine) window(cs *claimState) time.Duration {
	if cs.claim.Options.SingleRound {
		return 0
	}
	if w := cs.claim.Options.Window; w > 0 {
		return w
	}
	return e.cfg.Burst.Window
}

func (e *Engine) interval(cs *claimState) time.Duration {
	if i := cs.claim.Options.Interval; i > 0 {
		return i
	}
	return e.cfg.Burst.Interval
}

func (e *Engine) frames(cs *claimState) FrameKinds {
	if f := cs.claim.Options.Frames; f != 0 {
		return f
	}
	return e.cfg.Frames
}

// arm opens or extends the claim's window; its port must be up.
func (e *Engine) arm(cs *claimState) <-chan struct{} {
	return e.sched.Arm(cs.key(), Burst{
		Window:      e.window(cs),
		Interval:    e.interval(cs),
		SingleRound: cs.claim.Options.SingleRound,
		Cost:        e.frames(cs).PerRound(cs.claim.Addr.Is4()),
	})
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
