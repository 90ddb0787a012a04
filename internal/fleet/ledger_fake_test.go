package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// fakeStore is a store of memory with etcd's semantics as far as the
// member relies on them: leases that expire on a fake clock and take their
// keys with them, keys created only if absent, creation revisions that
// tell one move from the next, and watches of an inbox's puts and of a
// claim's deletion. Each node reaches it through its own fakeLedger, which
// a test can cut off.
type fakeStore struct {
	clock clockwork.Clock

	mu        sync.Mutex
	rev       int64
	nextLease fleet.LeaseID
	leases    map[fleet.LeaseID]fakeLease
	nodes     map[string]fakeKV[store.Node]
	claims    map[netip.Addr]fakeKV[store.Claim]
	standbys  map[string]fakeKV[store.Standby] // by addr/node
	moves     map[netip.Addr]fakeKV[store.Move]
	inbox     map[string]fakeKV[netip.Addr] // by node/addr
	// lives are, by node, the revisions its records gone lived through
	// (NodeAt): from their creation to the revision they were deleted
	// after.
	lives map[string][][2]int64
	// compacted is the oldest revision a read at a past revision
	// (NodeAt) may ask for, as etcd's compaction leaves it.
	compacted int64
	// nodeWatches are the watches of the nodes' records made, by node
	// and the revision each started from; loseNodes makes one lose
	// changes (WatchNodes).
	nodeWatches [][2]any
	loseNodes   chan int64
	// failsafes are the nodes' failsafe sets, with the key's creation
	// and last write.
	failsafes map[string]fakeKV[store.FailsafeSet]
	// lingering are the Lingering records written, in order.
	lingering []store.Lingering
	// cordons are the nodes' cordons, each with its Rev; they are bound
	// to no lease here (their Until says when they end).
	cordons map[string]store.Cordon
	events  []fakeEvent
	// changed is closed, and replaced, on every write: the watches wait
	// on it.
	changed chan struct{}
	// cut are the nodes the store does not answer; renewals counts each
	// node's renewals tried.
	cut map[string]bool
	// failing counts, per node, the operations still to fail as if the
	// store did not answer, though its watches go on (failNext).
	failing  map[string]int
	renewals map[string]int
	// failTakes counts, per node, the Takes still to fail as if the
	// store did not answer (failTakesNext).
	failTakes map[string]int
	// renewCut are the nodes whose renewals go unanswered while their
	// other operations go through (a store that drops one stream).
	renewCut map[string]bool
	// setReads counts, per node, its reads of the failsafe sets.
	setReads map[string]int
	// nodeReads counts, per node, its reads of the nodes' records.
	nodeReads map[string]int
	// setAnswerLost counts, per node, its writes of its failsafe set
	// still to take but answer with an error, as a store whose answer
	// did not come back in time.
	setAnswerLost map[string]int
	// beforeAcquire, if set, runs once inside an Acquire, with the store
	// locked, before it compares: a lease expiring between a take's read
	// of the failsafe sets and its transaction.
	beforeAcquire func(s *fakeStore)
	// onHandOver, if set, runs inside a HandOver before it compares,
	// with the store locked: a mover giving up at that very moment.
	onHandOver func(s *fakeStore)
	// quietHandOver has a HandOver leave the target's inbox alone: the
	// key's deletion reaches the target before the owner's notice.
	quietHandOver bool
	// takesTried counts each node's takes (TakeGroup), done or not.
	takesTried map[string]int
	// holdTakes, when set, holds every take before the store sees it
	// until it is closed; takesHeld counts the takes it held.
	holdTakes chan struct{}
	takesHeld int
	// afterStandbysRead, if set, runs once after a read of a node's
	// standbys, the store unlocked: a change landing just after it.
	afterStandbysRead func()
	// nodeWrites counts each node's registrations written again.
	nodeWrites map[string]int
	// renewedOK says whether each node's last renewal was acknowledged.
	renewedOK map[string]bool
	// renewRTT, when set, is how long after it is sent each renewal is
	// acknowledged, on the clock (a slow store); the lease counts from
	// the acknowledgement.
	renewRTT time.Duration
	// history is what the ledgers recorded, in order, each with the
	// revision of its change.
	history []store.Change
}

// recordLocked appends ch to the history at revision rev.
func (s *fakeStore) recordLocked(ch store.Change, rev int64) {
	if ch.Time.IsZero() {
		ch.Time = s.clock.Now()
	}
	ch.Rev = rev
	s.history = append(s.history, ch)
}

// History returns what was recorded, in order.
func (s *fakeStore) History() []store.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.history)
}

type fakeLease struct {
	ttl     time.Duration
	expires time.Time
}

type fakeKV[T any] struct {
	v      T
	lease  fleet.LeaseID
	create int64
	mod    int64 // the last write's revision (moves and failsafe sets only)
}

// fakeEvent is a write a watch can see: a put in node's inbox, the
// deletion of addr's claim (prev its record), a move record written (mv)
// or deleted.
type fakeEvent struct {
	rev  int64
	kind fakeEventKind
	node string
	addr netip.Addr
	prev store.Claim
	mv   store.Move
	// cordon is node's cordon as written; nil when lifted.
	cordon *store.Cordon
}

