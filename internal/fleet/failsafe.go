package fleet

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipctl/vip/announce"
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
// with no other node to ask answers alone, for a bounded time that a node
// joining later waits out (failsafe_alone.go).
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

// failsafePromiseAssigned is the promise an owner asks for while it holds
// addresses it added to its interfaces (--assign), and the longest a node
// grants. Their lifetimes are whole seconds, a second at the least, that
// end by the answer deadline, and the kernel removes them up to
// announce.LifetimeLate after: so a round's deadline is set that much
// before the promise's end (assignedDeadline), and must still be a second
// away when it is read, a round's timeout and some slack after the round
// was sent. At TTL/2 (1 s at the default TTL) no lifetime fit, and the
// kernel took the addresses off for the whole outage (vip lab demo
// --fleet, act 5). The cost: a standby that promised such an owner waits
// this long, not TTL/2, when the store comes back to it first. Whole
// milliseconds, as the promise travels.
func (t Timing) failsafePromiseAssigned() time.Duration {
	p := max(t.failsafePromise(), time.Second+announce.LifetimeLate+t.failsafeTimeout()+assignedSlack)
	return p.Round(time.Millisecond) + time.Millisecond
}

// assignedSlack is how late past a round's timeout its deadline may be
// read and an added address still get its second of lifetime: the wait
// for the acknowledgements' lock and for the agent's lifetimes to run.
const assignedSlack = 150 * time.Millisecond

func (t Timing) failsafeTimeout() time.Duration { return t.Renew }
func (t Timing) unreachedAfter() time.Duration  { return 2 * t.Renew }

// failsafeState is the member's failsafe: the peers as last read, the
// promises made, and, as an owner, the rounds asked.
type failsafeState struct {
	cfg FailsafeConfig
	// ring agrees the keys shared with the peers (nil: none, they sign).
	ring   *failsafe.Keyring
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
	// keys and where they answer; keyless those that cannot promise
	// anything (run without the failsafe, or a record this agent cannot
	// ask by).
	peers   map[string]failsafePeer
	keyless []string
	// stale says the watch lost changes (compacted past them): the
	// peers are no view of the store until the next read of them all.
	stale bool
	// shared says peers and keyless were handed out since they were
	// last made (afterPeers, a round): applyPeers changes a copy.
	shared bool
	// records are the nodes' records as last read, and the watch's
	// changes since, this node's included: by name, the revision each
	// was created at; peersRev the revision they are at.
	records  map[string]int64
	peersRev int64
	// lives are this node's own records as the store showed them to
	// its reads and watch: each one's creation revision and the latest
	// revision it was seen standing at, in the order of their creation
	// (noteLife). A record stood at every revision between the two: a
	// lapsed owner's set at one of them named it.
	lives [][2]int64
	// installed says a read of every record was installed: a watch
	// that lost changes goes on from it. losses counts the watch's
	// losses: a read begun before the last is not installed over them.
	installed chan struct{}
	losses    int
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
	// aloneUntil is when this owner, whose set names no other node,
	// stops answering on failsafe alone (zero: it does not).
	aloneUntil time.Time
	// leaseUntil is the deadline the last acknowledged renewal gave, on
	// the Deadline's clock: one later than it is the failsafe's.
	leaseUntil time.Duration
	// recorded is the set as the store has it (store.FailsafeSet): the
	// peers' names, under which lease, at which revision of the key, and
	// what of each the owner asks (their keys and where they answer, or
	// that they cannot promise). An owner asks exactly the set the store
	// has, whatever it read of the peers since: a node outside it knows
	// to wait, and one in it knows to keep its promises.
	recordedNames   string
	recordedLease   LeaseID
	recordedRev     int64
	recordedPeers   map[string]failsafePeer
	recordedKeyless []string
	// unsurePeers and unsureKeyless are those of the sets whose writes
	// since the one recorded failed with no word of whether they took
	// (the store frozen, a timeout): the store may have any of them. A
	// round asks every node of them all, so that whichever the store
	// has, each node it names promised (nil: none).
	unsurePeers   map[string]failsafePeer
	unsureKeyless []string
	// recordedAt is when it was written (setRefresh).
	recordedAt time.Time
	// recordedFrom is the revision the set's peers were read at: the
	// set names every node whose record was created then or before.
	// unsureFrom is the highest of the unsure sets' (0: none). A set is
	// never written with a lower one while the key stands, so that a
	// node it named stays named (store.Guard).
	recordedFrom int64
	unsureFrom   int64
	// reread asks for the peers to be read again, every record (a
	// promise that ended, a new lease, the store back); the watch's
	// changes are applied one by one instead (applyPeers).
	reread chan struct{}
	// setsDue says the next read of the peers reads the failsafe sets
	// too (readPeers): a lapsed owner's set may be this node's to clear.
	setsDue bool
}

