package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/sync/errgroup"

	"github.com/vipctl/vip/internal/store"
)

// Mover is the side of a move that asks for it: it plans the move against
// the fleet, writes the move records and follows each move to its end. The
// owner lets go (Member.leave) and the target takes the address
// (Member.arrive); the three meet only in the store, each through its
// Ledger, so that the whole protocol is one package's.
type Mover struct {
	l     moverLedger
	clock clockwork.Clock
	// phase, when set, is told as each step of Move ends (MovePhase).
	phase func(MovePhase)
}

// MovePhase names a step of Mover.Move, for a caller that times them
// (vipbench's table of where a move's time goes).
type MovePhase string

// The steps of a move, in their order. A step is told when it ends.
const (
	PhaseRead    MovePhase = "read"    // what the move needs read from the store
	PhasePlanned MovePhase = "planned" // the move planned
	PhaseLeased  MovePhase = "leased"  // the mover's lease granted, its watch made
	PhaseAsked   MovePhase = "asked"   // the move records written
	PhaseEnded   MovePhase = "ended"   // every move live, failed or given up
	PhaseRevoked MovePhase = "revoked" // the mover's lease revoked: Move returns
)

// OnPhase has f told as each step of Move ends, in the caller's goroutine;
// set it before the first Move.
func (mv *Mover) OnPhase(f func(MovePhase)) { mv.phase = f }

func (mv *Mover) told(p MovePhase) {
	if mv.phase != nil {
		mv.phase(p)
	}
}

// moverLedger is what a Mover needs of the store: a lease for its
// records, the moves, the fleet to plan on.
type moverLedger interface {
	LeaseLedger
	MoveLedger
	Fleet(ctx context.Context) (store.View, error)
	Nodes(ctx context.Context) ([]store.Node, int64, error)
	Close()
}

// NewMover returns a Mover over the store of c, for a command that moves
// addresses without an agent of its own (vip move). Close it after use;
// c stays the caller's.
func NewMover(c *store.Client) *Mover {
	return &Mover{l: store.NewLedger(c, slog.New(slog.DiscardHandler)), clock: clockwork.NewRealClock()}
}

// Close ends what the mover keeps open.
func (mv *Mover) Close() { mv.l.Close() }

// moveConcurrency bounds the transactions of a move in flight at once.
const moveConcurrency = 16

// moverLeaseSlack is how much longer than its own timeout a mover's records
// live: a mover that dies leaves none blocking the standbys for good.
const moverLeaseSlack = 10 * time.Second

// pendingMove is one address's move, as the mover follows it.
type pendingMove struct {
	res    store.MoveResult
	opts   json.RawMessage
	window time.Duration
	// claimRev is the creation revision of the claim the move was
	// planned on (0: none), which asking compares.
	claimRev int64
	// cordonRev is the modification revision of the target's cordon the
	// move was planned on (0: none), which asking compares too.
	cordonRev int64
	// home is the home the target records (Move.Home).
	home string
	// group is the address's group: a group's moves are asked in one
	// transaction.
	group string
	// takeOver and actor are the request's, for the history.
	takeOver      bool
	actor         store.Actor
	ownerReleased bool
	claimGone     bool
	end           bool
}