type fakeEventKind int

const (
	evInbox fakeEventKind = iota
	evClaimGone
	evMoveWritten
	evMoveGone
	evCordon
)

// errUnreachable is what a node cut off from the store is told.
var errUnreachable = fmt.Errorf("%w (cut off in the test)", store.ErrUnreachable)

func newFakeStore(clock clockwork.Clock) *fakeStore {
	return &fakeStore{
		clock: clock, leases: map[fleet.LeaseID]fakeLease{}, nodes: map[string]fakeKV[store.Node]{},
		claims: map[netip.Addr]fakeKV[store.Claim]{}, standbys: map[string]fakeKV[store.Standby]{},
		moves: map[netip.Addr]fakeKV[store.Move]{}, inbox: map[string]fakeKV[netip.Addr]{},
		failsafes: map[string]fakeKV[store.FailsafeSet]{},
		cordons:   map[string]store.Cordon{}, changed: make(chan struct{}),
		cut: map[string]bool{}, failing: map[string]int{}, failTakes: map[string]int{}, renewals: map[string]int{}, renewedOK: map[string]bool{}, renewCut: map[string]bool{},
		nodeWrites: map[string]int{},
	}
}

// ledger is node's way to the store.
func (s *fakeStore) ledger(node string) *fakeLedger { return &fakeLedger{s: s, node: node} }

// setCut cuts node off from the store, or joins it again.
func (s *fakeStore) setCut(node string, cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut[node] = cut
}

// failNext has node's next n operations fail as if the store did not
// answer, its watches still delivered: the store going away between a
// watch's event and the read it calls for.
func (s *fakeStore) failNext(node string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing[node] = n
}

// touch writes nothing but wakes every watch, as an unrelated write would.
func (s *fakeStore) touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bumpLocked()
}

// failTakesNext has node's next n Takes fail as if the store did not
// answer, and nothing else.
func (s *fakeStore) failTakesNext(node string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failTakes[node] = n
}

// setRenewRTT has every renewal from now on acknowledged rtt after it is
// sent.
func (s *fakeStore) setRenewRTT(rtt time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewRTT = rtt
}

// renewalsOf counts node's renewals tried, and says whether the last was
// acknowledged.
func (s *fakeStore) renewalsOf(node string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewals[node], s.renewedOK[node]
}

// claim returns a's claim and whether there is one.
func (s *fakeStore) claim(a netip.Addr) (store.Claim, fleet.LeaseID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	kv, ok := s.claims[a]
	return kv.v, kv.lease, ok
}

// expire expires the leases whose time is up, as the store does on its own.
func (s *fakeStore) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
}

// revoke revokes a lease from outside (an operator, the store losing it).
func (s *fakeStore) revoke(lease fleet.LeaseID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revokeLocked(lease)
}

// begin locks the store for node's operation, expiring what is due first;
// a node cut off gets errUnreachable, and the store stays unlocked.
func (s *fakeStore) begin(node string) error {
	s.mu.Lock()
	if s.cut[node] || s.failing[node] > 0 {
		s.failing[node]--
		s.mu.Unlock()
		return errUnreachable
	}
	s.expireLocked()
	return nil
}

// putFailsafeLocked writes node's failsafe set at rev, as etcd's ledger
// encodes it (its format stamped), keeping the key's creation.
func (s *fakeStore) putFailsafeLocked(rec store.FailsafeSet, rev int64) {
	if v, err := store.Encode(rec); err == nil {
		if d, err := store.Decode[store.FailsafeSet]("failsafe/"+rec.Node, v); err == nil {
			rec = d
		}
	}
	create := rev
	if kv, ok := s.failsafes[rec.Node]; ok {
		create = kv.create
	}
	s.failsafes[rec.Node] = fakeKV[store.FailsafeSet]{v: rec, create: create, mod: rev}
}

// guardFailsLocked says whether the guard ctx carries fails, as the etcd
// ledger's compares would: a failsafe set created (or, Strict, written)
// since it was read, or a guarded owner's record gone or made again.
func (s *fakeStore) guardFailsLocked(ctx context.Context) bool {
	g, ok := fleet.GuardOf(ctx)
	if !ok {
		return false
	}
	for _, kv := range s.failsafes {
		if kv.create > g.Rev || (g.Strict && kv.mod > g.Rev) {
			return true
		}
	}
	for n, rev := range g.Live {
		if kv, ok := s.nodes[n]; !ok || kv.create != rev {
			return true
		}
	}
	return false
}

func (s *fakeStore) bumpLocked() int64 {
	s.rev++
	close(s.changed)
	s.changed = make(chan struct{})
	return s.rev
}

func (s *fakeStore) expireLocked() {
	now := s.clock.Now()
	for id, l := range s.leases {
		if !now.Before(l.expires) {
			s.revokeLocked(id)
		}
	}
}

