package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// watchLoop follows the store from rev on and acts on what concerns this
// node: moves from it and to it, and owners' keys that vanish (for its
// moves and standbys); see store.WatchMoves. After a watch breaks it reads
// the moves again.
func (m *Member) watchLoop(ctx context.Context, rev int64) {
	m.resync(ctx)
	for evs := range m.c.WatchMoves(ctx, rev, func() { m.resync(ctx) }) {
		m.handle(ctx, evs)
	}
}

// resync acts on the moves under way, as if each had just been asked.
func (m *Member) resync(ctx context.Context) {
	var evs []*clientv3.Event
	_, err := m.c.Range(ctx, m.k.Moves(), func(kv *mvccpb.KeyValue) {
		evs = append(evs, &clientv3.Event{Type: clientv3.EventTypePut, Kv: kv})
	})
	if err != nil {
		m.log.Debug("read the moves under way", "err", err)
		return
	}
	m.handle(ctx, evs)
}

// handle acts on one batch of the watch's events.
func (m *Member) handle(ctx context.Context, evs []*clientv3.Event) {
	m.op.Lock()
	defer m.op.Unlock()
	var away []store.Move
	var awayRevs []int64
	for _, ev := range evs {
		p, err := m.k.Parse(string(ev.Kv.Key))
		if err != nil {
			continue
		}
		switch {
		case p.Kind == store.KindMove && ev.Type == clientv3.EventTypeDelete:
			m.mu.Lock()
			delete(m.incoming, p.Addr)
			m.mu.Unlock()
		case p.Kind == store.KindMove && ev.Type == clientv3.EventTypePut:
			var mv store.Move
			if json.Unmarshal(ev.Kv.Value, &mv) != nil || !mv.Live.IsZero() || mv.Error != "" {
				continue
			}
			mv.Addr = p.Addr
			switch {
			case mv.To == m.cfg.Node:
				m.arrive(ctx, mv, ev.Kv.CreateRevision)
			case mv.Released.IsZero() && m.owns(p.Addr):
				away = append(away, mv)
				awayRevs = append(awayRevs, ev.Kv.CreateRevision)
			}
		case p.Kind == store.KindClaim && ev.Type == clientv3.EventTypeDelete:
			if ev.PrevKv != nil {
				var prev store.Claim
				if json.Unmarshal(ev.PrevKv.Value, &prev) == nil && prev.Node == m.cfg.Node {
					continue
				}
			}
			m.mu.Lock()
			in, ok := m.incoming[p.Addr]
			m.mu.Unlock()
			if ok {
				m.arrive(ctx, in.mv, in.crev)
				continue
			}
			m.takeAsStandby(ctx, p.Addr, ev.PrevKv)
		}
	}
	if len(away) > 0 {
		m.leave(ctx, away, awayRevs)
	}
}

// owns reports whether the engine holds a for this node.
func (m *Member) owns(a netip.Addr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.owned[a]
	return ok
}

// incomingMove is a move to this node that waits for its owner to let go.
type incomingMove struct {
	mv   store.Move
	crev int64
}

// leave releases addresses moving away: the engine stops answering first,
// then one transaction per address deletes the claim and marks the move
// released, so the target never overlaps with this node. Called with op.
func (m *Member) leave(ctx context.Context, moves []store.Move, revs []int64) {
	addrs := make([]netip.Addr, len(moves))
	for i, mv := range moves {
		addrs[i] = mv.Addr
	}
	released, _, err := m.eng.Release(ctx, addrs)
	if err != nil {
		m.log.Error("release for a move", "err", err)
		return
	}
	m.mu.Lock()
	lease := m.lease
	for _, a := range released {
		delete(m.owned, a)
	}
	m.mu.Unlock()
	now := time.Now().UTC()
	for i, mv := range moves {
		mv.Released = now
		val, err := json.Marshal(mv)
		if err != nil {
			continue
		}
		key, mkey := m.k.Claim(mv.Addr), m.k.Move(mv.Addr)
		rctx, cancel := context.WithTimeout(ctx, store.DefaultTimeout)
		_, err = m.c.Txn(rctx).If(
			clientv3.Compare(clientv3.LeaseValue(key), "=", lease),
			clientv3.Compare(clientv3.CreateRevision(mkey), "=", revs[i]),
		).Then(clientv3.OpDelete(key), clientv3.OpPut(mkey, string(val), clientv3.WithIgnoreLease())).Commit()
		cancel()
		if err != nil {
			m.log.Warn("hand a moved claim's key over: it goes with this agent's lease", "addr", mv.Addr, "err", m.c.Explain(err))
			continue
		}
		m.log.Info("released for a move", "addr", mv.Addr, "to", mv.To)
		m.notify(event.Move, mv.Addr, "", "released for a move to "+mv.To)
	}
}

