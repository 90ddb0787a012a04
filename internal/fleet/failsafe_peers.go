package fleet

import (
	"cmp"
	"context"
	"maps"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/vipctl/vip/internal/failsafe"
	"github.com/vipctl/vip/internal/store"
)

// The failsafe's view of the other nodes (its peers): read, then kept
// from the watch of their records, counted a TTL apart; and what follows
// a change (the node's set written, the sets read when one may be its to
// clear).

// runFailsafe answers questions and reads the peers until ctx ends.
func (m *Member) runFailsafe(ctx context.Context) {
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		if err := m.fs.server.Serve(ctx); err != nil {
			m.log.Error("failsafe: the channel stopped: this node answers no owner's questions", "err", err)
		}
	}()
	go func() {
		defer m.wg.Done()
		// Read, then watch from the read's revision, each change
		// applied as it comes; a broken watch watched again after a
		// renewal period. A count of the records a TTL apart besides,
		// and a read of them when it differs (sameNodeCount).
		changed, applied := m.fs.reread, make(chan struct{}, 1)
		rev := m.readPeers(ctx)
		read := rev != 0
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			for ctx.Err() == nil {
				// The watch goes on from the view: from the revision
				// of the read installed, or of the last change
				// applied. With no view (the first read failed), or
				// a stale one (the watch lost changes), it waits for
				// a read: watched from anywhere else, the changes
				// between that read and where the watch starts would
				// be missed, and the view, then the set written at
				// its revision, would lack a node the set names.
				from, ok := m.fs.watchFrom(rev)
				if !ok {
					select {
					case <-ctx.Done():
					case <-m.fs.installed:
					}
					continue
				}
				lost := false
				rev = m.l.WatchNodes(ctx, from, func(put, gone []store.Node, at int64) {
					lost = lost || at == 0
					m.ownGone(ctx, gone, at)
					if m.applyPeers(put, gone, at) {
						select {
						case applied <- struct{}{}:
						default:
						}
					}
				})
				if lost {
					// Where it got to is past the changes lost: the
					// next watch goes on from the read that follows,
					// at once (the wait for it paces the watch).
					rev = 0
					continue
				}
				select {
				case <-ctx.Done():
				case <-m.clock.After(m.timing.Renew):
				}
			}
		}()
		counted, last, gap := 0, time.Time{}, time.Duration(0)
		// settle spaces the reads and writes for changes to the peers:
		// the first after a renewal period's quiet at once, then each
		// twice as long after the last, from a sixteenth of a renewal
		// period up to one. A fleet joining, or joining again after an
		// outage, changes the records hundreds of times in seconds, and
		// each change had every node write its set anew, naming every
		// other; a change alone (a node joining a formed fleet, just
		// before an outage) is in the set at once.
		settle := func() bool {
			since := m.clock.Since(last)
			switch {
			case last.IsZero() || since >= m.timing.Renew:
				gap = 0
			case gap == 0:
				gap = m.timing.Renew / 16
			default:
				gap = min(2*gap, m.timing.Renew)
			}
			if wait := gap - since; wait > 0 {
				select {
				case <-ctx.Done():
					return false
				case <-m.clock.After(wait):
				}
			}
			last = m.clock.Now()
			return true
		}
		for {
			// A read that failed (the store waking, a leader being
			// elected) is tried again after a renewal period: no
			// change may come to say when.
			every := m.timing.TTL
			if !read {
				every = m.timing.Renew
			}
			select {
			case <-ctx.Done():
				return
			case <-applied:
				// The watch's changes are in the peers: only the set,
				// and the sets if one may be this node's to clear.
				if settle() {
					m.afterPeers(ctx)
				}
				continue
			case <-changed:
				if !settle() {
					return
				}
			case <-m.clock.After(every):
				// The read a TTL apart is the watch's backstop: while
				// as many records are there as the last read found,
				// a count of them stands for it, up to peersReadEvery.
				if read && counted+1 < peersReadEvery && m.sameNodeCount(ctx) {
					counted++
					continue
				}
			}
			counted = 0
			read = m.readPeers(ctx) != 0
		}
	}()
}