// revokeLocked drops the lease and every key bound to it.
func (s *fakeStore) revokeLocked(id fleet.LeaseID) {
	delete(s.leases, id)
	for k, kv := range s.nodes {
		if kv.lease == id {
			// Deleted at a revision of its own, as etcd's expiry or
			// revocation: the record lived through the one before.
			if s.lives == nil {
				s.lives = map[string][][2]int64{}
			}
			s.lives[k] = append(s.lives[k], [2]int64{kv.create, s.rev})
			delete(s.nodes, k)
			s.bumpLocked()
		}
	}
	for a, kv := range s.claims {
		if kv.lease == id {
			s.deleteClaimLocked(a)
		}
	}
	for k, kv := range s.standbys {
		if kv.lease == id {
			delete(s.standbys, k)
		}
	}
	for a, kv := range s.moves {
		if kv.lease == id {
			s.deleteMoveLocked(a)
		}
	}
	for k, kv := range s.inbox {
		if kv.lease == id {
			delete(s.inbox, k)
		}
	}
	s.bumpLocked()
}

func (s *fakeStore) deleteClaimLocked(a netip.Addr) {
	kv := s.claims[a]
	delete(s.claims, a)
	prev := kv.v
	prev.Lease = int64(kv.lease)
	s.events = append(s.events, fakeEvent{rev: s.bumpLocked(), kind: evClaimGone, addr: a, prev: prev})
}

func (s *fakeStore) putInboxLocked(node string, a netip.Addr, lease fleet.LeaseID) {
	rev := s.bumpLocked()
	s.inbox[node+"/"+a.String()] = fakeKV[netip.Addr]{v: a, lease: lease, create: rev}
	s.events = append(s.events, fakeEvent{rev: rev, kind: evInbox, node: node, addr: a})
}

func (s *fakeStore) putMoveLocked(mv store.Move, lease fleet.LeaseID, create int64) {
	rev := s.bumpLocked()
	s.moves[mv.Addr] = fakeKV[store.Move]{v: mv, lease: lease, create: create, mod: rev}
	s.events = append(s.events, fakeEvent{rev: rev, kind: evMoveWritten, addr: mv.Addr, mv: mv})
}

func (s *fakeStore) deleteMoveLocked(a netip.Addr) {
	delete(s.moves, a)
	s.events = append(s.events, fakeEvent{rev: s.bumpLocked(), kind: evMoveGone, addr: a})
}

// cordon writes node's cordon, as vip cordon does; nil lifts it.
func (s *fakeStore) cordon(node string, c *store.Cordon) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rev := s.bumpLocked()
	ev := fakeEvent{rev: rev, kind: evCordon, node: node}
	if c == nil {
		delete(s.cordons, node)
	} else {
		rec := *c
		rec.Node, rec.Rev = node, rev
		s.cordons[node] = rec
		ev.cordon = &rec
	}
	s.events = append(s.events, ev)
}

func (s *fakeStore) cordonRevLocked(node string) int64 { return s.cordons[node].Rev }

func (s *fakeStore) moveRevLocked(a netip.Addr) int64 {
	if kv, ok := s.moves[a]; ok {
		return kv.create
	}
	return 0
}