type failsafePeer struct {
	key ed25519.PublicKey
	// mac is the key this node shares with it (failsafe.Keyring): nil
	// when its record has no X25519 key (an older vip), and the two
	// sign.
	mac  []byte
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
	fs := &failsafeState{cfg: *fc, peers: map[string]failsafePeer{}, promised: map[string]time.Time{}, promisedTo: map[string]failsafePeer{}, reread: make(chan struct{}, 1), installed: make(chan struct{}, 1), setsDue: true}
	if kept, err := loadPromises(fc.Promises); err != nil {
		m.log.Warn("failsafe: the promises of an earlier agent cannot be read: this one takes nothing for a promise's length", "err", err)
		fs.holdUntil = m.start.Add(m.timing.failsafePromiseAssigned())
	} else {
		for o, until := range kept {
			if until.After(m.clock.Now()) {
				fs.promised[o] = until
				m.log.Info("failsafe: keeps an earlier agent's promise", "owner", o, "until", until)
			}
		}
	}
	ring, err := failsafe.NewKeyring(m.cfg.Node, fc.Key)
	if err != nil {
		// Never with a key LoadKey made: the nodes then sign.
		m.log.Warn("failsafe: no key to share with other nodes: its questions and answers are signed, which costs more", "err", err)
	}
	fs.ring = ring
	fs.asker = failsafe.NewAsker(m.cfg.Node, fc.Key, fs.keyOf)
	fs.server = failsafe.NewServer(failsafe.ServerConfig{Conn: fc.Conn, Node: m.cfg.Node, Key: fc.Key, KeyOf: fs.keyOf,
		Decide: m.failsafeDecide, Log: m.log})
	m.fs = fs
}

// keyOf is node's keys as last read, or as the set recorded has them: an
// owner on failsafe asks the nodes of its set, whose records it may no
// longer read.
func (fs *failsafeState) keyOf(node string) (failsafe.PeerKey, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	p, ok := fs.peers[node]
	if !ok {
		p, ok = fs.recordedPeers[node]
	}
	return failsafe.PeerKey{Sign: p.key, MAC: p.mac}, ok && p.key != nil
}

