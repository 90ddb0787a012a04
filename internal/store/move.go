package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// MoveRequest asks for addresses to move to a node.
type MoveRequest struct {
	// Addrs are the addresses to move; with All, every address From holds.
	Addrs []netip.Addr
	All   bool
	From  string
	To    string
	// Interface is the target's interface; empty picks the one whose
	// prefix holds each address, else the one the owner uses.
	Interface string
	// Timeout bounds the whole move; zero waits as long as the owners'
	// leases make necessary (MoveTimeout).
	Timeout time.Duration
	// Options, when set, are the claim options the target claims with;
	// otherwise it takes the owner's.
	Options json.RawMessage
	// TrafficWindow, when set, has the target count the traffic arriving
	// for each address over that long once it is live, and Move wait for
	// it: the proof that traffic follows the move.
	TrafficWindow time.Duration
}

// MoveResult is how one address's move went, in the mover's own clock
// (so that no two hosts' clocks are compared).
type MoveResult struct {
	Addr      netip.Addr `json:"addr"`
	From      string     `json:"from,omitempty"`
	To        string     `json:"to"`
	Interface string     `json:"interface"`
	Asked     time.Time  `json:"asked"`
	// Released is when the old owner's key was gone: deleted by it after
	// it stopped answering, or expired with its lease (Waited).
	Released time.Time `json:"released,omitzero"`
	Live     time.Time `json:"live,omitzero"`
	// Waited says the old owner did not answer, so the move waited for
	// its lease to expire.
	Waited bool `json:"waited,omitempty"`
	// Traffic is what arrived at the target in the window after it was
	// live, when the move asked for it.
	Traffic *Traffic `json:"traffic,omitempty"`
	// Unheld says nobody held the address: the move was a claim on To.
	Unheld bool `json:"unheld,omitempty"`
	// Already says To held it already: nothing changed.
	Already bool   `json:"already,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Done reports whether the address is live on the target.
func (r MoveResult) Done() bool { return r.Error == "" && (r.Already || !r.Live.IsZero()) }

// MoveTimeout is how long a move waits by default: an owner that does not
// answer is waited for until its lease expires, twice over, plus time to
// claim.
func MoveTimeout(ttl time.Duration) time.Duration { return 2*ttl + 10*time.Second }

// ErrRefused marks a move refused before anything changed.
var ErrRefused = errors.New("move refused")

// moveConcurrency bounds the transactions of a move in flight at once.
const moveConcurrency = 16

type pendingMove struct {
	res    MoveResult
	opts   json.RawMessage
	window time.Duration
	// clock is the mover's clock; nil is time.Now.
	clock          func() time.Time
	key, claimKey  string
	createRev      int64
	ownerReleased  bool
	claimGone, end bool
}

// Move moves addresses as req says and returns once each is live on the
// target, failed, or the timeout passed. Nothing changes when the request
// is refused (a node not alive, no interface for an address, a move under
// way): the error says why, wrapping ErrRefused.
func (c *Client) Move(ctx context.Context, req MoveRequest) ([]MoveResult, error) {
	var v View
	var err error
	if req.All {
		v, err = c.Fleet(ctx)
	} else {
		v, err = c.fleetFor(ctx, req.Addrs)
	}
	if err != nil {
		return nil, err
	}
	moves, err := planMoves(v, req)
	if err != nil {
		return nil, err
	}
	var pending []*pendingMove
	var results []MoveResult
	ttl := time.Duration(0)
	for _, n := range v.Nodes {
		ttl = max(ttl, time.Duration(n.LeaseTTL))
	}
	for _, m := range moves {
		if m.res.Already {
			results = append(results, m.res)
			continue
		}
		pending = append(pending, m)
	}
	if len(pending) == 0 {
		return results, nil
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = MoveTimeout(ttl) + req.TrafficWindow
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The move records live as long as this mover does, and a little
	// longer, so that a mover that dies leaves none blocking the
	// standbys for good.
	lctx, lcancel := c.ctx(ctx)
	lease, err := c.Grant(lctx, int64((timeout+10*time.Second)/time.Second))
	lcancel()
	if err != nil {
		return nil, c.Explain(err)
	}
	defer func() {
		rctx, cancel := c.ctx(context.Background())
		defer cancel()
		_, _ = c.Revoke(rctx, lease.ID)
	}()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := c.WatchMoves(wctx, v.Revision)
	if err := c.ask(ctx, pending, lease.ID); err != nil {
		return nil, err
	}
	byKey := map[string]*pendingMove{}
	for _, m := range pending {
		byKey[m.key], byKey[m.claimKey] = m, m
	}
	open := len(pending)
	for open > 0 {
		select {
		case <-ctx.Done():
			c.abandon(pending)
			open = 0
		case evs, ok := <-watch:
			if !ok {
				watch = nil // ctx is done: the case above ends the wait
				continue
			}
			for _, ev := range evs {
				m := byKey[string(ev.Kv.Key)]
				if m == nil || m.end {
					continue
				}
				if m.step(ev, c.Keys) {
					open--
				}
			}
		}
	}
	for _, m := range pending {
		results = append(results, m.res)
	}
	slices.SortFunc(results, func(x, y MoveResult) int { return x.Addr.Compare(y.Addr) })
	return results, nil
}

// step applies one watch event to the move; it reports when the move ended.
func (m *pendingMove) step(ev *clientv3.Event, k Keys) bool {
	now := time.Now()
	if m.clock != nil {
		now = m.clock()
	}
	key := string(ev.Kv.Key)
	if key == m.claimKey {
		// The claim's deletion and the move record come on two watches,
		// so the deletion can come after the target's live: the time the
		// key was seen gone is then the live one, already set.
		if ev.Type == clientv3.EventTypeDelete && !m.claimGone {
			m.claimGone = true
			if m.res.Released.IsZero() {
				m.res.Released = now
			}
		}
		return false
	}
	if ev.Type == clientv3.EventTypeDelete {
		if m.res.Live.IsZero() && m.res.Error == "" {
			m.res.Error = fmt.Sprintf("the move of %s ended before %s was live on %s", m.res.Addr, m.res.Addr, m.res.To)
		}
		m.end = true
		return true
	}
	rec, err := decode[Move](key, ev.Kv.Value)
	if err != nil {
		return false
	}
	if !rec.Released.IsZero() {
		m.ownerReleased = true
	}
	switch {
	case rec.Error != "":
		m.res.Error = rec.Error
	case !rec.Live.IsZero():
		if m.res.Live.IsZero() {
			m.res.Live = now
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
// under way and its owner is still the one planned for.
func (c *Client) ask(ctx context.Context, pending []*pendingMove, lease clientv3.LeaseID) error {
	var (
		mu   sync.Mutex
		errs []error
		g    errgroup.Group
	)
	g.SetLimit(moveConcurrency)
	for _, m := range pending {
		g.Go(func() error {
			rec := Move{
				Addr: m.res.Addr, To: m.res.To, Interface: m.res.Interface, From: m.res.From,
				ID: strconv.FormatInt(int64(lease), 16), Asked: time.Now().UTC(), Options: m.opts,
				TrafficWindow: Duration(m.window),
			}
			val, err := encode(rec)
			if err == nil {
				m.res.Asked = time.Now()
				var resp *clientv3.TxnResponse
				rctx, cancel := c.ctx(ctx)
				resp, err = c.Txn(rctx).If(
					clientv3.Compare(clientv3.CreateRevision(m.key), "=", 0),
					clientv3.Compare(clientv3.CreateRevision(m.claimKey), "=", m.createRev),
				).Then(m.askOps(c.Keys, val, lease)...).Commit()
				cancel()
				switch {
				case err != nil:
					err = c.Explain(err)
				case !resp.Succeeded:
					err = fmt.Errorf("%s changed while the move was asked (another move, a release or a claim): run vip move again", m.res.Addr)
				}
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
		c.abandon(pending)
		return errors.Join(errs...)
	}
	return nil
}

// askOps writes the move record, and tells the target and the owner in
// their inboxes; all go with the mover's lease.
func (m *pendingMove) askOps(k Keys, val string, lease clientv3.LeaseID) []clientv3.Op {
	ops := []clientv3.Op{
		clientv3.OpPut(m.key, val, clientv3.WithLease(lease)),
		clientv3.OpPut(k.Inbox(m.res.To, m.res.Addr), "", clientv3.WithLease(lease)),
	}
	if m.res.From != "" {
		ops = append(ops, clientv3.OpPut(k.Inbox(m.res.From, m.res.Addr), "", clientv3.WithLease(lease)))
	}
	return ops
}

// abandon marks the moves still under way failed. Their records go with
// the mover's lease, which Move revokes as it returns.
func (c *Client) abandon(pending []*pendingMove) {
	for _, m := range pending {
		if m.end {
			continue
		}
		m.end = true
		if m.res.Error == "" {
			m.res.Error = fmt.Sprintf("%s was not live on %s in time", m.res.Addr, m.res.To)
			if m.claimGone {
				m.res.Error += fmt.Sprintf(", and %s no longer holds it: nobody holds it until it is claimed", m.res.From)
			}
		}
	}
}

// planMoves checks the request against the fleet and picks each target
// interface. It changes nothing; any refusal refuses the whole move.
func planMoves(v View, req MoveRequest) ([]*pendingMove, error) {
	to, ok := v.NodeByName(req.To)
	if !ok {
		names := make([]string, len(v.Nodes))
		for i, n := range v.Nodes {
			names[i] = n.Node
		}
		live := "none"
		if len(names) > 0 {
			live = strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("%w: node %s is not alive in the store (live nodes: %s)", ErrRefused, req.To, live)
	}
	addrs := req.Addrs
	if req.All {
		if _, ok := v.NodeByName(req.From); !ok && !slices.ContainsFunc(v.Claims, func(cv ClaimView) bool { return cv.Claim.Node == req.From }) {
			return nil, fmt.Errorf("%w: node %s is not alive and holds nothing in the store", ErrRefused, req.From)
		}
		addrs = nil
		for _, cv := range v.Claims {
			if cv.Claim.Node == req.From {
				addrs = append(addrs, cv.Claim.Addr)
			}
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%w: node %s holds no address", ErrRefused, req.From)
		}
	}
	var out []*pendingMove
	var errs []error
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		m := &pendingMove{res: MoveResult{Addr: a, To: req.To}}
		m.key, m.claimKey = v.keys().Move(a), v.keys().Claim(a)
		m.opts, m.window = req.Options, req.TrafficWindow
		if ifname, own := to.OwnAddress(a); own {
			errs = append(errs, fmt.Errorf("%s is node %s's own address on %s, which its kernel answers for: a VIP cannot move there", a, req.To, ifname))
			continue
		}
		cur, held := v.ClaimOf(a)
		if from, ok := v.NodeByName(cur.Claim.Node); held && ok {
			if ifname, own := from.OwnAddress(a); own {
				errs = append(errs, fmt.Errorf("%s is node %s's own address on %s, which its kernel answers for: it is not vip's to hand over", a, from.Node, ifname))
				continue
			}
		}
		if held {
			m.res.From = cur.Claim.Node
			m.createRev = cur.createRev
			if m.opts == nil {
				m.opts = cur.Claim.Options
			}
			if cur.Move != nil {
				errs = append(errs, fmt.Errorf("a move of %s to %s is already under way (asked at %s)", a, cur.Move.To, cur.Move.Asked.Format(time.RFC3339)))
				continue
			}
			if req.From != "" && cur.Claim.Node != req.From {
				errs = append(errs, fmt.Errorf("%s is held by %s, not %s", a, cur.Claim.Node, req.From))
				continue
			}
		} else {
			m.res.Unheld = true
		}
		ifname, err := pickInterface(to, a, req.Interface, cur.Claim.Interface)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.res.Interface = ifname
		if held && cur.Claim.Node == req.To && cur.Claim.Interface == ifname {
			m.res.Already = true
		}
		out = append(out, m)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrRefused, errors.Join(errs...))
	}
	return out, nil
}

// pickInterface chooses the target's interface for a: the one asked for,
// else the one whose prefix holds a, else the owner's interface by name.
func pickInterface(to Node, a netip.Addr, asked, owners string) (string, error) {
	names := make([]string, len(to.Interfaces))
	for i, ifc := range to.Interfaces {
		names[i] = ifc.Name
	}
	if asked != "" {
		if slices.Contains(names, asked) {
			return asked, nil
		}
		return "", fmt.Errorf("node %s has no interface %s (it has %s)", to.Node, asked, strings.Join(names, ", "))
	}
	for _, ifc := range to.Interfaces {
		for _, p := range ifc.Prefixes {
			if p.Masked().Contains(a) {
				return ifc.Name, nil
			}
		}
	}
	if owners != "" && slices.Contains(names, owners) {
		return owners, nil
	}
	return "", fmt.Errorf("node %s has no interface on a subnet of %s: name one with -i (it has %s)", to.Node, a, strings.Join(names, ", "))
}