// watch calls fn with each batch of the events match picks after rev,
// until ctx is done; a node cut off sees none until it is joined again.
func (s *fakeStore) watch(ctx context.Context, node string, rev int64, match func(fakeEvent) bool, fn func([]fakeEvent)) int64 {
	for {
		s.mu.Lock()
		var got []fakeEvent
		if !s.cut[node] {
			for _, ev := range s.events {
				if ev.rev > rev && match(ev) {
					got = append(got, ev)
				}
			}
			if len(got) > 0 {
				rev = got[len(got)-1].rev
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if len(got) > 0 {
			fn(got)
		}
		select {
		case <-ctx.Done():
			return rev
		case <-ch:
		}
	}
}

// fakeLedger is one node's fleet.Ledger over the fakeStore.
type fakeLedger struct {
	s    *fakeStore
	node string
}

var _ fleet.Ledger = (*fakeLedger)(nil)

func (l *fakeLedger) Where() ([]string, string) { return []string{"memory"}, store.DefaultPrefix }

func (l *fakeLedger) Close() {}

func (l *fakeLedger) Identity() string { return "" }

func (l *fakeLedger) ReadLeases(context.Context, *store.View) {}

func (l *fakeLedger) History(_ context.Context, q store.HistoryQuery) ([]store.Change, int64, error) {
	if err := l.s.begin(l.node); err != nil {
		return nil, 0, err
	}
	defer l.s.mu.Unlock()
	var out []store.Change
	for _, c := range l.s.history {
		if q.Match(c) {
			out = append(out, c)
		}
	}
	return out, l.s.rev, nil
}

func (l *fakeLedger) Register(_ context.Context, ttl time.Duration, rec store.Node, set *store.FailsafeSet, predecessor func(store.Node) bool) (fleet.LeaseID, *store.Node, int64, error) {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return 0, nil, 0, err
	}
	defer s.mu.Unlock()
	s.nextLease++
	lease := s.nextLease
	s.leases[lease] = fakeLease{ttl: ttl, expires: s.clock.Now().Add(ttl)}
	var prev *store.Node
	if kv, ok := s.nodes[rec.Node]; ok {
		if !predecessor(kv.v) {
			s.revokeLocked(lease)
			return 0, nil, 0, fmt.Errorf("node %s is already alive in the store", rec.Node)
		}
		other := kv.v
		other.Lease = int64(kv.lease)
		prev = &other
	}
	rev := s.bumpLocked()
	create := rev
	if kv, ok := s.nodes[rec.Node]; ok {
		create = kv.create // a put over the key, as etcd's
	}
	s.nodes[rec.Node] = fakeKV[store.Node]{v: rec, lease: lease, create: create}
	if set != nil {
		fs := *set
		fs.Node, fs.Lease = rec.Node, int64(lease)
		s.putFailsafeLocked(fs, rev)
	}
	return lease, prev, rev, nil
}

func (l *fakeLedger) Reregister(_ context.Context, lease fleet.LeaseID, rec store.Node) (bool, error) {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	kv, ok := s.nodes[rec.Node]
	if !ok || kv.lease != lease {
		return false, nil // a transaction whose compare fails changes nothing
	}
	kv.v = rec
	s.nodes[rec.Node] = kv
	s.nodeWrites[rec.Node]++
	s.bumpLocked()
	return true, nil
}

func (l *fakeLedger) Renew(ctx context.Context, lease fleet.LeaseID, timeout time.Duration) error {
	s := l.s
	s.mu.Lock()
	rtt := s.renewRTT
	var acked <-chan time.Time
	if rtt > 0 {
		// Tried now, acknowledged a round trip later: the timer is set
		// before the try is counted, so that a test that waits for the
		// count knows the acknowledgement's time.
		acked = s.clock.After(rtt)
		s.renewals[l.node]++
	}
	s.mu.Unlock()
	if rtt > 0 {
		if rtt > timeout {
			return errUnreachable
		}
		select {
		case <-acked:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := s.begin(l.node); err != nil {
			return err
		}
		defer s.mu.Unlock()
		ls, ok := s.leases[lease]
		if !ok {
			return fleet.ErrLeaseGone
		}
		ls.expires = s.clock.Now().Add(ls.ttl)
		s.leases[lease] = ls
		return nil
	}
	if err := s.begin(l.node); err != nil {
		s.mu.Lock()
		s.renewals[l.node]++
		s.renewedOK[l.node] = false
		s.mu.Unlock()
		return err
	}
	defer s.mu.Unlock()
	s.renewals[l.node]++
	if s.renewCut[l.node] {
		s.renewedOK[l.node] = false
		return errUnreachable
	}
	ls, ok := s.leases[lease]
	s.renewedOK[l.node] = ok
	if !ok {
		return fleet.ErrLeaseGone
	}
	ls.expires = s.clock.Now().Add(ls.ttl)
	s.leases[lease] = ls
	return nil
}

func (l *fakeLedger) Revoke(_ context.Context, lease fleet.LeaseID) error {
	if err := l.s.begin(l.node); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	if _, ok := l.s.leases[lease]; !ok {
		return fleet.ErrLeaseGone
	}
	l.s.revokeLocked(lease)
	return nil
}

func (l *fakeLedger) LeaseAlive(_ context.Context, lease fleet.LeaseID) (bool, error) {
	if err := l.s.begin(l.node); err != nil {
		return false, err
	}
	defer l.s.mu.Unlock()
	_, ok := l.s.leases[lease]
	return ok, nil
}

// beginAcquire locks the store for an acquire under lease, unless it
// fails: unreachable, or the lease gone. It runs beforeAcquire.
func (l *fakeLedger) beginAcquire(lease fleet.LeaseID) error {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return err
	}
	if fn := s.beforeAcquire; fn != nil {
		s.beforeAcquire = nil
		fn(s)
	}
	if _, ok := s.leases[lease]; !ok {
		s.mu.Unlock()
		return fleet.ErrLeaseGone
	}
	return nil
}

func (l *fakeLedger) Acquire(ctx context.Context, lease fleet.LeaseID, rec store.Claim, who store.Actor) (bool, error) {
	s := l.s
	if err := l.beginAcquire(lease); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	cur, ok := s.claims[rec.Addr]
	kind := store.ChangeClaim
	switch {
	case !ok && s.guardFailsLocked(ctx):
		return false, fleet.ErrFailsafeChanged
	case !ok:
	case cur.v.Node != rec.Node:
		return false, &fleet.HeldError{Addr: rec.Addr, Node: cur.v.Node, Since: cur.v.Since, Self: rec.Node}
	case cur.v.Group != "" && cur.v.Group != rec.Group:
		return false, &fleet.GroupError{Addr: rec.Addr, Group: cur.v.Group, Requested: rec.Group}
	case cur.lease == lease:
		return false, nil
	case rec.Home == "":
		rec.Home = cur.v.Home // a dead agent's key: its home stays
		fallthrough
	default:
		kind = store.ChangeAdopt
		rec.Since = cur.v.Since
	}
	rev := s.bumpLocked()
	s.claims[rec.Addr] = fakeKV[store.Claim]{v: rec, lease: lease, create: rev}
	s.recordLocked(store.Change{Kind: kind, Addr: rec.Addr, Node: rec.Node, Interface: rec.Interface, Actor: who}, rev)
	return true, nil
}

func (l *fakeLedger) AcquireFree(ctx context.Context, lease fleet.LeaseID, recs []store.Claim, who store.Actor) (bool, error) {
	s := l.s
	if err := l.beginAcquire(lease); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	for _, rec := range recs {
		if _, ok := s.claims[rec.Addr]; ok {
			return false, nil
		}
	}
	if s.guardFailsLocked(ctx) {
		return false, fleet.ErrFailsafeChanged
	}
	rev := s.bumpLocked()
	for _, rec := range recs {
		s.claims[rec.Addr] = fakeKV[store.Claim]{v: rec, lease: lease, create: rev}
		s.recordLocked(store.Change{Kind: store.ChangeClaim, Addr: rec.Addr, Node: rec.Node, Interface: rec.Interface, Actor: who}, rev)
	}
	return true, nil
}

func (l *fakeLedger) AcquireGroup(ctx context.Context, lease fleet.LeaseID, recs []store.Claim, who store.Actor) ([]bool, error) {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if _, ok := s.leases[lease]; !ok {
		return nil, fleet.ErrLeaseGone
	}
	fresh := make([]bool, len(recs))
	kinds := make([]store.ChangeKind, len(recs))
	for i, rec := range recs {
		cur, ok := s.claims[rec.Addr]
		kinds[i] = store.ChangeClaim
		switch {
		case !ok:
		case cur.v.Node != rec.Node:
			return nil, &fleet.HeldError{Addr: rec.Addr, Node: cur.v.Node, Since: cur.v.Since, Self: rec.Node}
		case cur.v.Group != "" && cur.v.Group != rec.Group:
			return nil, &fleet.GroupError{Addr: rec.Addr, Group: cur.v.Group, Requested: rec.Group}
		case cur.lease == lease && cur.v.Group == rec.Group:
			continue
		case cur.lease != lease:
			kinds[i] = store.ChangeAdopt
		}
		fresh[i] = true
	}
	if slices.Contains(fresh, true) && s.guardFailsLocked(ctx) {
		return nil, fleet.ErrFailsafeChanged
	}
	rev := s.bumpLocked()
	for i, rec := range recs {
		if !fresh[i] {
			continue
		}
		if cur, ok := s.claims[rec.Addr]; ok {
			if rec.Home == "" {
				rec.Home = cur.v.Home
			}
			rec.Since = cur.v.Since
		}
		s.claims[rec.Addr] = fakeKV[store.Claim]{v: rec, lease: lease, create: rev}
		s.recordLocked(store.Change{Kind: kinds[i], Addr: rec.Addr, Node: rec.Node, Interface: rec.Interface, Actor: who}, rev)
	}
	return fresh, nil
}

func (l *fakeLedger) TakeGroup(ctx context.Context, lease fleet.LeaseID, recs []store.Claim, moveRevs []int64, cond fleet.TakeCond, ch store.Change) (bool, int64, error) {
	cordonRev, standby := cond.Standby()
	s := l.s
	s.mu.Lock()
	hold := s.holdTakes
	if hold != nil {
		s.takesHeld++
	}
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if err := s.begin(l.node); err != nil {
		return false, 0, err
	}
	defer s.mu.Unlock()
	if s.takesTried == nil {
		s.takesTried = map[string]int{}
	}
	s.takesTried[l.node]++
	if cond.MoveModRev() > 0 && len(recs) > 1 {
		return false, 0, fmt.Errorf("a take of %d addresses compares one move record's revision: take them one at a time", len(recs))
	}
	if s.failTakes[l.node] > 0 {
		s.failTakes[l.node]--
		return false, 0, errUnreachable
	}
	for i, rec := range recs {
		_, hasRecord := s.standbys[rec.Addr.String()+"/"+rec.Node]
		if _, held := s.claims[rec.Addr]; held || s.moveRevLocked(rec.Addr) != moveRevs[i] || standby && (s.cordonRevLocked(rec.Node) != cordonRev || !hasRecord) {
			return false, s.rev, nil
		}
		if mod := cond.MoveModRev(); mod > 0 && s.moves[rec.Addr].mod != mod {
			return false, s.rev, nil
		}
	}
	if s.guardFailsLocked(ctx) {
		return false, 0, fleet.ErrFailsafeChanged
	}
	if _, ok := s.leases[lease]; !ok {
		return false, 0, fleet.ErrLeaseGone
	}
	rev := s.bumpLocked()
	for _, rec := range recs {
		s.claims[rec.Addr] = fakeKV[store.Claim]{v: rec, lease: lease, create: rev}
		c := ch
		c.Addr, c.Node, c.Interface = rec.Addr, rec.Node, rec.Interface
		s.recordLocked(c, rev)
	}
	return true, rev, nil
}

func (l *fakeLedger) Take(ctx context.Context, lease fleet.LeaseID, rec store.Claim, moveRev int64, cond fleet.TakeCond, ch store.Change) (bool, int64, error) {
	return l.TakeGroup(ctx, lease, []store.Claim{rec}, []int64{moveRev}, cond, ch)
}

func (l *fakeLedger) Release(_ context.Context, lease fleet.LeaseID, a netip.Addr, ch store.Change) error {
	if err := l.s.begin(l.node); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	if kv, ok := l.s.claims[a]; ok && kv.lease == lease {
		l.s.deleteClaimLocked(a)
		ch.Addr = a
		l.s.recordLocked(ch, l.s.rev)
	}
	return nil
}

func (l *fakeLedger) Record(_ context.Context, changes []store.Change) error {
	if err := l.s.begin(l.node); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	rev := l.s.bumpLocked()
	for i, ch := range changes {
		ch.Seq = i
		l.s.recordLocked(ch, rev)
	}
	return nil
}

func (l *fakeLedger) PutStandbys(_ context.Context, recs []store.Standby) (int64, error) {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	rev := s.bumpLocked()
	for _, r := range recs {
		s.putStandbyLocked(r, rev)
	}
	return rev, nil
}

func (s *fakeStore) putStandbyLocked(r store.Standby, rev int64) {
	r.Lease = 0
	s.standbys[r.Addr.String()+"/"+r.Node] = fakeKV[store.Standby]{v: r, create: rev}
}

func (l *fakeLedger) StandbyOf(_ context.Context, a netip.Addr, node string) (*store.Standby, int64, error) {
	if err := l.s.begin(l.node); err != nil {
		return nil, 0, err
	}
	defer l.s.mu.Unlock()
	kv, ok := l.s.standbys[a.String()+"/"+node]
	if !ok {
		return nil, l.s.rev, nil
	}
	v := kv.v
	return &v, l.s.rev, nil
}

func (l *fakeLedger) DeleteStandby(_ context.Context, a netip.Addr, node string) error {
	if err := l.s.begin(l.node); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	delete(l.s.standbys, a.String()+"/"+node)
	l.s.bumpLocked()
	return nil
}

func (l *fakeLedger) PutLingering(_ context.Context, _ fleet.LeaseID, rec store.Lingering) error {
	if err := l.s.begin(l.node); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	l.s.lingering = append(l.s.lingering, rec)
	l.s.bumpLocked()
	return nil
}

func (l *fakeLedger) Reach(_ context.Context, node string) error {
	if err := l.s.begin(node); err != nil {
		return err
	}
	l.s.mu.Unlock()
	return nil
}

func (l *fakeLedger) PutFailsafeSet(_ context.Context, rec store.FailsafeSet) (int64, error) {
	if err := l.s.begin(l.node); err != nil {
		return 0, err
	}
	defer l.s.mu.Unlock()
	if n, ok := l.s.nodes[rec.Node]; !ok || int64(n.lease) != rec.Lease {
		return 0, fmt.Errorf("%w: the failsafe set of lease %x not written", fleet.ErrLeaseGone, rec.Lease)
	}
	rev := l.s.bumpLocked()
	l.s.putFailsafeLocked(rec, rev)
	if l.s.setAnswerLost[l.node] > 0 {
		l.s.setAnswerLost[l.node]--
		return 0, errors.New("the store's answer was lost: context deadline exceeded")
	}
	return rev, nil
}

func (l *fakeLedger) FailsafeSets(_ context.Context, self string) ([]store.FailsafeSet, []store.Node, int64, error) {
	if err := l.s.begin(l.node); err != nil {
		return nil, nil, 0, err
	}
	defer l.s.mu.Unlock()
	if l.s.setReads == nil {
		l.s.setReads = map[string]int{}
	}
	l.s.setReads[l.node]++
	var sets []store.FailsafeSet
	for _, kv := range l.s.failsafes {
		fs := kv.v
		fs.ModRev, fs.CreateRev = kv.mod, kv.create
		sets = append(sets, fs)
	}
	if len(sets) == 0 {
		return nil, nil, l.s.rev, nil
	}
	// As etcd's: the records of the sets' nodes and of self, once each.
	var nodes []store.Node
	for name, kv := range l.s.nodes {
		if _, set := l.s.failsafes[name]; !set && name != self {
			continue
		}
		n := kv.v
		n.Node, n.Lease, n.CreateRev = name, int64(kv.lease), kv.create
		nodes = append(nodes, n)
	}
	return sets, nodes, l.s.rev, nil
}

func (l *fakeLedger) NodeAt(_ context.Context, node string, rev int64) (int64, error) {
	if err := l.s.begin(l.node); err != nil {
		return 0, err
	}
	defer l.s.mu.Unlock()
	if rev < l.s.compacted {
		return 0, errors.New("etcdserver: mvcc: required revision has been compacted")
	}
	if rev > l.s.rev {
		return 0, errors.New("etcdserver: mvcc: required revision is a future revision")
	}
	if kv, ok := l.s.nodes[node]; ok && kv.create <= rev {
		return kv.create, nil
	}
	for _, life := range l.s.lives[node] {
		if life[0] <= rev && rev <= life[1] {
			return life[0], nil
		}
	}
	return 0, nil
}

func (l *fakeLedger) ClearFailsafeSet(_ context.Context, node string, modRev int64) (bool, error) {
	if err := l.s.begin(l.node); err != nil {
		return false, err
	}
	defer l.s.mu.Unlock()
	kv, ok := l.s.failsafes[node]
	if !ok || kv.mod != modRev {
		return false, nil
	}
	delete(l.s.failsafes, node)
	l.s.bumpLocked()
	return true, nil
}

func (l *fakeLedger) Standbys(_ context.Context, node string) ([]store.Standby, int64, error) {
	if err := l.s.begin(l.node); err != nil {
		return nil, 0, err
	}
	var out []store.Standby
	for _, kv := range l.s.standbys {
		if kv.v.Node == node {
			s := kv.v
			s.Lease = int64(kv.lease)
			out = append(out, s)
		}
	}
	rev, after := l.s.rev, l.s.afterStandbysRead
	l.s.afterStandbysRead = nil
	l.s.mu.Unlock()
	if after != nil {
		after()
	}
	return out, rev, nil
}

func (l *fakeLedger) Inbox(_ context.Context, node string) ([]netip.Addr, error) {
	if err := l.s.begin(l.node); err != nil {
		return nil, err
	}
	defer l.s.mu.Unlock()
	var out []netip.Addr
	for k, kv := range l.s.inbox {
		if len(k) > len(node) && k[:len(node)+1] == node+"/" {
			out = append(out, kv.v)
		}
	}
	return out, nil
}

func (l *fakeLedger) Moves(_ context.Context, addrs []netip.Addr) ([]fleet.MoveRecord, error) {
	if err := l.s.begin(l.node); err != nil {
		return nil, err
	}
	defer l.s.mu.Unlock()
	var out []fleet.MoveRecord
	for _, a := range addrs {
		if kv, ok := l.s.moves[a]; ok {
			out = append(out, fleet.MoveRecord{Move: kv.v, Rev: kv.create, ModRev: kv.mod, Lease: kv.lease})
		}
	}
	return out, nil
}

func (l *fakeLedger) HandOver(_ context.Context, lease fleet.LeaseID, rs []fleet.MoveRecord) (bool, int64, error) {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return false, 0, err
	}
	defer s.mu.Unlock()
	if s.onHandOver != nil {
		s.onHandOver(s)
	}
	for _, r := range rs {
		a := r.Move.Addr
		if kv, ok := s.claims[a]; !ok || kv.lease != lease || s.moveRevLocked(a) != r.Rev {
			return false, s.rev, nil // a transaction whose compares fail changes nothing
		}
	}
	for _, r := range rs {
		a := r.Move.Addr
		s.deleteClaimLocked(a)
		s.putMoveLocked(r.Move, s.moves[a].lease, r.Rev)
		if !s.quietHandOver {
			s.putInboxLocked(r.Move.To, a, r.Lease)
		}
		if r.Standby != nil {
			s.putStandbyLocked(*r.Standby, s.rev)
		}
	}
	return true, s.rev, nil
}