// failsafeBlocks says why this node may not take an address through the
// store now, if it may not: an owner whose lease is gone may still answer
// on failsafe, on the promises of the set it wrote, and this node is not
// in that set (it joined since: the owner never asked it). A node of the
// set, whichever of its agents, keeps its own promises (keepPromises) and clears a lapsed owner's
// set once it reaches the store and its promises to the owner ended: the
// owner gets no more from it, so it answers no longer.
//
// It returns too the guard of the take's transaction: the revision read,
// and the live owners whose sets leave this node out, which could lose
// their leases before the transaction and answer on failsafe then.
func (m *Member) failsafeBlocks(ctx context.Context) (string, Guard, error) {
	sets, nodes, rev, err := m.l.FailsafeSets(ctx, m.cfg.Node)
	if err != nil {
		return "", Guard{}, err
	}
	g := Guard{Rev: rev}
	live := map[string]store.Node{}
	for _, n := range nodes {
		live[n.Node] = n
	}
	m.noteSightings(sets, live)
	lapsed := false
	for _, s := range sets {
		if n, ok := live[s.Node]; s.Node != m.cfg.Node && (!ok || n.Lease != s.Lease) {
			lapsed = true
		}
	}
	// Read again at the next read of the peers while one is there.
	m.lapsedSeen.Store(lapsed)
	self := live[m.cfg.Node]
	for _, s := range sets {
		if s.Format < store.FailsafeFormat && !s.Unreadable {
			// Its owner may drop a name when it rewrites it.
			g.Strict = true
		}
		if s.Node == m.cfg.Node {
			continue
		}
		if s.Names(self) {
			// Asked by the owner: this node's promises, kept on
			// disk across its agents, say when it may take.
			if n, ok := live[s.Node]; !ok || n.Lease != s.Lease {
				m.clearSet(ctx, s)
			}
			continue
		}
		if n, ok := live[s.Node]; ok && n.Lease == s.Lease {
			// Its owner renews that lease: it answers on it, and
			// the take compares that its record is still there.
			if g.Live == nil {
				g.Live = map[string]int64{}
			}
			g.Live[s.Node] = n.CreateRev
			continue
		}
		if m.namedBefore(ctx, s, self) {
			// Asked by the owner under an earlier record of this
			// node's: its promises bind it all the same.
			m.clearSet(ctx, s)
			continue
		}
		if s.Alone() {
			if why := m.aloneHolds(ctx, s); why != "" {
				return why, Guard{}, nil
			}
			continue
		}
		if s.Unreadable {
			return fmt.Sprintf("%s's failsafe set does not decode, and its lease is gone: this node takes nothing until it is cleared (vip failsafe clear %s, once %s is gone for good)", s.Node, s.Node, s.Node), Guard{}, nil
		}
		return fmt.Sprintf("%s's lease is gone, and it may still answer on failsafe for the nodes of its set, which did not include this one (it joined since): this node takes nothing until one of them reaches the store and clears it, or %s is back", s.Node, s.Node), Guard{}, nil
	}
	if len(g.Live) > store.MaxGuardOwners {
		return fmt.Sprintf("the failsafe sets of %d live owners do not name this node yet (it joined lately): it takes nothing until they do, or at most %d do not", len(g.Live), store.MaxGuardOwners), Guard{}, nil
	}
	return "", g, nil
}

// namedBefore says whether s, a lapsed owner's set that does not name
// self (this node's record, made since s's revision: its lease was lost,
// and it joined again), named an earlier record of this node's: one it
// had at s's revision, which the owner read then and so asks. The node
// keeps its promises to the owner whichever of its agents made them, so
// it may clear the set once they end, as any node of the set: else a set
// whose nodes all joined again (a store that froze, and lost every lease,
// as the owner died) would hold every take until an operator cleared it.
// What the store told this agent of its own records (its reads, and the
// watch's writes and deletions of them) says so without a read (livedAt):
// a store that froze and lost every lease is the common case, and etcd may
// have compacted the set's revision away by the time it is back. Else it
// reads this node's record at that revision; not named when the store no
// longer keeps it (compacted), as for an earlier agent's record: the owner
// rewrites its set every few minutes, and the wait ends at an operator's
// clear.
func (m *Member) namedBefore(ctx context.Context, s store.FailsafeSet, self store.Node) bool {
	if s.Unreadable || s.Format < store.FailsafeFormat || self.CreateRev <= s.Rev || s.Rev <= 0 {
		return false
	}
	if m.fs != nil && m.fs.livedAt(s.Rev) {
		return true
	}
	at, err := m.l.NodeAt(ctx, m.cfg.Node, s.Rev)
	if err != nil {
		m.log.Debug("failsafe: read this node's record at a lapsed owner's set's revision", "owner", s.Node, "rev", s.Rev, "err", err)
		return false
	}
	return at > 0
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
				m.setsDue()
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
	if m.fs != nil && m.fs.ring != nil {
		rec.FailsafeDH = m.fs.ring.Public()
	}
}

// failsafeDecide is this node's answer to an owner's question: that it
// reaches the store (its last renewal was acknowledged lately), or that
// it does not either, with a promise to take none of the owner's
// addresses for as long as asked, at most failsafePromiseAssigned.
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
	p := min(q.Promise(), m.timing.failsafePromiseAssigned())
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