// peersReadEvery is how many TTLs apart, at the most, a node reads its
// peers' records when neither its watch of them nor a count of them says
// anything changed: at a thousand nodes a read is hundreds of kilobytes,
// by every node.
const peersReadEvery = 10

// sameNodeCount says whether the store counts as many nodes' records as
// the last read of the peers found.
func (m *Member) sameNodeCount(ctx context.Context) bool {
	n, err := m.l.CountNodes(ctx)
	if err != nil {
		m.log.Debug("failsafe: count the fleet's nodes", "err", err)
		return false
	}
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	return n == len(m.fs.records)
}

// readPeers reads the live nodes' keys and addresses, and returns the
// revision read (0: none). While the store does not answer, the last read
// stands: those are the nodes an owner asks.
//
// It reads the failsafe sets too, only when one may be this node's to
// clear (setsDue): a peer's record went or changed lease since the last
// read (an owner lapsed), a promise ended, or the last read of them found
// a lapsed owner's set still there. Each owner's set names every other
// node: read by every node at every read of its peers, a TTL apart, that
// was most of what the failsafe cost a large fleet at rest. The takes do
// not need it: each compares the guard it carries, and reads the sets
// again when it fails.
func (m *Member) readPeers(ctx context.Context) int64 {
	m.fs.mu.Lock()
	losses := m.fs.losses
	m.fs.mu.Unlock()
	nodes, rev, err := m.l.Nodes(ctx)
	if err != nil {
		m.log.Debug("failsafe: read the fleet's nodes", "err", err)
		return 0
	}
	peers, keyless := m.peersOf(nodes, true)
	records := make(map[string]int64, len(nodes))
	for _, n := range nodes {
		records[n.Node] = n.CreateRev
	}
	m.fs.mu.Lock()
	// What the store said of this node's own record, installed or not.
	m.fs.noteLife(records[m.cfg.Node], rev)
	if m.fs.stale && losses != m.fs.losses {
		// Begun before the watch lost changes: it may be older than
		// the compaction, and the watch gone on from it would only
		// lose changes again. A read begun since is asked for.
		m.fs.mu.Unlock()
		select {
		case m.fs.reread <- struct{}{}:
		default:
		}
		return 0
	}
	if rev < m.fs.peersRev && !m.fs.stale {
		// The watch applied later changes while this read was under
		// way: the view it has is newer, and the watch will not tell
		// those changes again. Installed, this read would drop a node
		// the watch had added, and the set written next, at a later
		// revision, would name it unasked.
		m.fs.mu.Unlock()
		return rev
	}
	m.fs.setsDue = m.fs.setsDue || peerWent(m.fs.peers, peers)
	m.fs.peers, m.fs.keyless, m.fs.records, m.fs.peersRev, m.fs.shared, m.fs.stale = peers, keyless, records, rev, false, false
	m.fs.mu.Unlock()
	select {
	case m.fs.installed <- struct{}{}:
	default:
	}
	if m.fs.ring != nil {
		// The keys shared with nodes gone: agreed again should they
		// come back.
		m.fs.ring.Forget(func(n string) bool { _, ok := peers[n]; return ok })
	}
	m.afterPeers(ctx)
	return rev
}

// ownGone gives the creation revision of this node's own record, if gone
// at rev names it (the watch names a record deleted only): the record
// that stood at the revision before, read from the store, which has just
// told of the deletion and so usually still keeps it. If it does not (a
// watch catching up on an old deletion, a compaction since), the deletion
// says nothing of the record's life, and no life is noted. One read at
// each of this node's records deleted, which happens when its lease was
// lost.
func (m *Member) ownGone(ctx context.Context, gone []store.Node, rev int64) {
	for i, n := range gone {
		if n.Node != m.cfg.Node || n.CreateRev != 0 || rev <= 1 {
			continue
		}
		created, err := m.l.NodeAt(ctx, n.Node, rev-1)
		if err != nil {
			m.log.Debug("failsafe: read this node's record deleted, before its deletion", "rev", rev, "err", err)
			continue
		}
		gone[i].CreateRev = created
	}
}

