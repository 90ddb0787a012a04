package fleet

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/failsafe"
	"github.com/vipctl/vip/internal/store"
)

// FailsafeConfig turns on the failsafe (Config.Failsafe): an owner whose
// renewals no longer reach the store keeps answering past its lease's
// deadline while every other live node of the fleet says, over a signed
// channel (package failsafe), that it does not reach the store either and
// promises not to take any of the owner's addresses for a while.
//
// Who is asked is every node whose record the owner last read from the
// store: any of them could take an address whose owner's lease expired;
// one that runs without the failsafe cannot promise, so there is none.
// A node of the fleet takes nothing through the store while a promise it
// made is in force, its earlier agents' included (kept on disk; an agent
// that cannot read them takes nothing for a promise's length). An owner
// with no other node to ask has no failsafe: nothing tells its own outage
// from the store's.
type FailsafeConfig struct {
	// Key is this agent's key (failsafe.LoadKey); Conn where it answers
	// questions, and Advertise the address its record gives for it.
	Key       ed25519.PrivateKey
	Conn      net.PacketConn
	Advertise netip.AddrPort
	// Promises is the file that keeps the promises this node made, so
	// that an agent started again keeps its predecessor's (empty: none
	// kept, and a started agent takes nothing for a promise's length).
	Promises string
}

// failsafeTiming is the failsafe's timing for the member's: how long a
// promise lasts, how long a round waits for answers, and how old the
// last acknowledged renewal is when a node counts as not reaching the
// store (and an owner starts asking). All scale with the TTL.
func (t Timing) failsafePromise() time.Duration { return t.TTL / 2 }
func (t Timing) failsafeTimeout() time.Duration { return t.Renew }
func (t Timing) unreachedAfter() time.Duration  { return 2 * t.Renew }

// failsafeState is the member's failsafe: the peers as last read, the
// promises made, and, as an owner, the rounds asked.
type failsafeState struct {
	cfg    FailsafeConfig
	asker  *failsafe.Asker
	server *failsafe.Server
	asking atomic.Bool

	// reachMu guards the last read that said whether the store answers
	// this node (reachNow): when, and its error.
	reachMu   sync.Mutex
	reachedAt time.Time
	reachErr  error

	mu sync.Mutex
	// peers are the live nodes as last read from the store, with their
	// keys and where they answer; keyless those that run without the
	// failsafe, which cannot promise anything.
	peers   map[string]failsafePeer
	keyless []string
	// promised is, by owner, until when this node promised to take none
	// of its addresses (the member's clock); holdUntil the same for
	// whatever an earlier agent of this node promised (start plus a
	// promise's length).
	promised  map[string]time.Time
	holdUntil time.Time
	// promisedTo is, by owner, the agent this node last promised: its
	// process as the peers were last read, and the lease it asked under.
	promisedTo map[string]failsafePeer
	// taking counts the takes through the store under way (mayTake to
	// their end): while one is, this node promises nothing.
	taking int
	// since is when this owner started answering on failsafe (zero: it
	// is not), ackedBy who acknowledged the last round, at when.
	since   time.Time
	ackedBy []string
	ackedAt time.Time
	// leaseUntil is the deadline the last acknowledged renewal gave, on
	// the Deadline's clock: one later than it is the failsafe's.
	leaseUntil time.Duration
	// recorded is the set as the store has it (store.FailsafeSet): the
	// peers' names, under which lease, at which revision of the key. An
	// owner asks only a set the store has, so that a node outside it
	// knows to wait.
	recordedNames string
	recordedLease LeaseID
	recordedRev   int64
	// recordedFrom is the revision the set's peers were read at.
	recordedFrom int64
	// reread asks for the peers and the sets to be read again (a
	// promise that ended, after which a lapsed owner's set can go).
	reread chan struct{}
}

type failsafePeer struct {
	key  ed25519.PublicKey
	addr netip.AddrPort
	// lease, pid, boot and rev are the record's: which agent, under which
	// lease, and the revision the record was created at
	// (releaseRejoined).
	lease int64
	pid   int
	boot  string
	rev   int64
}