// Move moves addresses as req says and returns once each is live on the
// target, failed, or the timeout passed. Nothing changes when the request
// is refused (a node not alive, no interface for an address, a move under
// way): the error says why, wrapping store.ErrRefused.
func (mv *Mover) Move(ctx context.Context, req store.MoveRequest) (_ []store.MoveResult, err error) {
	req, v, err := mv.view(ctx, req)
	if err != nil {
		return nil, err
	}
	mv.told(PhaseRead)
	if _, ok := v.NodeByName(req.To); !ok {
		// Refused, unless the target came alive since: every live
		// node, for the error to list.
		if v.Nodes, _, err = mv.l.Nodes(ctx); err != nil {
			return nil, err
		}
	}
	moves, err := planMoves(v, req, mv.clock.Now())
	if err != nil {
		return nil, err
	}
	mv.told(PhasePlanned)
	var pending []*pendingMove
	var results []store.MoveResult
	for _, m := range moves {
		if m.res.Already {
			results = append(results, m.res)
		} else {
			pending = append(pending, m)
		}
	}
	if len(pending) == 0 {
		return results, nil
	}
	timeout := req.Timeout
	if timeout <= 0 {
		ttl := time.Duration(0)
		for _, n := range v.Nodes {
			ttl = max(ttl, time.Duration(n.LeaseTTL))
		}
		timeout = store.MoveTimeout(ttl) + req.TrafficWindow
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := mv.clock.AfterFunc(timeout, cancel)
	defer timer.Stop()
	// The move records live under a lease of the mover's own. The watch
	// that follows the moves is made meanwhile: it is in place before
	// they are asked, and sees each whole (the plan's revision is not
	// needed: a change between it and the ask fails the ask's compares).
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var (
		watch    <-chan []MoveChange
		watchErr error
		watched  = make(chan struct{})
	)
	go func() {
		defer close(watched)
		watch, watchErr = mv.l.WatchMoves(wctx)
	}()
	lease, err := mv.l.Grant(ctx, timeout+moverLeaseSlack)
	<-watched
	if err == nil && watchErr != nil {
		_ = mv.revoke(lease)
		err = watchErr
	}
	if err != nil {
		return nil, err
	}
	mv.told(PhaseLeased)
	defer func() {
		_ = mv.revoke(lease)
		mv.told(PhaseRevoked)
	}()
	if err := mv.ask(ctx, pending, lease); err != nil {
		return nil, err
	}
	mv.told(PhaseAsked)
	mv.follow(ctx, pending, watch)
	mv.giveUpRest(ctx, pending)
	mv.told(PhaseEnded)
	for _, m := range pending {
		results = append(results, m.res)
	}
	slices.SortFunc(results, func(x, y store.MoveResult) int { return x.Addr.Compare(y.Addr) })
	return results, nil
}

// revoke ends the mover's lease, and the records under it, with a time of
// its own: the move's may be over.
func (mv *Mover) revoke(lease LeaseID) error {
	rctx, cancel := context.WithTimeout(context.Background(), store.DefaultTimeout)
	defer cancel()
	return mv.l.Revoke(rctx, lease)
}

// follow applies the changes the watch sends to the moves until each has
// ended or ctx is done.
func (mv *Mover) follow(ctx context.Context, pending []*pendingMove, watch <-chan []MoveChange) {
	byAddr := make(map[netip.Addr]*pendingMove, len(pending))
	for _, m := range pending {
		byAddr[m.res.Addr] = m
	}
	for open := len(pending); open > 0; {
		select {
		case <-ctx.Done():
			return
		case chs, ok := <-watch:
			if !ok {
				watch = nil // ctx is done: the case above ends the wait
				continue
			}
			for _, ch := range chs {
				m := byAddr[ch.Addr]
				if m == nil || m.end {
					continue
				}
				if m.step(ch, mv.clock.Now()) {
					open--
				}
			}
		}
	}
}

// step applies one change of the store to the move, seen at now; it
// reports when the move ended.
func (m *pendingMove) step(ch MoveChange, now time.Time) bool {
	switch ch.Kind {
	case ClaimDeleted:
		// The claim's deletion and the move record come on two watches,
		// so the deletion can come after the target's live: the time the
		// key was seen gone is then the live one, already set.
		if !m.claimGone {
			m.claimGone = true
			if m.res.Released.IsZero() {
				m.res.Released = now
			}
		}
		return false
	case MoveDeleted:
		if m.res.Live.IsZero() && m.res.Error == "" {
			m.res.Error = fmt.Sprintf("the move of %s ended before %s was live on %s", m.res.Addr, m.res.Addr, m.res.To)
		}
		m.end = true
		return true
	}
	rec := ch.Move
	if !rec.Released.IsZero() {
		// The owner's own time, which the history's record of the
		// move has too, rather than when this watch heard of it.
		m.ownerReleased, m.res.Released = true, rec.Released
	}
	if !rec.Taken.IsZero() {
		m.res.Taken = rec.Taken
	}
	switch {
	case rec.Error != "":
		m.res.Error = rec.Error
	case !rec.Live.IsZero():
		if m.res.Live.IsZero() {
			m.res.Live = rec.Live
			if m.res.Released.IsZero() {
				m.res.Released = now
			}
			m.res.Waited = m.res.From != "" && !m.ownerReleased
		}
		if rec.Traffic != nil {
			m.res.Traffic = rec.Traffic
		} else if m.window > 0 {
			// Live: the traffic comes once the window is over.
			return false
		}
	default:
		return false
	}
	m.end = true
	return true
}

// ask writes the move records, each only if no move of its address is
// under way and its owner is still the one planned for. Any refusal gives
// up the whole move (the records written go with the lease).
func (mv *Mover) ask(ctx context.Context, pending []*pendingMove, lease LeaseID) error {
	var (
		mu   sync.Mutex
		errs []error
		g    errgroup.Group
	)
	g.SetLimit(moveConcurrency)
	for _, batch := range groupBatches(pending, func(m *pendingMove) string { return m.group }) {
		g.Go(func() error {
			asks := make([]Asking, len(batch))
			for i, m := range batch {
				asks[i] = Asking{Move: store.Move{
					Addr: m.res.Addr, To: m.res.To, Interface: m.res.Interface, From: m.res.From,
					ID: strconv.FormatInt(int64(lease), 16), Asked: mv.clock.Now().UTC(), Options: m.opts,
					TrafficWindow: store.Duration(m.window), Home: m.home,
					TakeOver: m.takeOver, Actor: m.actor,
				}, ClaimRev: m.claimRev, CordonRev: m.cordonRev}
				m.res.Asked = mv.clock.Now()
			}
			asked, err := mv.l.Ask(ctx, lease, asks)
			if err == nil && !asked {
				what := batch[0].res.Addr.String()
				if batch[0].group != "" {
					what = "group " + batch[0].group
				}
				err = fmt.Errorf("%s changed while the move was asked (another move, a release, a claim, or a cordon of %s): run vip move again", what, batch[0].res.To)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	if len(errs) > 0 {
		giveUp(pending)
		return errors.Join(errs...)
	}
	return nil
}

// giveUpRest gives up the moves still under way once the timeout passed.
// Whether each owner still holds its address is read from the store, not
// taken from the watch alone: its news of a release may be on its way (a
// loaded host), and the error tells the operator whether the address
// rests with its owner or waits for the target; one the target holds
// already is live.
func (mv *Mover) giveUpRest(ctx context.Context, pending []*pendingMove) {
	var unsure []netip.Addr
	for _, m := range pending {
		if !m.end && !m.claimGone && m.res.From != "" {
			unsure = append(unsure, m.res.Addr)
		}
	}
	if len(unsure) > 0 {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), store.DefaultTimeout)
		v, err := mv.l.MoveView(rctx, unsure, "")
		cancel()
		if err == nil {
			holder := make(map[netip.Addr]string, len(v.Claims))
			for _, c := range v.Claims {
				holder[c.Claim.Addr] = c.Claim.Node
			}
			now := mv.clock.Now()
			for _, m := range pending {
				if m.end || m.claimGone || m.res.From == "" {
					continue
				}
				switch holder[m.res.Addr] {
				case m.res.From:
				case m.res.To:
					// Live on the target; the watch had not said so.
					m.claimGone, m.end, m.res.Live = true, true, now
					if m.res.Released.IsZero() {
						m.res.Released = now
					}
				default:
					m.claimGone = true
				}
			}
		}
	}
	giveUp(pending)
}

// giveUp marks the moves still under way failed. Their records go with the
// mover's lease, which Move revokes as it returns.
func giveUp(pending []*pendingMove) {
	for _, m := range pending {
		if m.end {
			continue
		}
		m.end = true
		if m.res.Error == "" {
			m.res.Error = fmt.Sprintf("%s was not live on %s in time", m.res.Addr, m.res.To)
			if m.claimGone {
				m.res.Error += fmt.Sprintf(", and %s no longer holds it: %s takes it once it reaches the store, if it is alive; else nobody holds it until it is claimed", m.res.From, m.res.To)
			}
		}
	}
}