func (l *fakeLedger) MarkMove(_ context.Context, mv store.Move, rev int64, done bool) error {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.moveRevLocked(mv.Addr) != rev {
		return nil
	}
	s.putMoveLocked(mv, s.moves[mv.Addr].lease, rev)
	if done {
		s.deleteMoveLocked(mv.Addr)
	}
	return nil
}

func (l *fakeLedger) WatchInbox(ctx context.Context, node string, rev int64, fn func([]netip.Addr)) int64 {
	return l.s.watch(ctx, l.node, rev, func(ev fakeEvent) bool { return ev.kind == evInbox && ev.node == node }, func(evs []fakeEvent) {
		addrs := make([]netip.Addr, len(evs))
		for i, ev := range evs {
			addrs[i] = ev.addr
		}
		fn(addrs)
	})
}

func (l *fakeLedger) WatchGone(ctx context.Context, a netip.Addr, rev int64, fn func(*store.Claim)) int64 {
	return l.s.watch(ctx, l.node, rev, func(ev fakeEvent) bool { return ev.kind == evClaimGone && ev.addr == a }, func(evs []fakeEvent) {
		for _, ev := range evs {
			fn(&ev.prev)
		}
	})
}

func (l *fakeLedger) Cordon(_ context.Context, node string) (*store.Cordon, int64, error) {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return nil, 0, err
	}
	defer s.mu.Unlock()
	c, ok := s.cordons[node]
	if !ok {
		return nil, s.rev, nil
	}
	return &c, s.rev, nil
}