// startFailsafe sets up the failsafe of a member that has one: its record
// fields, the server answering the fleet's owners, and the reads of the
// peers. Called by Join before the member runs.
func (m *Member) startFailsafe() {
	fc := m.cfg.Failsafe
	fs := &failsafeState{cfg: *fc, peers: map[string]failsafePeer{}, promised: map[string]time.Time{}, promisedTo: map[string]failsafePeer{}, reread: make(chan struct{}, 1)}
	if kept, err := loadPromises(fc.Promises); err != nil {
		m.log.Warn("failsafe: the promises of an earlier agent cannot be read: this one takes nothing for a promise's length", "err", err)
		fs.holdUntil = m.start.Add(m.timing.failsafePromise())
	} else {
		for o, until := range kept {
			if until.After(m.clock.Now()) {
				fs.promised[o] = until
				m.log.Info("failsafe: keeps an earlier agent's promise", "owner", o, "until", until)
			}
		}
	}
	fs.asker = failsafe.NewAsker(m.cfg.Node, fc.Key, fs.keyOf)
	fs.server = failsafe.NewServer(failsafe.ServerConfig{Conn: fc.Conn, Node: m.cfg.Node, Key: fc.Key, KeyOf: fs.keyOf,
		Decide: m.failsafeDecide, Log: m.log})
	m.fs = fs
}

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
		// Read, then watch from the read's revision; a change read
		// again at once, a broken watch after a renewal period. A
		// read every TTL besides, whatever the watch says.
		changed := m.fs.reread
		rev := m.readPeers(ctx)
		read := rev != 0
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			for ctx.Err() == nil {
				rev = m.l.WatchNodes(ctx, rev, func() {
					select {
					case changed <- struct{}{}:
					default:
					}
				})
				select {
				case <-ctx.Done():
				case <-m.clock.After(m.timing.Renew):
				}
			}
		}()
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
			case <-changed:
			case <-m.clock.After(every):
			}
			read = m.readPeers(ctx) != 0
		}
	}()
}

func (fs *failsafeState) keyOf(node string) (ed25519.PublicKey, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	p, ok := fs.peers[node]
	return p.key, ok && p.key != nil
}

// readPeers reads the live nodes' keys and addresses, and returns the
// revision read (0: none). While the store does not answer, the last read
// stands: those are the nodes an owner asks.
func (m *Member) readPeers(ctx context.Context) int64 {
	nodes, rev, err := m.l.Nodes(ctx)
	if err != nil {
		m.log.Debug("failsafe: read the fleet's nodes", "err", err)
		return 0
	}
	peers, keyless := m.peersOf(nodes, true)
	m.fs.mu.Lock()
	m.fs.peers, m.fs.keyless = peers, keyless
	m.fs.mu.Unlock()
	m.recordSet(ctx, rev, peers, keyless)
	// A lapsed owner's set that this node may clear (a node's record
	// going is what the watch tells first).
	if _, err := m.failsafeBlocks(ctx); err != nil {
		m.log.Debug("failsafe: read the failsafe sets", "err", err)
	}
	return rev
}

// peersOf is what the failsafe needs of the nodes' records, other than
// this node's: by name, each one's key, where it answers, and which agent
// under which lease; and the nodes that run without the failsafe. Said
// logs a record that cannot be asked.
func (m *Member) peersOf(nodes []store.Node, say bool) (map[string]failsafePeer, []string) {
	peers := map[string]failsafePeer{}
	var keyless []string
	for _, n := range nodes {
		if n.Node == m.cfg.Node {
			continue
		}
		if n.FailsafeKey == "" {
			keyless = append(keyless, n.Node)
			continue
		}
		key, err := failsafe.ParsePublicKey(n.FailsafeKey)
		if err != nil {
			if say {
				m.log.Warn("failsafe: a node's record has a key that does not parse: its answers count for nothing", "peer", n.Node, "err", err)
			}
			continue
		}
		addr, err := netip.ParseAddrPort(n.Failsafe)
		if err != nil {
			if say {
				m.log.Warn("failsafe: a node's record says no address to ask it at", "peer", n.Node, "failsafe", n.Failsafe)
			}
			continue
		}
		peers[n.Node] = failsafePeer{key: key, addr: addr, lease: n.Lease, pid: n.PID, boot: n.BootID, rev: n.CreateRev}
	}
	return peers, keyless
}

