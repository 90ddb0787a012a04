package fleet

import (
	"context"
	"log/slog"
	"maps"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/internal/failsafe"
	"github.com/vipctl/vip/internal/store"
)

// Crash stops the member as kill -9 would: no release, no revoke, so its
// lease runs out in the store.
func (m *Member) Crash() {
	m.halt()
}

// ReconcileStandbys reads this node's standbys again, as a resync does.
func (m *Member) ReconcileStandbys(ctx context.Context) error { return m.reconcileStandbys(ctx) }

// NewTestMover returns a Mover over l, on clock.
func NewTestMover(l Ledger, clock clockwork.Clock) *Mover { return &Mover{l: l, clock: clock} }

// NewEtcdLedger returns the Ledger over c, for the tests of its
// transactions against a real etcd.
func NewEtcdLedger(c *store.Client) Ledger { return store.NewLedger(c, slog.New(slog.DiscardHandler)) }

// FailsafeDecide is the member's answer to an owner's failsafe question.
func (m *Member) FailsafeDecide(q failsafe.Message) (failsafe.Verdict, time.Duration, string) {
	return m.failsafeDecide(q)
}

// FailsafeSetWritten says whether the store has this member's failsafe
// set, under its lease.
func (m *Member) FailsafeSetWritten() bool {
	if m.fs == nil {
		return false
	}
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	return m.fs.recordedRev != 0 && m.fs.recordedLease == lease
}

// MaxGuardOwners is the most owners a take's transaction compares.
const MaxGuardOwners = store.MaxGuardOwners

// ApplyPeers applies changes as the watch of the nodes' records hands them
// over (rev 0: changes lost).
func (m *Member) ApplyPeers(put, gone []store.Node, rev int64) bool {
	return m.applyPeers(put, gone, rev)
}

// OwnGone fills in the creation revision of this node's own record among
// those the watch told deleted at rev.
func (m *Member) OwnGone(gone []store.Node, rev int64) { m.ownGone(context.Background(), gone, rev) }

// WatchFrom is the revision the watch of the nodes goes on from, after
// one that got to rev; false while it waits for a read.
func (m *Member) WatchFrom(rev int64) (int64, bool) { return m.fs.watchFrom(rev) }

// KeyOf is what this node's failsafe knows of node's keys.
func (m *Member) KeyOf(node string) (failsafe.PeerKey, bool) { return m.fs.keyOf(node) }

// LivedAt says whether this node's failsafe view had one of its own
// records standing at rev.
func (m *Member) LivedAt(rev int64) bool { return m.fs.livedAt(rev) }

// ReadPeers reads every node's record, as the failsafe's backstop does.
func (m *Member) ReadPeers(ctx context.Context) int64 { return m.readPeers(ctx) }

// PeersView returns the failsafe's view of the nodes: the names of their
// records, the revision it is at, and whether the watch lost changes since.
func (m *Member) PeersView() (map[string]int64, int64, bool) {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	return maps.Clone(m.fs.records), m.fs.peersRev, m.fs.stale
}