func (l *fakeLedger) WatchCordon(ctx context.Context, node string, rev int64, fn func(*store.Cordon)) int64 {
	return l.s.watch(ctx, l.node, rev, func(ev fakeEvent) bool { return ev.kind == evCordon && ev.node == node }, func(evs []fakeEvent) {
		for _, ev := range evs {
			fn(ev.cordon)
		}
	})
}

func (l *fakeLedger) CountNodes(context.Context) (int, error) {
	if err := l.s.begin(l.node); err != nil {
		return 0, err
	}
	defer l.s.mu.Unlock()
	return len(l.s.nodes), nil
}

func (l *fakeLedger) Nodes(ctx context.Context) ([]store.Node, int64, error) {
	l.s.mu.Lock()
	if l.s.nodeReads == nil {
		l.s.nodeReads = map[string]int{}
	}
	l.s.nodeReads[l.node]++
	l.s.mu.Unlock()
	v, err := l.view()
	return v.Nodes, v.Revision, err
}

// WatchNodes tells of no change: the fake keeps no events of the nodes'
// records, and the member reads them again every TTL. It notes where each
// watch starts from (nodeWatches); a revision sent on loseNodes (set before
// the watch starts) makes it lose changes, as a compacted watch of etcd's,
// and return that revision.
func (l *fakeLedger) WatchNodes(ctx context.Context, rev int64, fn func(put, gone []store.Node, rev int64)) int64 {
	l.s.mu.Lock()
	l.s.nodeWatches = append(l.s.nodeWatches, [2]any{l.node, rev})
	lose := l.s.loseNodes
	l.s.mu.Unlock()
	select {
	case <-ctx.Done():
		return rev
	case at := <-lose:
		fn(nil, nil, 0)
		return at
	}
}