// arrive takes an address moving here once its key is free, claims it, and
// marks the move live (or failed). Called with op.
func (m *Member) arrive(ctx context.Context, mv store.Move, crev int64) {
	if _, fenced := m.isFenced(); fenced {
		return
	}
	m.mu.Lock()
	lease := m.lease
	_, already := m.owned[mv.Addr]
	m.mu.Unlock()
	if already {
		// The owner's release and its key's deletion came in one
		// batch: the move was taken already.
		return
	}
	key, mkey := m.k.Claim(mv.Addr), m.k.Move(mv.Addr)
	{
		rec := store.Claim{Addr: mv.Addr, Node: m.cfg.Node, Interface: mv.Interface, MAC: m.macs()[mv.Interface], Since: time.Now().UTC(), Options: mv.Options}
		val, err := json.Marshal(rec)
		if err != nil {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, store.DefaultTimeout)
		resp, err := m.c.Txn(rctx).If(
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(mkey), "=", crev),
		).Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease))).Commit()
		cancel()
		if err != nil || !resp.Succeeded {
			// The owner has not let go yet: its key's deletion brings
			// the move back here.
			m.mu.Lock()
			m.incoming[mv.Addr] = incomingMove{mv: mv, crev: crev}
			m.mu.Unlock()
			return
		}
		m.mu.Lock()
		delete(m.incoming, mv.Addr)
		m.mu.Unlock()
		var opts announce.ClaimOptions
		_ = json.Unmarshal(mv.Options, &opts)
		st, err := m.eng.Claim(ctx, []announce.Request{{Addr: mv.Addr, Interface: mv.Interface}}, opts)
		if err != nil {
			m.dropKeys(ctx, []netip.Addr{mv.Addr})
			mv.Error = fmt.Sprintf("%s could not claim %s on %s: %v", m.cfg.Node, mv.Addr, mv.Interface, err)
			m.mark(ctx, mv, crev)
			return
		}
		m.commit(st)
	}
	mv.Live = time.Now().UTC()
	m.mark(ctx, mv, crev)
	from := mv.From
	if from == "" {
		from = "nobody"
	}
	m.log.Info("moved here", "addr", mv.Addr, "interface", mv.Interface, "from", from)
	m.notify(event.Move, mv.Addr, mv.Interface, "moved here from "+from)
}

// mark writes the move's outcome for the mover to read, then deletes the
// record: the mover's watch sees both.
func (m *Member) mark(ctx context.Context, mv store.Move, crev int64) {
	val, err := json.Marshal(mv)
	if err != nil {
		return
	}
	mkey := m.k.Move(mv.Addr)
	rctx, cancel := context.WithTimeout(ctx, store.DefaultTimeout)
	defer cancel()
	same := clientv3.Compare(clientv3.CreateRevision(mkey), "=", crev)
	if _, err := m.c.Txn(rctx).If(same).Then(clientv3.OpPut(mkey, string(val), clientv3.WithIgnoreLease())).Commit(); err != nil {
		m.log.Warn("mark a move done", "addr", mv.Addr, "err", m.c.Explain(err))
		return
	}
	_, _ = m.c.Txn(rctx).If(same).Then(clientv3.OpDelete(mkey)).Commit()
}
