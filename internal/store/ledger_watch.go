package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// broken says whether the watch response ends the watch, and from which
// revision to watch again then: past a compaction, from what is left.
func broken(wr clientv3.WatchResponse, rev int64) (int64, bool) {
	if wr.Err() == nil {
		return rev, false
	}
	if wr.CompactRevision > rev {
		rev = wr.CompactRevision - 1
	}
	return rev, true
}

// The Ledger's watches. Each watch requires a leader, so that a
// member cut off with a minority hears that the watch broke rather than
// nothing; a broken watch returns the revision it got to, and its caller
// watches again from there.

func (l *Ledger) WatchInbox(ctx context.Context, node string, rev int64, fn func(addrs []netip.Addr)) int64 {
	wch := l.c.Watch(clientv3.WithRequireLeader(ctx), l.k.InboxOf(node), clientv3.WithPrefix(),
		clientv3.WithRev(rev+1), clientv3.WithFilterDelete())
	for wr := range wch {
		if err := wr.Err(); err != nil {
			if wr.CompactRevision > rev {
				rev = wr.CompactRevision - 1
			}
			l.log.Debug("the store's watch broke: watching again", "err", err)
			return rev
		}
		var addrs []netip.Addr
		for _, ev := range wr.Events {
			if p, err := l.k.Parse(string(ev.Kv.Key)); err == nil && p.Kind == KindInbox {
				addrs = append(addrs, p.Addr)
			}
		}
		fn(addrs)
		rev = through(wr)
	}
	return rev
}

func (l *Ledger) WatchGone(ctx context.Context, a netip.Addr, rev int64, fn func(prev *Claim)) int64 {
	wch := l.c.Watch(clientv3.WithRequireLeader(ctx), l.k.Claim(a), clientv3.WithRev(rev+1),
		clientv3.WithFilterPut(), clientv3.WithPrevKV())
	for wr := range wch {
		if at, ok := broken(wr, rev); ok {
			return at
		}
		for _, ev := range wr.Events {
			var prev *Claim
			if kv := ev.PrevKv; kv != nil {
				c, err := Decode[Claim](string(kv.Key), kv.Value)
				if err != nil {
					c = Claim{}
				}
				c.Lease = kv.Lease
				prev = &c
			}
			fn(prev)
		}
		rev = through(wr)
	}
	return rev
}

func (l *Ledger) WatchCordon(ctx context.Context, node string, rev int64, fn func(*Cordon)) int64 {
	wch := l.c.Watch(clientv3.WithRequireLeader(ctx), l.k.Cordon(node), clientv3.WithRev(rev+1))
	for wr := range wch {
		if at, ok := broken(wr, rev); ok {
			return at
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				fn(nil)
			} else {
				c, _ := ReadCordon(node, ev.Kv)
				fn(&c)
			}
		}
		rev = through(wr)
	}
	return rev
}