// recordSet writes this owner's failsafe set to the store when the peers
// read at rev, or the lease, are not the ones it has.
func (m *Member) recordSet(ctx context.Context, rev int64, peers map[string]failsafePeer, keyless []string) {
	names := slices.Concat(slices.Collect(maps.Keys(peers)), keyless)
	slices.Sort(names)
	joined := strings.Join(names, ",")
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
	same := joined == m.fs.recordedNames && lease == m.fs.recordedLease && m.fs.recordedRev != 0
	m.fs.mu.Unlock()
	if same {
		return
	}
	modRev, err := m.l.PutFailsafeSet(ctx, store.FailsafeSet{Node: m.cfg.Node, Lease: int64(lease), Rev: rev, Nodes: names})
	if errors.Is(err, ErrLeaseGone) {
		// The renewal will say so and the member join again, under a
		// lease it writes the set under (register asks for a read).
		m.log.Debug("failsafe: this node's failsafe set not written: its lease is gone", "err", err)
		return
	}
	if err != nil {
		m.log.Warn("failsafe: write this node's failsafe set: no failsafe until it is written", "err", err)
		return
	}
	m.fs.mu.Lock()
	m.fs.recordedNames, m.fs.recordedLease, m.fs.recordedRev, m.fs.recordedFrom = joined, lease, modRev, rev
	m.fs.mu.Unlock()
}

