package fleet

import (
	"context"
	"net/netip"
	"slices"
	"sync"
)

// addrLocks serialises what changes an address's key and its claim
// together (a claim, a release, a move's arrival or leaving, a standby's
// takeover, a resumption), address by address: two operations on
// different addresses never wait for each other, so one claim waiting on a
// slow store round trip, or on the engine, holds up nothing else. An
// operation locks all its addresses at once or waits, which no two can
// deadlock over.
type addrLocks struct {
	mu   sync.Mutex
	busy map[netip.Addr]chan struct{}
}

// lock waits until none of addrs is locked by another operation, then locks
// them all, or returns ctx's error. unlock frees them.
func (l *addrLocks) lock(ctx context.Context, addrs []netip.Addr) (unlock func(), err error) {
	addrs = slices.Clone(addrs)
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	for {
		l.mu.Lock()
		if l.busy == nil {
			l.busy = map[netip.Addr]chan struct{}{}
		}
		var wait chan struct{}
		for _, a := range addrs {
			if ch, ok := l.busy[a]; ok {
				wait = ch
				break
			}
		}
		if wait == nil {
			done := make(chan struct{})
			for _, a := range addrs {
				l.busy[a] = done
			}
			l.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					l.mu.Lock()
					for _, a := range addrs {
						delete(l.busy, a)
					}
					l.mu.Unlock()
					close(done)
				})
			}, nil
		}
		l.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
