package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchMoves sends the mover, batch by batch from revision rev on, what its
// moves turn on: every event of the move records, and the deletions of
// claims. Claims being created, which a filling fleet writes by the
// hundred thousand, never leave the store. When a watch breaks (a leader
// lost, a compaction), it watches again from where both had got to; an
// event may then come twice. The channel closes when ctx is done.
func (c *Client) WatchMoves(ctx context.Context, rev int64) <-chan []*clientv3.Event {
	out := make(chan []*clientv3.Event)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			rev = c.watchMovesOnce(ctx, rev, out)
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return out
}

// watchMovesOnce watches until a watch breaks, and returns the revision
// both watches had got to.
func (c *Client) watchMovesOnce(ctx context.Context, rev int64, out chan<- []*clientv3.Event) int64 {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	moves := c.Watch(wctx, c.Keys.Moves(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	gone := c.Watch(wctx, c.Keys.Claims(), clientv3.WithPrefix(), clientv3.WithRev(rev+1),
		clientv3.WithFilterPut())
	seen := [2]int64{rev, rev}
	for {
		var wr clientv3.WatchResponse
		var ok bool
		i := 0
		select {
		case <-ctx.Done():
			return min(seen[0], seen[1])
		case wr, ok = <-moves:
		case wr, ok = <-gone:
			i = 1
		}
		if !ok || wr.Err() != nil {
			if wr.CompactRevision > seen[i] {
				seen[i] = wr.CompactRevision - 1
			}
			return min(seen[0], seen[1])
		}
		if len(wr.Events) > 0 {
			select {
			case out <- wr.Events:
			case <-ctx.Done():
				return min(seen[0], seen[1])
			}
		}
		seen[i] = max(seen[i], wr.Header.Revision)
	}
}