func (l *Ledger) WatchNodes(ctx context.Context, rev int64, fn func(put, gone []Node, rev int64)) int64 {
	wch := l.c.Watch(clientv3.WithRequireLeader(ctx), l.k.Nodes(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for wr := range wch {
		if at, ok := broken(wr, rev); ok {
			if wr.CompactRevision > rev {
				// The changes up to the compaction are lost.
				fn(nil, nil, 0)
			}
			return at
		}
		rev = through(wr)
		// One call a revision, in order: the view it keeps is then the
		// store's at each revision it told, so a record deleted at r
		// stood at r-1 (an owner's failsafe set at a revision names the
		// records that stood then). A response that catches a watch up
		// holds many.
		for evs := wr.Events; len(evs) > 0; {
			at := evs[0].Kv.ModRevision
			n := 1
			for n < len(evs) && evs[n].Kv.ModRevision == at {
				n++
			}
			put, gone := l.nodeChanges(evs[:n])
			evs = evs[n:]
			if len(put)+len(gone) > 0 {
				fn(put, gone, at)
			}
		}
	}
	return rev
}

// nodeChanges returns the records the events of one revision wrote (one
// that does not decode Unreadable) and those they deleted, in order. One
// revision changes a key once. A record deleted is named only, its
// CreateRev 0: the watch does not ask for the records deleted, which
// would cost etcd a read for every watcher at every deletion (a thousand
// nodes' leases ending as the store wakes: a million reads).
func (l *Ledger) nodeChanges(evs []*clientv3.Event) (put, gone []Node) {
	for _, ev := range evs {
		if ev.Type == clientv3.EventTypePut {
			if n, ok := l.nodeOf(ev.Kv); ok {
				put = append(put, n)
			}
			continue
		}
		p, err := l.k.Parse(string(ev.Kv.Key))
		if err != nil || p.Kind != KindNode {
			continue
		}
		gone = append(gone, Node{Node: p.Node})
	}
	return put, gone
}

// WatchMoves watches the move records and the claims' deletions, on two
// watches of one context: claims being created, which a filling fleet
// writes by the hundred thousand, never leave the store. It watches from
// now, and returns once etcd has made both watches, so that a move asked
// after it returns is seen whole. (A watch from a past revision would do
// as well, but etcd brings a watch that starts behind its latest revision
// up to date only every 100 ms: a move's news could wait that long.) When
// a watch breaks (a leader lost, a compaction), it watches again from
// where both had got to.
func (l *Ledger) WatchMoves(ctx context.Context) (<-chan []MoveChange, error) {
	w := l.openMoveWatch(ctx, 0)
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	for i, ch := range []clientv3.WatchChan{w.moves, w.gone} {
		select {
		case wr, ok := <-ch:
			if !ok || wr.Err() != nil || !wr.Created {
				w.cancel()
				err := wr.Err()
				if err == nil {
					err = errors.New("the watch ended before etcd made it")
				}
				return nil, fmt.Errorf("watch the moves: %w", l.c.Explain(err))
			}
			w.seen[i] = wr.Header.Revision
		case <-rctx.Done():
			w.cancel()
			return nil, fmt.Errorf("watch the moves: %w", l.c.Explain(rctx.Err()))
		}
	}
	out := make(chan []MoveChange)
	go func() {
		defer close(out)
		for {
			rev := l.followMoves(ctx, w, out)
			w.cancel()
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			w = l.openMoveWatch(ctx, rev)
		}
	}()
	return out, nil
}

// moveWatch is WatchMoves's two watches, and the revision each had got to.
type moveWatch struct {
	moves, gone clientv3.WatchChan
	seen        [2]int64
	cancel      context.CancelFunc
}

// openMoveWatch opens the two watches from after rev; from now, with
// etcd's word when each is made, when rev is 0.
func (l *Ledger) openMoveWatch(ctx context.Context, rev int64) *moveWatch {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	from := clientv3.WithCreatedNotify()
	if rev > 0 {
		from = clientv3.WithRev(rev + 1)
	}
	return &moveWatch{
		moves:  l.c.Watch(wctx, l.k.Moves(), clientv3.WithPrefix(), from),
		gone:   l.c.Watch(wctx, l.k.Claims(), clientv3.WithPrefix(), from, clientv3.WithFilterPut()),
		seen:   [2]int64{rev, rev},
		cancel: cancel,
	}
}

// followMoves sends the changes w's watches see until one breaks or ctx
// is done, and returns the revision both had got to.
func (l *Ledger) followMoves(ctx context.Context, w *moveWatch, out chan<- []MoveChange) int64 {
	for {
		var wr clientv3.WatchResponse
		var ok bool
		i := 0
		select {
		case <-ctx.Done():
			return min(w.seen[0], w.seen[1])
		case wr, ok = <-w.moves:
		case wr, ok = <-w.gone:
			i = 1
		}
		if !ok || wr.Err() != nil {
			if wr.CompactRevision > w.seen[i] {
				w.seen[i] = wr.CompactRevision - 1
			}
			return min(w.seen[0], w.seen[1])
		}
		if chs := l.moveChanges(wr.Events); len(chs) > 0 {
			select {
			case out <- chs:
			case <-ctx.Done():
				return min(w.seen[0], w.seen[1])
			}
		}
		w.seen[i] = max(w.seen[i], wr.Header.Revision)
	}
}

// moveChanges reads a watch's events; a move record that does not decode,
// and a key of another kind, are none.
func (l *Ledger) moveChanges(evs []*clientv3.Event) []MoveChange {
	var out []MoveChange
	for _, ev := range evs {
		p, err := l.k.Parse(string(ev.Kv.Key))
		if err != nil {
			continue
		}
		deleted := ev.Type == clientv3.EventTypeDelete
		switch {
		case p.Kind == KindClaim && deleted:
			out = append(out, MoveChange{Kind: ClaimDeleted, Addr: p.Addr})
		case p.Kind == KindMove && deleted:
			out = append(out, MoveChange{Kind: MoveDeleted, Addr: p.Addr})
		case p.Kind == KindMove:
			mv, err := Decode[Move](string(ev.Kv.Key), ev.Kv.Value)
			if err != nil {
				continue
			}
			mv.Addr = p.Addr
			out = append(out, MoveChange{Kind: MoveWritten, Addr: p.Addr, Move: mv})
		}
	}
	return out
}

// through is the revision through which wr and the responses before it
// hold every event of their watch: the last event's, or, with none, the
// header's. A response that catches a watch up holds at most 1,000
// revisions of events and says the store's revision all the same, with
// the rest to come (etcd's syncWatchers): resumed from its header, the
// watch would skip them, and a view said to be at its header would not be.
func through(wr clientv3.WatchResponse) int64 {
	if n := len(wr.Events); n > 0 {
		return wr.Events[n-1].Kv.ModRevision
	}
	return wr.Header.Revision
}
