package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/store"
)

// splitGroups parts items into those on their own and those of groups,
// one slice per group.
func splitGroups(items []announce.Claim) (alone []announce.Claim, groups [][]announce.Claim) {
	at := map[string]int{}
	for _, c := range items {
		g := c.Options.Group
		if g == "" {
			alone = append(alone, c)
			continue
		}
		i, ok := at[g]
		if !ok {
			i = len(groups)
			at[g] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return alone, groups
}

// acquireGroup acquires the claims of one group in one transaction.
func (m *Member) acquireGroup(ctx context.Context, grp []announce.Claim, macs map[string]string, lease LeaseID) ([]bool, error) {
	recs := make([]store.Claim, len(grp))
	for i, c := range grp {
		opts, err := json.Marshal(c.Options)
		if err != nil {
			return nil, err
		}
		recs[i] = m.claimRecord(c.Addr, c.Interface, macs[c.Interface], m.clock.Now(), opts)
	}
	return guarded(m, ctx, func(ctx context.Context) ([]bool, error) {
		return m.l.AcquireGroup(ctx, lease, recs, store.ActorOf(ctx))
	})
}

// groupOf is the group named in a claim's encoded options, if any.
func groupOf(opts json.RawMessage) string { return store.OptionsGroup(opts) }

// taking is how this node takes a free key (Ledger.Take): the options it
// claims with, and the conditions and record the store keeps.
type taking struct {
	// addr is the address taken (takeKeys; takeKey is given it).
	addr   netip.Addr
	ifname string
	opts   json.RawMessage
	// moveRev and cond are what Ledger.Take compares.
	moveRev int64
	cond    TakeCond
	// home is the address's home once here (store.Claim.Home).
	home string
	// change is what the history records of the take.
	change store.Change
}

// takeKey creates a's key for this node on tk.ifname, bound to the lease,
// if it is absent and the move of it is the one created at tk.moveRev (0:
// none, for a standby; the move that brings it here, for its target), and,
// for a standby, this node's cordon is still the one it read (tk.cond, see
// Ledger.Take). It returns whether it did, and
// the store's revision then.
func (m *Member) takeKey(ctx context.Context, a netip.Addr, tk taking) (bool, int64, error) {
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	ctx, done, err := m.mayTake(ctx, true)
	if err != nil {
		return false, 0, err
	}
	defer done()
	rec := m.claimRecord(a, tk.ifname, m.macs()[tk.ifname], m.clock.Now(), tk.opts)
	if tk.home != m.cfg.Node {
		rec.Home = tk.home
	}
	type took struct {
		ok  bool
		rev int64
	}
	t, err := guarded(m, ctx, func(ctx context.Context) (took, error) {
		ok, rev, err := m.l.Take(ctx, lease, rec, tk.moveRev, tk.cond, tk.change)
		return took{ok, rev}, err
	})
	return t.ok, t.rev, err
}

// takeKeys takes the keys of tks as takeKey does one: a group's in one
// transaction, so that the group is this node's whole or not at all.
func (m *Member) takeKeys(ctx context.Context, tks []taking) (bool, error) {
	if len(tks) == 1 {
		took, _, err := m.takeKey(ctx, tks[0].addr, tks[0])
		return took, err
	}
	ctx, done, err := m.mayTake(ctx, true)
	if err != nil {
		return false, err
	}
	defer done()
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	macs, now := m.macs(), m.clock.Now()
	recs := make([]store.Claim, len(tks))
	revs := make([]int64, len(tks))
	for i, tk := range tks {
		recs[i] = m.claimRecord(tk.addr, tk.ifname, macs[tk.ifname], now, tk.opts)
		if tk.home != m.cfg.Node {
			recs[i].Home = tk.home
		}
		revs[i] = tk.moveRev
	}
	return guarded(m, ctx, func(ctx context.Context) (bool, error) {
		took, _, err := m.l.TakeGroup(ctx, lease, recs, revs, tks[0].cond, tks[0].change)
		return took, err
	})
}

// standbyGroup returns a and, when this node stands by for a as part of a
// group, the group's other addresses it stands by for: a standby takes a
// group whole, in one transaction, or none of it.
func (m *Member) standbyGroup(a netip.Addr) []netip.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []netip.Addr{a}
	s, ok := m.claims.standbyOf(a)
	if !ok || s.Group == "" {
		return out
	}
	m.claims.standbys(func(t store.Standby) {
		if t.Addr != a && t.Group == s.Group {
			out = append(out, t.Addr)
		}
	})
	slices.SortFunc(out[1:], netip.Addr.Compare)
	return out
}

// withGroup is opts, encoded claim options, naming group (when not empty)
// as theirs: options given for a move or a take-over keep the address in
// its group.
func withGroup(opts json.RawMessage, group string) json.RawMessage {
	if group == "" || groupOf(opts) == group {
		return opts
	}
	m := map[string]json.RawMessage{}
	if len(opts) > 0 && json.Unmarshal(opts, &m) != nil {
		return opts
	}
	g, _ := json.Marshal(group)
	m["group"] = g
	out, err := json.Marshal(m)
	if err != nil {
		return opts
	}
	return out
}

// view reads what req's move needs to plan and completes req with the
// groups of its addresses: a move of a group's address moves the whole
// group, and req.Group names the addresses of that group. A move of a few
// addresses reads only their records and those of their nodes and the
// target (MoveView); the whole fleet is read only when a group is in play,
// or for all of a node's addresses, and then serves as the plan's view.
func (mv *Mover) view(ctx context.Context, req store.MoveRequest) (store.MoveRequest, store.View, error) {
	if req.All || req.Group != "" {
		v, err := mv.l.Fleet(ctx)
		if err != nil {
			return req, v, err
		}
		if req.All && req.Group == "" {
			return req, v, nil
		}
		req, err = withGroups(req, v, map[string]bool{req.Group: true})
		return req, v, err
	}
	v, err := mv.l.MoveView(ctx, req.Addrs, req.To)
	if err != nil {
		return req, v, err
	}
	groups := map[string]bool{}
	for _, a := range req.Addrs {
		if c, ok := v.ClaimOf(a); ok && c.Claim.Group != "" {
			groups[c.Claim.Group] = true
		}
	}
	if len(groups) == 0 {
		return req, v, nil
	}
	if v, err = mv.l.Fleet(ctx); err != nil {
		return req, v, err
	}
	req, err = withGroups(req, v, groups)
	return req, v, err
}

// withGroups adds to req every address v has of groups, and of the groups
// of req's own addresses; req.Group must have one.
func withGroups(req store.MoveRequest, v store.View, groups map[string]bool) (store.MoveRequest, error) {
	have := map[netip.Addr]bool{}
	for _, a := range req.Addrs {
		have[a] = true
		if c, ok := v.ClaimOf(a); ok && c.Claim.Group != "" {
			groups[c.Claim.Group] = true
		}
	}
	found := map[string]bool{}
	for _, c := range v.Claims {
		if g := c.Claim.Group; g != "" && groups[g] {
			found[g] = true
			if !have[c.Claim.Addr] {
				have[c.Claim.Addr] = true
				req.Addrs = append(req.Addrs, c.Claim.Addr)
			}
		}
	}
	if req.Group != "" && !found[req.Group] {
		return req, fmt.Errorf("%w: no address of group %s is held in the store (vip fleet lists the groups)", store.ErrRefused, req.Group)
	}
	req.All = false
	return req, nil
}

// wholeGroup refuses a standby for part of a group: a group has one set of
// standbys, each ready to take all of it in one transaction, so a standby
// names every address the group has in the store.
func (m *Member) wholeGroup(ctx context.Context, reqs []announce.Request, group string) error {
	if group == "" {
		return nil
	}
	v, err := m.l.Fleet(ctx)
	if err != nil {
		return fmt.Errorf("read group %s's addresses: %w", group, err)
	}
	asked := map[netip.Addr]bool{}
	for _, r := range reqs {
		asked[r.Addr] = true
	}
	var missing []string
	for _, cv := range v.Claims {
		if cv.Claim.Group == group && !asked[cv.Claim.Addr] {
			missing = append(missing, cv.Claim.Addr.String())
		}
	}
	if len(missing) > 0 {
		return refusal(fmt.Sprintf("group %s has %s too: a group has one set of standbys, ready to take all of it; stand by for every address of it (vip fleet lists them), or name one with vip standby ADDR --on NODE",
			group, strings.Join(missing, " ")))
	}
	return nil
}

// refusal is a request refused as it was asked, before anything changed:
// the fix is in the input (store.ErrRefused's kind).
type refusal string

func (r refusal) Error() string        { return string(r) }
func (r refusal) Is(target error) bool { return target == store.ErrRefused }

// groupBatches parts items into the batches of one transaction each: those
// of one group (as groupOf says) together, up to MaxGroupAddrs, each item
// of no group alone, in the order they come.
func groupBatches[T any](items []T, groupOf func(T) string) [][]T {
	var out [][]T
	at := map[string]int{}
	for _, it := range items {
		g := groupOf(it)
		if g == "" {
			out = append(out, []T{it})
			continue
		}
		i, ok := at[g]
		if !ok || len(out[i]) == MaxGroupAddrs {
			i = len(out)
			at[g] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], it)
	}
	return out
}
