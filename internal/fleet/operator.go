package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"slices"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/store"
)

// TakeOver moves addresses to this node: a move from whoever holds each
// (which waits for a dead owner's lease), a claim of those nobody holds.
// A cordoned node refuses, unless force.
func (m *Member) TakeOver(ctx context.Context, reqs []announce.Request, opts announce.ClaimOptions, force bool) ([]announce.Status, error) {
	if since, fenced := m.isFenced(); fenced {
		return nil, fencedError(since)
	}
	raw, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	byIface := map[string][]netip.Addr{}
	var all []netip.Addr
	for _, r := range reqs {
		byIface[r.Interface] = append(byIface[r.Interface], r.Addr)
		all = append(all, r.Addr)
	}
	var refused []announce.Refusal
	for ifname, addrs := range byIface {
		res, err := m.mover.Move(ctx, store.MoveRequest{Addrs: addrs, To: m.cfg.Node, Interface: ifname, Options: raw, Force: force,
			TakeOver: true, Actor: m.identified(store.ActorOf(ctx))})
		if err != nil {
			return nil, err
		}
		for _, r := range res {
			if !r.Done() {
				refused = append(refused, announce.Refusal{Addr: r.Addr, Err: errors.New(r.Error)})
			}
			if !slices.Contains(all, r.Addr) {
				// The rest of a group, which came with it.
				all = append(all, r.Addr)
			}
		}
	}
	st := m.eng.Status(all...)
	if len(refused) > 0 {
		return st, &announce.RefusedError{Refused: refused}
	}
	return st, nil
}

// Fleet reads the fleet, with each live node's lease as the store says it.
func (m *Member) Fleet(ctx context.Context) (store.View, error) {
	v, err := m.l.Fleet(ctx)
	if err == nil {
		m.l.ReadLeases(ctx, &v)
	}
	return v, err
}

// Move moves addresses as req says (the live view's move key).
func (m *Member) Move(ctx context.Context, req store.MoveRequest) ([]store.MoveResult, error) {
	req.Actor = m.identified(req.Actor)
	return m.mover.Move(ctx, req)
}

// History reads the store's history of ownership as q asks, and the
// revision read.
func (m *Member) History(ctx context.Context, q store.HistoryQuery) ([]store.Change, int64, error) {
	return m.l.History(ctx, q)
}