func (l *fakeLedger) Fleet(ctx context.Context) (store.View, error) {
	return l.view()
}

// MoveView returns the whole fleet, as the contract allows.
func (l *fakeLedger) MoveView(_ context.Context, _ []netip.Addr, _ string) (store.View, error) {
	return l.view()
}

func (l *fakeLedger) view() (store.View, error) {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return store.View{}, err
	}
	defer s.mu.Unlock()
	v := store.View{Revision: s.rev}
	for name, kv := range s.nodes {
		n := kv.v
		n.Node, n.Lease, n.CreateRev = name, int64(kv.lease), kv.create
		v.Nodes = append(v.Nodes, n)
	}
	for a, kv := range s.claims {
		cv := store.ClaimView{Claim: kv.v, CreateRev: kv.create}
		cv.Claim.Addr, cv.Claim.Lease = a, int64(kv.lease)
		if mv, ok := s.moves[a]; ok {
			cv.Move = &mv.v
		}
		v.Claims = append(v.Claims, cv)
	}
	for _, c := range s.cordons {
		v.Cordons = append(v.Cordons, c)
	}
	slices.SortFunc(v.Claims, func(x, y store.ClaimView) int { return x.Claim.Addr.Compare(y.Claim.Addr) })
	slices.SortFunc(v.Nodes, func(x, y store.Node) int { return strings.Compare(x.Node, y.Node) })
	return v, nil
}