// watchFrom is the revision the watch of the nodes goes on from: the
// view's, or where the last watch got to if later (changes that were not
// the nodes'); false when there is no view to go on from, or it is stale.
func (fs *failsafeState) watchFrom(rev int64) (int64, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.records == nil || fs.stale {
		return 0, false
	}
	return max(rev, fs.peersRev), true
}

// applyPeers applies the changes the watch of the nodes' records told of
// at rev to the peers as last read, unless a read at rev or later has
// them already; it says whether it did. Each change costs this node one
// record, not a read of them all: at a thousand nodes joining, a read of
// every record by every node at every join was the whole store's work.
func (m *Member) applyPeers(put, gone []store.Node, rev int64) bool {
	add, addKeyless := m.peersOf(put, true)
	fs := m.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if rev > 0 {
		// What the store said of this node's own records, whatever the
		// view: the watch tells one revision a call, so a record
		// written now stands at rev, and one deleted now stood at the
		// revision before.
		for _, n := range put {
			if n.Node == m.cfg.Node {
				fs.noteLife(n.CreateRev, rev)
			}
		}
		for _, n := range gone {
			if n.Node == m.cfg.Node {
				fs.noteLife(n.CreateRev, rev-1)
			}
		}
	}
	if rev == 0 {
		fs.losses++
		if fs.records != nil && !fs.stale {
			// The watch lost changes (compacted past them): the view
			// is no longer the store's at any revision. Nothing from
			// the watch, nor a set written, until a read of every
			// record.
			fs.stale = true
			m.log.Info("failsafe: the watch of the nodes lost changes (compacted): reading them all again")
			select {
			case fs.reread <- struct{}{}:
			default:
			}
		}
	}
	if rev <= fs.peersRev || fs.records == nil || fs.stale {
		return false
	}
	if fs.shared {
		// Handed out (afterPeers, a round): changed in a copy. Each
		// change copied them, O(N) by every node at every join: most
		// of what 300 agents joining cost in one process.
		fs.peers, fs.keyless, fs.shared = maps.Clone(fs.peers), slices.Clone(fs.keyless), false
	}
	// A peer went: its record is gone, or under another lease, or
	// without a key now (peerWent).
	went := false
	drop := func(n string) {
		delete(fs.peers, n)
		fs.keyless = slices.DeleteFunc(fs.keyless, func(k string) bool { return k == n })
	}
	for _, n := range gone {
		_, was := fs.peers[n.Node]
		went = went || was
		drop(n.Node)
		delete(fs.records, n.Node)
	}
	for _, n := range put {
		if p, was := fs.peers[n.Node]; was {
			q, is := add[n.Node]
			went = went || !is || q.lease != p.lease
		}
		drop(n.Node)
		fs.records[n.Node] = n.CreateRev
	}
	maps.Copy(fs.peers, add)
	if len(addKeyless) > 0 {
		fs.keyless = append(fs.keyless, addKeyless...)
		slices.Sort(fs.keyless)
	}
	fs.setsDue = fs.setsDue || went
	fs.peersRev = rev
	return true
}

// maxLives bounds the lives kept: a node joins again only when its lease
// was lost.
const maxLives = 8

// noteLife records that the store said this node's record created at
// create (0: not known) stood at rev: a key stands from its creation
// until it is deleted, and one made again is created anew, so it stood
// at every revision between. Under mu.
func (fs *failsafeState) noteLife(create, rev int64) {
	if create <= 0 || create > rev {
		return
	}
	i, found := slices.BinarySearchFunc(fs.lives, create, func(l [2]int64, c int64) int { return cmp.Compare(l[0], c) })
	if found {
		fs.lives[i][1] = max(fs.lives[i][1], rev)
		return
	}
	fs.lives = slices.Insert(fs.lives, i, [2]int64{create, rev})
	if len(fs.lives) > maxLives {
		fs.lives = slices.Delete(fs.lives, 0, 1)
	}
}

