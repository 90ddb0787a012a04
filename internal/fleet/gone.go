package fleet

import (
	"context"
	"net/netip"

	"github.com/vipctl/vip/internal/store"
)

// watchGone watches a's claim key, from revision rev on, for its deletion:
// the owner's lease expired, or it let go. A member waits so on the
// addresses it stands by for and on those moving here, each alone, so that
// the deletions of the rest of the fleet never reach it. Watching an
// address already watched is a no-op.
func (m *Member) watchGone(a netip.Addr, rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runCtx == nil || m.claims.watched(a) {
		return
	}
	ctx, cancel := context.WithCancel(m.runCtx)
	m.claims.watch(a, cancel)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.watchGoneLoop(ctx, a, rev)
	}()
}

// unwatchGone stops watching a, unless the member still waits on it.
func (m *Member) unwatchGone(a netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims.unwatchIfIdle(a)
}

func (m *Member) watchGoneLoop(ctx context.Context, a netip.Addr, rev int64) {
	for ctx.Err() == nil {
		rev = m.l.WatchGone(ctx, a, rev, func(prev *store.Claim) { m.gone(a, prev) })
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(m.timing.Renew):
		}
	}
}