// setToRegister is the failsafe set to write with a registration: when
// the member joins again after its lease was lost, the set it last wrote,
// now under the new lease. The nodes it names are those it asked before:
// one gone since is asked and does not answer (the owner fences), one
// joined since is left out and takes none of this node's addresses while
// the set stands (failsafeBlocks), until the peers read again rewrite it.
// None at the first join (the peers not yet read: a set naming nobody would
// hold every other node's takes, should this agent die before rewriting
// it).
func (m *Member) setToRegister() *store.FailsafeSet {
	if m.fs == nil {
		return nil
	}
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if m.fs.recordedRev == 0 || m.fs.recordedNames == "" {
		return nil
	}
	return &store.FailsafeSet{Node: m.cfg.Node, Rev: m.fs.recordedFrom, Nodes: strings.Split(m.fs.recordedNames, ",")}
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

// failsafeBlocks says why this node may not take an address through the
// store now, if it may not: an owner whose lease is gone may still answer
// on failsafe, on the promises of the set it wrote, and this node is not
// in that set (it joined since: the owner never asked it). A node of the
// set, whichever of its agents, keeps its own promises (keepPromises) and clears a lapsed owner's
// set once it reaches the store and its promises to the owner ended: the
// owner gets no more from it, so it answers no longer.
func (m *Member) failsafeBlocks(ctx context.Context) (string, error) {
	sets, nodes, err := m.l.FailsafeSets(ctx, m.cfg.Node)
	if err != nil || len(sets) == 0 {
		return "", err
	}
	live := map[string]store.Node{}
	for _, n := range nodes {
		live[n.Node] = n
	}
	for _, s := range sets {
		if s.Node == m.cfg.Node {
			continue
		}
		if n, ok := live[s.Node]; ok && n.Lease == s.Lease {
			continue // its owner renews that lease: it answers on it
		}
		if slices.Contains(s.Nodes, m.cfg.Node) {
			// Asked by the owner: this node's promises, kept on
			// disk across its agents, say when it may take.
			m.clearSet(ctx, s)
			continue
		}
		return fmt.Sprintf("%s's lease is gone, and it may still answer on failsafe for the nodes of its set, which did not include this one (it joined since): this node takes nothing until one of them reaches the store and clears it, or %s is back", s.Node, s.Node), nil
	}
	return "", nil
}

// clearSet deletes a lapsed owner's set, of which this node is one, if
// this node reaches the store and no promise it made the owner is in
// force; else it reads again when the promise ends.
func (m *Member) clearSet(ctx context.Context, s store.FailsafeSet) {
	now := m.clock.Now()
	m.mu.Lock()
	reaches := now.Sub(m.renewed) < m.timing.unreachedAfter()
	m.mu.Unlock()
	if !reaches {
		return
	}
	until := m.kept[s.Node]
	if m.fs != nil {
		m.fs.mu.Lock()
		until = m.fs.promised[s.Node]
		if m.fs.holdUntil.After(until) {
			until = m.fs.holdUntil
		}
		m.fs.mu.Unlock()
	}
	if wait := until.Sub(now); wait > 0 {
		if m.fs != nil {
			m.clock.AfterFunc(wait, func() {
				select {
				case m.fs.reread <- struct{}{}:
				default:
				}
			})
		}
		return
	}
	if ok, err := m.l.ClearFailsafeSet(ctx, s.Node, s.ModRev); err == nil && ok {
		m.log.Info("failsafe: cleared a lapsed owner's failsafe set: its lease is gone and this node's promises to it ended", "owner", s.Node)
	}
}

// failsafeRecord adds the failsafe's fields to the node's record.
func (m *Member) failsafeRecord(rec *store.Node) {
	if m.cfg.Failsafe == nil {
		return
	}
	rec.FailsafeKey = failsafe.PublicKey(m.cfg.Failsafe.Key)
	rec.Failsafe = m.cfg.Failsafe.Advertise.String()
}

// failsafeDecide is this node's answer to an owner's question: that it
// reaches the store (its last renewal was acknowledged lately), or that
// it does not either, with a promise to take none of the owner's
// addresses for as long as asked, at most a promise's length.
func (m *Member) failsafeDecide(q failsafe.Message) (failsafe.Verdict, time.Duration, string) {
	now := m.clock.Now()
	m.mu.Lock()
	closed, renewed := m.closed, m.renewed
	m.mu.Unlock()
	if closed {
		return failsafe.Refused, 0, "this node's agent is stopping"
	}
	if age := now.Sub(renewed); age < m.timing.unreachedAfter() {
		// A renewal acknowledged lately says little of now: the store
		// may have frozen or lost its quorum a moment after it (a
		// store-wide outage just begun, or one come back for a moment).
		// Said only if the store answers a read now; else this node
		// promises, which keeps the owner safe either way.
		err := m.reachNow()
		if err == nil {
			return failsafe.ReachesStore, 0, fmt.Sprintf("its lease was renewed %s ago, and the store answers it now", age.Round(time.Millisecond))
		}
		m.log.Debug("failsafe: renewed lately, but the store does not answer a read now: promises", "renewed", age.Round(time.Millisecond), "err", err)
	}
	p := min(q.Promise(), m.timing.failsafePromise())
	fs := m.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.taking > 0 {
		// Checked with the promise's record under one lock, as a take
		// counts itself before it reads the promises: either it sees
		// this promise, or this sees it.
		return failsafe.Refused, 0, "this node is taking addresses through the store"
	}
	if until := now.Add(p); until.After(fs.promised[q.From]) {
		fs.promised[q.From] = until
		to := fs.peers[q.From]
		fs.promisedTo[q.From] = failsafePeer{lease: q.Lease, pid: to.pid, boot: to.boot, rev: to.rev}
		// On disk before the answer leaves: an agent started again
		// keeps it.
		if err := savePromises(fs.cfg.Promises, fs.promised, now); err != nil {
			m.log.Error("failsafe: keep a promise on disk: none made", "err", err)
			return failsafe.Refused, 0, "this node cannot keep its promise on disk"
		}
	}
	return failsafe.Accepted, p, ""
}

// reachNow says whether the store answers this node now (Ledger.Reach,
// within a third of a renewal period, well inside an owner's wait for the
// answers), or why not. One read answers every question of a quarter of a
// renewal period: the owners of an outage ask at once.
func (m *Member) reachNow() error {
	fs := m.fs
	fs.reachMu.Lock()
	defer fs.reachMu.Unlock()
	now := m.clock.Now()
	if !fs.reachedAt.IsZero() && now.Sub(fs.reachedAt) < m.timing.Renew/4 && !now.Before(fs.reachedAt) {
		return fs.reachErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.timing.Renew/3)
	defer cancel()
	err := m.l.Reach(ctx, m.cfg.Node)
	fs.reachedAt, fs.reachErr = m.clock.Now(), err
	return err
}

// mayTake waits until this node may take an address through the store:
// no promise of its own in force (keepPromises), and no lapsed owner's
// failsafe set that leaves it out (failsafeBlocks), read again after a
// sixteenth of a renewal period, then twice as long each time up to one;
// without wait, such a set refuses at once. From its
// call until done, this node promises nothing, so that no promise made
// meanwhile goes unseen.
func (m *Member) mayTake(ctx context.Context, wait bool) (done func(), err error) {
	done = func() {}
	if m.fs != nil {
		m.fs.mu.Lock()
		m.fs.taking++
		m.fs.mu.Unlock()
		done = func() {
			m.fs.mu.Lock()
			m.fs.taking--
			m.fs.mu.Unlock()
		}
	}
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	if err := m.keepPromises(ctx, lease); err != nil {
		done()
		return nil, err
	}
	said := false
	// A set that blocks is read again soon, then less often: one often
	// blocks only for a moment (a node that wrote it as it joined again
	// under a new lease, and writes it again at once), and one of a
	// dead owner may block for long, read by every node that waits.
	pause := m.timing.Renew / 16
	for {
		why, err := m.failsafeBlocks(ctx)
		switch {
		case err != nil:
			done()
			return nil, err
		case why == "":
			return done, nil
		case !wait:
			done()
			return nil, errors.New(why)
		}
		if err := m.leaseGoneSince(lease); err != nil {
			done()
			return nil, err
		}
		if !said {
			m.log.Warn("failsafe: waits to take anything", "why", why)
			said = true
		}
		select {
		case <-ctx.Done():
			done()
			return nil, fmt.Errorf("%s: %w", why, ctx.Err())
		case <-m.clock.After(pause):
		}
		pause = min(2*pause, m.timing.Renew)
	}
}

// promisedUntil is when the last promise in force that this node (or an
// earlier agent of it) made ends, and to whom; zero when none is.
func (m *Member) promisedUntil() (time.Time, string) {
	if m.fs == nil {
		var until time.Time
		var owner string
		for o, t := range m.kept {
			if t.After(until) {
				until, owner = t, o
			}
		}
		return until, owner
	}
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	until, owner := m.fs.holdUntil, "an earlier agent's owners"
	for o, t := range m.fs.promised {
		if t.After(until) {
			until, owner = t, o
		}
	}
	return until, owner
}

// keepPromises waits until no promise this node made (or an earlier agent
// of it made) is in force: a take through the store before then could take
// an address whose owner answers on failsafe on the strength of that
// promise. It looks again after each wait: a promise may have been made
// meanwhile (mayTake stops them while it runs).
//
// A take under a lease the store said is gone gives up (leaseGoneSince):
// it could not commit, and while it waits it holds up the member's joining
// again (leaseOps), which the owner it promised may be waiting for too,
// its own take held up by a promise to this node (releaseRejoined).
func (m *Member) keepPromises(ctx context.Context, lease LeaseID) error {
	said := ""
	for {
		if err := m.leaseGoneSince(lease); err != nil {
			return err
		}
		m.releaseRejoined(ctx)
		until, owner := m.promisedUntil()
		wait := m.clock.Until(until)
		if wait <= 0 {
			return nil
		}
		if said != owner {
			m.log.Info("failsafe: takes nothing until its promise ends", "owner", owner, "for", wait.Round(time.Millisecond))
			said = owner
		}
		if m.fs != nil {
			// The owner may be back under a new lease before then.
			wait = min(wait, m.timing.Renew/4)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.clock.After(wait):
		}
	}
}

// leaseGoneSince says, as an error, that the store said lease is gone (or
// the member joined again under another since): a take under it waits for
// nothing more.
func (m *Member) leaseGoneSince(lease LeaseID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if lease != 0 && (lease != m.lease || lease == m.goneLease) {
		return fmt.Errorf("%w: a take under it waits no more (the member joins again)", ErrLeaseGone)
	}
	return nil
}

// releaseRejoined ends the promises in force to owners whose agent is back
// in the store under a lease other than the one it asked under, the same
// process of the same boot: that agent fenced when the store said its
// lease was gone (it registers again only after its fence closed the
// answer deadline), and answers since only for what it took again through
// the store. No promise holds it up: without this, after etcd woke from a
// freeze and expired every lease at once, owners that had promised one
// another each waited out its promise before taking its own addresses
// back, every address dark for up to half a TTL. A restarted agent (another
// process) is not released: its dead predecessor's program may answer on
// failsafe until the promises end.
func (m *Member) releaseRejoined(ctx context.Context) {
	fs := m.fs
	if fs == nil {
		return
	}
	now := m.clock.Now()
	fs.mu.Lock()
	holds := false
	for _, until := range fs.promised {
		holds = holds || until.After(now)
	}
	fs.mu.Unlock()
	if !holds {
		return
	}
	// The records as the store has them now, not as the peers were last
	// read: the watch that reads them again may be broken as the store
	// wakes (a leader being elected), and both owners wait, each for the
	// other's record, while the read that would show it waits for a
	// TTL. Read once a poll (keepPromises), only while a promise holds.
	rctx, cancel := context.WithTimeout(ctx, m.timing.Renew/4)
	nodes, _, err := m.l.Nodes(rctx)
	cancel()
	if err != nil {
		m.log.Debug("failsafe: read the nodes to see whether a promised owner is back", "err", err)
		return
	}
	current, _ := m.peersOf(nodes, false)
	now = m.clock.Now()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	released := false
	for o, until := range fs.promised {
		to, ok := fs.promisedTo[o]
		p, live := current[o]
		// A record read since the promise (created later than the one
		// known then: the peers read before may be older than the
		// lease the owner asked under), of the same process, under
		// another lease.
		if !until.After(now) || !ok || !live || to.pid == 0 || to.lease == 0 || p.lease == 0 ||
			p.rev <= to.rev || p.lease == to.lease || p.pid != to.pid || p.boot != to.boot {
			continue
		}
		delete(fs.promised, o)
		delete(fs.promisedTo, o)
		released = true
		m.log.Info("failsafe: released from a promise: its owner's agent is back in the store under a new lease, and answers only for what it takes through it", "owner", o, "was_until", until)
	}
	if released {
		if err := savePromises(fs.cfg.Promises, fs.promised, now); err != nil {
			m.log.Warn("failsafe: keep the promises on disk after a release: the file keeps the released one until it ends", "err", err)
		}
	}
}

// failsafeTick starts a round of questions when this owner's renewals no
// longer reach the store, one at a time.
func (m *Member) failsafeTick(ctx context.Context) {
	if m.fs == nil {
		return
	}
	m.mu.Lock()
	unreached := m.clock.Since(m.renewed) >= m.timing.unreachedAfter()
	fenced, owns := !m.fencedAt.IsZero(), len(m.owned) > 0
	m.mu.Unlock()
	if !unreached || fenced || !owns || !m.fs.asking.CompareAndSwap(false, true) {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.fs.asking.Store(false)
		m.failsafeRound(ctx)
	}()
}

// failsafeRound asks every peer at once. If all accept, the answer
// deadline moves to the earliest promise's end counted from the round's
// send time (a promise counts from its receipt, which is later), unless
// the deadline passed or closed meanwhile: once fenced, only the store
// opens it again. If any does not, the failsafe ends, and with it the
// answers, if the deadline in force is one the failsafe gave.
func (m *Member) failsafeRound(ctx context.Context) {
	fs := m.fs
	fs.mu.Lock()
	targets := make([]failsafe.Target, 0, len(fs.peers))
	for n, p := range fs.peers {
		targets = append(targets, failsafe.Target{Node: n, Addr: p.addr})
	}
	fs.mu.Unlock()
	if len(targets) == 0 {
		return // no one to tell the store's outage from this node's own
	}
	slices.SortFunc(targets, func(x, y failsafe.Target) int { return strings.Compare(x.Node, y.Node) })
	fs.mu.Lock()
	keyless := slices.Clone(fs.keyless)
	fs.mu.Unlock()
	if len(keyless) > 0 {
		// A node that cannot be asked could take any address once the
		// lease expires: no failsafe.
		m.failsafeEnds(strings.Join(keyless, ", ") + " run without --failsafe and cannot promise")
		return
	}
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	asked := make([]string, 0, len(targets))
	for _, t := range targets {
		asked = append(asked, t.Node)
	}
	slices.Sort(asked)
	fs.mu.Lock()
	recorded := fs.recordedRev != 0 && fs.recordedLease == lease && strings.Join(asked, ",") == fs.recordedNames
	fs.mu.Unlock()
	if !recorded {
		// A node outside a set the store does not have would not
		// know to wait.
		m.failsafeEnds("its failsafe set is not in the store yet")
		return
	}
	sent, sentBoot := m.clock.Now(), m.cfg.Deadline.Now()
	replies := fs.asker.Ask(ctx, targets, int64(lease), m.timing.failsafePromise(), m.timing.failsafeTimeout())
	promise := m.timing.failsafePromise()
	var refused []string
	for _, r := range replies {
		switch {
		case r.Err != nil:
			refused = append(refused, fmt.Sprintf("%s did not answer (%v)", r.Node, r.Err))
		case r.Verdict != failsafe.Accepted:
			refused = append(refused, fmt.Sprintf("%s %s: %s", r.Node, r.Verdict, r.Why))
		default:
			promise = min(promise, r.Promise)
		}
	}
	if ctx.Err() != nil {
		return
	}
	if len(refused) > 0 {
		m.failsafeEnds(strings.Join(refused, "; "))
		return
	}
	m.ackMu.Lock()
	defer m.ackMu.Unlock()
	m.mu.Lock()
	storeBack := m.renewed.After(sent) || lease != m.lease
	m.mu.Unlock()
	at, now := m.cfg.Deadline.At()
	if storeBack || at == announce.ClosedAt || at <= now {
		return
	}
	until := sentBoot + promise
	if until > at {
		if err := m.cfg.Deadline.Set(until); err != nil {
			m.log.Error("failsafe: move the answer deadline", "err", err)
			return
		}
		if _, fenced := m.isFenced(); fenced {
			// A fence closed the deadline between the look above
			// and the move (fenceWhy takes no lock): closed again.
			if err := m.cfg.Deadline.Close(); err != nil {
				m.log.Error("fence: close the answer deadline", "err", err)
			}
			return
		}
		m.mu.Lock()
		m.fence.Reset(m.clock.Until(sent.Add(promise)))
		m.mu.Unlock()
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Node
	}
	fs.mu.Lock()
	first := fs.since.IsZero()
	if first {
		fs.since = sent
	}
	fs.ackedBy, fs.ackedAt = names, m.clock.Now()
	fs.mu.Unlock()
	if first {
		msg := fmt.Sprintf("the store is unreachable: answering on failsafe, acknowledged by %s", strings.Join(names, ", "))
		m.log.Warn("failsafe: answering past the lease's deadline", "acknowledged_by", strings.Join(names, ","))
		m.eng.Notify(announce.Event{Kind: event.Failsafe, State: "failsafe", Message: msg})
	}
}

// failsafeEnds takes a round that not every peer accepted: if the deadline
// in force is the failsafe's (past the lease's), the member fences now;
// else the lease's deadline stands and the fence comes at it.
func (m *Member) failsafeEnds(why string) {
	at, _ := m.cfg.Deadline.At()
	m.fs.mu.Lock()
	on, leaseUntil := !m.fs.since.IsZero(), m.fs.leaseUntil
	m.fs.mu.Unlock()
	if at != announce.ClosedAt && at > leaseUntil {
		m.fenceWhy("the failsafe ended: " + why)
		return
	}
	if on {
		m.log.Debug("failsafe: not every peer accepted", "why", why)
	}
}

// failsafeRenewed notes the lease's deadline a renewal gave, and ends a
// failsafe under way: the store is back.
func (m *Member) failsafeRenewed(leaseUntil time.Duration) {
	if m.fs == nil {
		return
	}
	now := m.clock.Now()
	m.fs.mu.Lock()
	m.fs.leaseUntil = leaseUntil
	since, by, at := m.fs.since, m.fs.ackedBy, m.fs.ackedAt
	m.fs.since, m.fs.ackedBy = time.Time{}, nil
	m.fs.mu.Unlock()
	if !since.IsZero() {
		m.log.Info("failsafe: the store is back", "after", now.Sub(since).Round(time.Millisecond))
		m.eng.Notify(announce.Event{Kind: event.Failsafe, State: "store",
			Message: fmt.Sprintf("the store is back: answered on failsafe for %s", now.Sub(since).Round(time.Millisecond))})
		m.recordFailsafe(since, now, by, at)
	}
}

// recordFailsafe writes to the history, in the background, that this
// owner answered on failsafe from since until the store acknowledged it
// again at now, last on the promises of by at at: who answered on
// failsafe, and for how long, for vip history on any host. A fence that
// ended it earlier has a record of its own, written at the resumption.
func (m *Member) recordFailsafe(since, now time.Time, by []string, at time.Time) {
	m.mu.Lock()
	addrs := make([]netip.Addr, 0, len(m.owned)+len(m.fenced))
	for a := range m.owned {
		addrs = append(addrs, a)
	}
	for a := range m.fenced {
		addrs = append(addrs, a)
	}
	m.mu.Unlock()
	ch := store.Change{Kind: store.ChangeFailsafe, Node: m.cfg.Node, Time: now, Since: since,
		Message: fmt.Sprintf("the store unreachable, it answered on the promises of %s for %s (the last at %s)",
			strings.Join(by, ", "), now.Sub(since).Round(time.Millisecond), at.Local().Format("15:04:05.000"))}
	ch.SetAddrs(addrs)
	m.afterRenew(func(ctx context.Context) {
		if err := m.l.Record(ctx, []store.Change{ch}); err != nil {
			m.log.Warn("write the failsafe to the history: left out of it", "err", err)
		}
	})
}

// FailsafeInfo says whether this owner answers on failsafe: since when,
// acknowledged last by whom and when (zero since: it does not).
func (m *Member) FailsafeInfo() (since time.Time, ackedBy []string, ackedAt time.Time) {
	if m.fs == nil {
		return
	}
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	return m.fs.since, slices.Clone(m.fs.ackedBy), m.fs.ackedAt
}

// loadPromises reads the promises kept in path (none when there is no
// file, or no path).
func loadPromises(path string) (map[string]time.Time, error) {
	kept := map[string]time.Time{}
	if path == "" {
		return kept, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return kept, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &kept); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return kept, nil
}

// savePromises writes the promises still in force at now to path, whole
// or not at all (a new file renamed over the old). It does not sync: a
// promise must outlive the agent's process (kill -9, a crash), which the
// page cache does, not the host's, whose restart takes longer than any
// promise lasts; an fsync for every answer took over the round's timeout
// on a loaded machine.
func savePromises(path string, promised map[string]time.Time, now time.Time) error {
	if path == "" {
		return nil
	}
	live := map[string]time.Time{}
	for o, until := range promised {
		if until.After(now) {
			live[o] = until.UTC()
		}
	}
	b, err := json.Marshal(live)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".promises-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return err
}