func (l *fakeLedger) Grant(_ context.Context, ttl time.Duration) (fleet.LeaseID, error) {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	s.nextLease++
	s.leases[s.nextLease] = fakeLease{ttl: ttl, expires: s.clock.Now().Add(ttl)}
	return s.nextLease, nil
}

func (l *fakeLedger) Ask(_ context.Context, lease fleet.LeaseID, asks []fleet.Asking) (bool, error) {
	s := l.s
	if err := s.begin(l.node); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	if _, ok := s.leases[lease]; !ok {
		return false, fmt.Errorf("ask the move of %s: %w", asks[0].Move.Addr, fleet.ErrLeaseGone)
	}
	for _, a := range asks {
		create := int64(0)
		if kv, ok := s.claims[a.Move.Addr]; ok {
			create = kv.create
		}
		if s.moveRevLocked(a.Move.Addr) != 0 || create != a.ClaimRev || s.cordonRevLocked(a.Move.To) != a.CordonRev {
			return false, nil
		}
	}
	for _, a := range asks {
		mv := a.Move
		s.putMoveLocked(mv, lease, s.rev+1)
		s.putInboxLocked(mv.To, mv.Addr, lease)
		if mv.From != "" {
			s.putInboxLocked(mv.From, mv.Addr, lease)
		}
	}
	return true, nil
}

func (l *fakeLedger) WatchMoves(ctx context.Context) (<-chan []fleet.MoveChange, error) {
	if err := l.s.begin(l.node); err != nil {
		return nil, err
	}
	rev := l.s.rev
	l.s.mu.Unlock()
	out := make(chan []fleet.MoveChange)
	go func() {
		defer close(out)
		l.s.watch(ctx, l.node, rev, func(ev fakeEvent) bool { return ev.kind != evInbox }, func(evs []fakeEvent) {
			chs := make([]fleet.MoveChange, len(evs))
			for i, ev := range evs {
				chs[i] = fleet.MoveChange{Addr: ev.addr, Move: ev.mv}
				switch ev.kind {
				case evClaimGone:
					chs[i].Kind = fleet.ClaimDeleted
				case evMoveGone:
					chs[i].Kind = fleet.MoveDeleted
				default:
					chs[i].Kind = fleet.MoveWritten
				}
			}
			select {
			case out <- chs:
			case <-ctx.Done():
			}
		})
	}()
	return out, nil
}