// livedAt says whether one of this node's records stood at rev, as the
// store said (noteLife).
func (fs *failsafeState) livedAt(rev int64) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, l := range fs.lives {
		if l[0] <= rev && rev <= l[1] {
			return true
		}
	}
	return false
}

// afterPeers takes the peers as they now are: it writes this node's set
// if they changed, and reads the failsafe sets if one may be this node's
// to clear (setsDue).
func (m *Member) afterPeers(ctx context.Context) {
	fs := m.fs
	fs.mu.Lock()
	if fs.stale {
		fs.mu.Unlock()
		return
	}
	peers, keyless, rev, due := fs.peers, fs.keyless, fs.peersRev, fs.setsDue
	fs.shared = true
	newest := int64(0)
	for n, r := range fs.records {
		if n != m.cfg.Node {
			newest = max(newest, r)
		}
	}
	fs.setsDue = false
	fs.mu.Unlock()
	m.recordSet(ctx, rev, newest, peers, keyless)
	if !due {
		return
	}
	// The read gives the takes a fresher guard, or stops them carrying
	// the kept one while a set holds them.
	_, _, err := m.sharedRead(ctx, math.MaxInt64)
	if err != nil {
		m.log.Debug("failsafe: read the failsafe sets", "err", err)
	}
	if err != nil || m.lapsedSeen.Load() {
		m.setsDue()
	}
}

// peerWent says whether a node of was is not in now under the same lease:
// its lease ended, and it may have left a set to clear.
func peerWent(was, now map[string]failsafePeer) bool {
	for n, p := range was {
		if q, ok := now[n]; !ok || q.lease != p.lease {
			return true
		}
	}
	return false
}

// setsDue has the next read of the peers read the failsafe sets too.
func (m *Member) setsDue() {
	m.fs.mu.Lock()
	m.fs.setsDue = true
	m.fs.mu.Unlock()
}

// peersOf is what the failsafe needs of the nodes' records, other than
// this node's: by name, each one's key, where it answers, and which agent
// under which lease; and the nodes that cannot promise: those that run
// without the failsafe, and those whose record gives no key or address
// this agent reads (or does not decode). An owner's set names them all by
// their revision, so it asks them all, and one that cannot promise leaves
// it no failsafe. Said logs a record that cannot be asked.
func (m *Member) peersOf(nodes []store.Node, say bool) (map[string]failsafePeer, []string) {
	peers := map[string]failsafePeer{}
	var keyless []string
	for _, n := range nodes {
		if n.Node == m.cfg.Node {
			continue
		}
		if n.FailsafeKey == "" || n.Unreadable {
			keyless = append(keyless, n.Node)
			continue
		}
		key, err := failsafe.ParsePublicKey(n.FailsafeKey)
		if err != nil {
			if say {
				m.log.Warn("failsafe: a node's record has a key that does not parse: it cannot promise", "peer", n.Node, "err", err)
			}
			keyless = append(keyless, n.Node)
			continue
		}
		addr, err := netip.ParseAddrPort(n.Failsafe)
		if err != nil {
			if say {
				m.log.Warn("failsafe: a node's record says no address to ask it at: it cannot promise", "peer", n.Node, "failsafe", n.Failsafe)
			}
			keyless = append(keyless, n.Node)
			continue
		}
		p := failsafePeer{key: key, addr: addr, lease: n.Lease, pid: n.PID, boot: n.BootID, rev: n.CreateRev}
		if n.FailsafeDH != "" && m.fs != nil && m.fs.ring != nil {
			// Agreed once for the node's key, and kept.
			if p.mac, err = m.fs.ring.Shared(n.Node, n.FailsafeDH); err != nil && say {
				m.log.Warn("failsafe: a node's record has an X25519 key that does not agree one: this node and it sign, which costs more", "peer", n.Node, "err", err)
			}
		}
		peers[n.Node] = p
	}
	slices.Sort(keyless)
	return peers, keyless
}
