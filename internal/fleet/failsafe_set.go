package fleet

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vip/internal/store"
)

// An owner's failsafe set: what it writes to the store, when, and which
// nodes its rounds ask as the store has it.

// setRefresh is how old an owner's set may grow, unchanged, before the
// owner writes it again at the revision of its peers now: a lapsed set
// whose nodes all joined again since is cleared by a node that had a
// record at its revision (namedBefore), which the store must still keep.
// It is well inside the compaction retention commonly set (Kubernetes'
// keeps five minutes).
const setRefresh = 2 * time.Minute

// recordedSet returns the peers and the keyless nodes of the set the store
// has under lease, as the owner recorded it when it wrote it, with those
// of any set written since whose write may have taken; false when it has
// none under lease.
func (fs *failsafeState) recordedSet(lease LeaseID) (map[string]failsafePeer, []string, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.recordedRev == 0 || fs.recordedLease != lease {
		return nil, nil, false
	}
	peers, keyless := fs.askedLocked()
	return peers, keyless, true
}

// askedLocked returns the peers and the keyless nodes of the set recorded
// and of any written since whose write may have taken. Called with fs.mu
// held.
func (fs *failsafeState) askedLocked() (map[string]failsafePeer, []string) {
	if fs.unsurePeers == nil {
		return fs.recordedPeers, fs.recordedKeyless
	}
	peers := maps.Clone(fs.recordedPeers)
	if peers == nil {
		peers = map[string]failsafePeer{}
	}
	for n, p := range fs.unsurePeers {
		if _, ok := peers[n]; !ok {
			peers[n] = p
		}
	}
	keyless := slices.Concat(fs.recordedKeyless, fs.unsureKeyless)
	slices.Sort(keyless)
	return peers, slices.Compact(keyless)
}

// recordSet writes this owner's failsafe set to the store when the peers
// read at rev (newest the latest revision a record of them was created
// at), or the lease, are not the ones it has.
func (m *Member) recordSet(ctx context.Context, rev, newest int64, peers map[string]failsafePeer, keyless []string) {
	m.mu.Lock()
	lease, gone := m.lease, m.lease == m.goneLease
	m.mu.Unlock()
	if gone {
		// The store said the lease is gone: the member joins again
		// under a new one, and the set is written under that. One
		// under the dead lease would hold the takes of the nodes it
		// leaves out, although no owner answers on it.
		return
	}
	m.fs.mu.Lock()
	// A set names every node whose record was created at its revision
	// or before: one joined (or joined again) since is not named (newer).
	// With none, every node read now was read then, for the set: as many
	// is the same nodes. O(1), as it runs at every change of the peers
	// (a comparison of the names was O(N) at every one, by every node:
	// O(N^3) for a fleet joining).
	newer := newest > m.fs.recordedFrom
	same := !newer && len(peers)+len(keyless) == len(m.fs.recordedPeers)+len(m.fs.recordedKeyless) &&
		lease == m.fs.recordedLease && m.fs.recordedRev != 0 && m.fs.unsurePeers == nil &&
		m.clock.Since(m.fs.recordedAt) < setRefresh
	adds := m.fs.recordedRev != 0 && newer
	onFailsafe := !m.fs.since.IsZero()
	floor := max(m.fs.recordedFrom, m.fs.unsureFrom)
	m.fs.mu.Unlock()
	if same {
		return
	}
	if onFailsafe && adds {
		// Answering on the promises of the set the store has: a node
		// added to it now never promised, and being in the set it
		// could take once the lease is gone. Left out until the store
		// is back (failsafeRenewed reads the peers again), it is held
		// by the set like any node that joined during an outage.
		m.log.Debug("failsafe: a node joined while this owner answers on failsafe: its set is written once the store is back")
		return
	}
	if rev < floor {
		// Never a lower revision than one the store may have: a node
		// that set named would be named no more, and a take that read
		// it does not compare rewrites (store.Guard).
		m.log.Debug("failsafe: peers read at a revision older than this node's set: not written", "rev", rev, "set", floor)
		return
	}
	names := slices.Concat(slices.Collect(maps.Keys(peers)), keyless)
	slices.Sort(names)
	joined := strings.Join(names, ",")
	set := store.FailsafeSet{Node: m.cfg.Node, Lease: int64(lease), Rev: rev}
	if len(names) == 0 {
		set.AloneMS = m.timing.aloneFor().Milliseconds()
	}
	modRev, err := m.l.PutFailsafeSet(ctx, set)
	if errors.Is(err, ErrLeaseGone) {
		// The renewal will say so and the member join again, under a
		// lease it writes the set under (register asks for a read).
		m.log.Debug("failsafe: this node's failsafe set not written: its lease is gone", "err", err)
		return
	}
	if err != nil {
		// It may have taken: the store may have this set, or the one
		// recorded. Asking either alone could leave out a node the
		// other names, which would take, never having promised: the
		// rounds ask both (recordedSet) until a write is acknowledged.
		m.fs.mu.Lock()
		if lease == m.fs.recordedLease {
			if m.fs.unsurePeers == nil {
				m.fs.unsurePeers = map[string]failsafePeer{}
			}
			maps.Copy(m.fs.unsurePeers, peers)
			m.fs.unsureKeyless = append(m.fs.unsureKeyless, keyless...)
			m.fs.unsureFrom = max(m.fs.unsureFrom, rev)
		}
		m.fs.mu.Unlock()
		m.log.Warn("failsafe: write this node's failsafe set: no failsafe until it is written", "err", err)
		return
	}
	m.fs.mu.Lock()
	m.fs.recordedNames, m.fs.recordedLease, m.fs.recordedRev, m.fs.recordedFrom = joined, lease, modRev, rev
	m.fs.recordedAt = m.clock.Now()
	m.fs.recordedPeers, m.fs.recordedKeyless = peers, keyless
	m.fs.unsurePeers, m.fs.unsureKeyless, m.fs.unsureFrom = nil, nil, 0
	m.fs.mu.Unlock()
}

// setToRegister is the failsafe set to write with a registration: when
// the member joins again after its lease was lost, the set it last wrote,
// now under the new lease, at the highest revision a set it wrote may have
// had (one written with no word of whether it took: the rounds then ask
// the nodes of both, and go on asking them, takeRegistered). The nodes it
// names are those it asked before: one gone since is asked and does not
// answer (the owner fences), one joined since is left out and takes none
// of this node's addresses while the set stands (failsafeBlocks), until
// the peers read again rewrite it. None at the first join (the peers not
// yet read: a set naming nobody would hold every other node's takes,
// should this agent die before rewriting it).
func (m *Member) setToRegister() *store.FailsafeSet {
	if m.fs == nil {
		return nil
	}
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if m.fs.recordedRev == 0 || m.fs.recordedNames == "" {
		return nil
	}
	return &store.FailsafeSet{Node: m.cfg.Node, Rev: max(m.fs.recordedFrom, m.fs.unsureFrom)}
}

// takeRegistered records set, written with the registration under lease
// at rev: the rounds ask the nodes of the set recorded and of any unsure
// since, whose revision it has if higher.
func (m *Member) takeRegistered(set *store.FailsafeSet, lease LeaseID, rev int64) {
	fs := m.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.unsurePeers != nil {
		peers, keyless := fs.askedLocked()
		names := slices.Concat(slices.Collect(maps.Keys(peers)), keyless)
		slices.Sort(names)
		fs.recordedPeers, fs.recordedKeyless, fs.recordedNames = peers, keyless, strings.Join(names, ",")
	}
	fs.recordedLease, fs.recordedRev, fs.recordedFrom = lease, rev, set.Rev
	fs.recordedAt = m.clock.Now()
	fs.unsurePeers, fs.unsureKeyless, fs.unsureFrom = nil, nil, 0
}

// dropSet deletes this node's failsafe set, at a stop for good: its lease
// goes, and nothing of it answers on failsafe after.
func (m *Member) dropSet() {
	if m.fs == nil {
		return
	}
	m.fs.mu.Lock()
	modRev := m.fs.recordedRev
	m.fs.mu.Unlock()
	if modRev == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := m.l.ClearFailsafeSet(ctx, m.cfg.Node, modRev); err != nil {
		m.log.Debug("failsafe: delete this node's failsafe set", "err", err)
	}
}
