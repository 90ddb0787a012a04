package fleet

import (
	"context"
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/store"
)

// The ledger's vocabulary is the store's (package store, where the ledger
// over etcd lives); these names stay for the fleet's code and its users.
type (
	LeaseID        = store.LeaseID
	MoveRecord     = store.MoveRecord
	TakeCond       = store.TakeCond
	Asking         = store.Asking
	MoveChange     = store.MoveChange
	MoveChangeKind = store.MoveChangeKind
	HeldError      = store.HeldError
	GroupError     = store.GroupError
	Guard          = store.Guard
)

const (
	MoveWritten   = store.MoveWritten
	MoveDeleted   = store.MoveDeleted
	ClaimDeleted  = store.ClaimDeleted
	MaxGroupAddrs = store.MaxGroupAddrs
)

var (
	// ErrLeaseGone is store.ErrLeaseGone.
	ErrLeaseGone = store.ErrLeaseGone
	// ErrFailsafeChanged is store.ErrFailsafeChanged.
	ErrFailsafeChanged = store.ErrFailsafeChanged
)

// StandbyTake is store.StandbyTake: a standby's take.
func StandbyTake(cordonRev int64) TakeCond { return store.StandbyTake(cordonRev) }

// MoveArrival is store.MoveArrival: a move's target's take.
func MoveArrival(modRev int64) TakeCond { return store.MoveArrival(modRev) }

// WithGuard is store.WithGuard.
func WithGuard(ctx context.Context, g Guard) context.Context { return store.WithGuard(ctx, g) }

// GuardOf is store.GuardOf.
func GuardOf(ctx context.Context) (Guard, bool) { return store.GuardOf(ctx) }

// Ledger is the store as a Member (and a Mover) sees it: every transaction the member
// makes goes through it, so that the promise (one owner per address, a
// release before the next owner's claim, one standby per takeover) is
// written once, in terms of the fleet rather than of keys. The member
// holds its own locks and keeps its own state; a Ledger only reads and
// writes the store, and each call is one round trip or a few, bounded by
// store.DefaultTimeout. Errors are one sentence that says what to check
// (store.Client.Explain).
//
// store.Ledger is the one over etcd; tests use one of memory, and the
// contract (ledger_contract_test.go) runs the same cases against both. Its
// parts by role follow.
type Ledger interface {
	LeaseLedger
	ClaimLedger
	StandbyLedger
	CordonLedger
	MoveLedger
	HistoryLedger
	NodeLedger

	// Where says where the store is, for the status.
	Where() (endpoints []string, prefix string)
	// Identity is who the store authenticated this client as (empty
	// when it asked for no authentication), for the history's records.
	Identity() string
	// Close ends what the ledger keeps open (the renewals' stream), not
	// the store's client, which is the caller's.
	Close()
}

// LeaseLedger is the part of the Ledger for the agent's lease and registration, and a mover's lease.
type LeaseLedger interface {
	// Register grants a lease of ttl and writes the node's registration
	// under it, if the node is not registered, or if it is and
	// predecessor says the record is this host's own agent that died:
	// then that record is returned (its Lease the dead agent's lease).
	// A refusal revokes the new lease.
	//
	// With a failsafe set (nil: none), the same transaction writes it
	// under the new lease (its Lease is set to it) and rev is the
	// revision it was written at: a member joining again after its lease
	// was lost has its failsafe from its first moment, not from a later
	// write that a store failing again at once would not take.
	Register(ctx context.Context, ttl time.Duration, rec store.Node, set *store.FailsafeSet, predecessor func(store.Node) bool) (lease LeaseID, other *store.Node, rev int64, err error)
	// Reregister writes rec over the node's registration, bound to lease,
	// if the registration there is still bound to lease (this agent's),
	// and says whether it did: false when the record went with the lease,
	// or is another agent's, which it leaves as it is.
	Reregister(ctx context.Context, lease LeaseID, rec store.Node) (bool, error)
	// Renew renews the lease once, waiting up to timeout for the store
	// to acknowledge it; ErrLeaseGone when the lease is gone.
	Renew(ctx context.Context, lease LeaseID, timeout time.Duration) error
	// Revoke revokes the lease, which deletes every key bound to it.
	Revoke(ctx context.Context, lease LeaseID) error
	// LeaseAlive says whether the store still has the lease.
	LeaseAlive(ctx context.Context, lease LeaseID) (bool, error)
	// Grant grants a lease of ttl (whole seconds), for a mover's records.
	Grant(ctx context.Context, ttl time.Duration) (LeaseID, error)
}

// ClaimLedger is the part of the Ledger for the claims' keys: made, taken, dropped, watched.
type ClaimLedger interface {
	// Acquire makes the claim rec this node's under lease: it creates
	// the key when absent, binds it to lease when rec.Node holds it
	// under another lease (fresh then), and refuses with a *HeldError
	// when another node holds it. A key created or bound anew is recorded
	// in the history in the same transaction (store.ChangeClaim,
	// store.ChangeAdopt), as asked by who.
	Acquire(ctx context.Context, lease LeaseID, rec store.Claim, who store.Actor) (fresh bool, err error)
	// AcquireGroup acquires recs, the addresses of one group, as Acquire
	// does each, in one transaction: all are this node's after it, or
	// none (a *HeldError names one another node holds, a *GroupError one
	// in another group). fresh says which keys it created or bound.
	AcquireGroup(ctx context.Context, lease LeaseID, recs []store.Claim, who store.Actor) (fresh []bool, err error)
	// AcquireFree creates the keys of recs (at most store.MaxGroupAddrs)
	// under lease in one transaction, each recorded in the history as
	// Acquire records it, when every one of them is absent; when any is
	// not, it changes nothing and reports false, for the caller to
	// Acquire them one by one. The common claim, of addresses nobody
	// holds, is then one transaction for many addresses.
	AcquireFree(ctx context.Context, lease LeaseID, recs []store.Claim, who store.Actor) (bool, error)
	// Take creates the claim rec under lease if its key is absent and
	// the address's move is the one created at moveRev (0: none is under
	// way): a standby's takeover and a move's arrival, as cond says. A
	// standby's take (StandbyTake) also needs rec.Node's standby record
	// for the address (a standby removed since it looked takes nothing)
	// and rec.Node's cordon to be the one it read, so that a cordon
	// written since refuses it; a move's arrival (MoveArrival) compares
	// neither (its mover compared the cordon when it asked). It says
	// whether it did, and the store's revision then. A take records ch
	// in the history in its transaction, with rec's address, node and
	// interface.
	Take(ctx context.Context, lease LeaseID, rec store.Claim, moveRev int64, cond TakeCond, ch store.Change) (took bool, rev int64, err error)
	// TakeGroup takes recs, the addresses of one group, as Take does
	// each (moveRevs[i] for recs[i]), in one transaction: all or none.
	TakeGroup(ctx context.Context, lease LeaseID, recs []store.Claim, moveRevs []int64, cond TakeCond, ch store.Change) (took bool, rev int64, err error)
	// Release deletes a's claim if it is still bound to lease, and records
	// ch (a release) in the history in the same transaction.
	Release(ctx context.Context, lease LeaseID, a netip.Addr, ch store.Change) error
	// WatchGone watches a's claim from after rev, calling fn with the
	// owner's record (nil when the store did not say; a zero Claim with
	// its Lease when it did not decode) each time the key is deleted,
	// until the watch breaks or ctx is done; it returns the revision it
	// got to.
	WatchGone(ctx context.Context, a netip.Addr, rev int64, fn func(prev *store.Claim)) int64
	// PutLingering writes the node's counts after its releases
	// (store.Lingering) under lease.
	PutLingering(ctx context.Context, lease LeaseID, rec store.Lingering) error
}

// StandbyLedger is the part of the Ledger for the standby records, which no lease binds.
type StandbyLedger interface {
	// PutStandbys writes the standby records in one transaction, and returns
	// the store's revision then. No lease binds them: an address's
	// standbys are a set that lasts, through its owners' moves and
	// takeovers and its standbys' restarts, until dropped.
	PutStandbys(ctx context.Context, recs []store.Standby) (rev int64, err error)
	// DeleteStandby deletes node's standby record for a.
	DeleteStandby(ctx context.Context, a netip.Addr, node string) error
	// StandbyOf reads node's standby record for a (nil: none), and the
	// revision read.
	StandbyOf(ctx context.Context, a netip.Addr, node string) (*store.Standby, int64, error)
	// Standbys reads node's standby records (each with its Lease), and
	// the revision they were read at.
	Standbys(ctx context.Context, node string) ([]store.Standby, int64, error)
}

// CordonLedger is the part of the Ledger for a node's cordon, read and watched (`vip cordon` writes it, through store.Client).
type CordonLedger interface {
	// Cordon reads node's cordon (nil: none), and the revision read.
	Cordon(ctx context.Context, node string) (*store.Cordon, int64, error)
	// WatchCordon watches node's cordon from after rev, calling fn with
	// it each time it is written (nil when it is lifted), until the
	// watch breaks or ctx is done; it returns the revision it got to.
	WatchCordon(ctx context.Context, node string, rev int64, fn func(*store.Cordon)) int64
}

// MoveLedger is the part of the Ledger for moves: asked by a mover, handed over by the owner, taken and marked by the target.
type MoveLedger interface {
	// Ask writes the move record mv under lease, and tells the target
	// (mv.To) and the owner (mv.From, if any) in their inboxes, in one
	// transaction, if no move of the address is under way, its claim
	// is the one created at claimRev (0: none) and the target's cordon
	// the one last modified at cordonRev (0: none). It says whether it
	// did.
	// Several asks (the moves of one group's addresses) are written in
	// the one transaction, or none.
	Ask(ctx context.Context, lease LeaseID, asks []Asking) (bool, error)
	// Moves reads the move records of addrs (at most store.MaxReadsPerTxn) in
	// one transaction; an address with no record, or one that does not
	// decode, has none in the result.
	Moves(ctx context.Context, addrs []netip.Addr) ([]MoveRecord, error)
	// Inbox reads the addresses node's inbox tells of.
	Inbox(ctx context.Context, node string) ([]netip.Addr, error)
	// WatchInbox watches node's inbox from after rev, calling fn with the
	// addresses of each batch of puts, until the watch breaks or ctx is
	// done; it returns the revision it got to.
	WatchInbox(ctx context.Context, node string, rev int64, fn func(addrs []netip.Addr)) int64
	// HandOver deletes the claim of the move's address, if still bound
	// to lease, writes the move record (Released set by the caller) and
	// tells the target in its inbox, all in one transaction, if the move
	// is still the one read.
	// With r.Standby it writes that standby record too. It says whether
	// it did, and the store's revision then: false when the key is no
	// longer this lease's or the move record changed (the move was given
	// up).
	// With several records (the moves of one group's addresses) it hands
	// all of them over in the one transaction, or none.
	HandOver(ctx context.Context, lease LeaseID, rs []MoveRecord) (bool, int64, error)
	// MarkMove writes the move record as mv is now, if the move is still
	// the one created at rev; with done it then deletes the record, for
	// the mover's watch to see the end.
	MarkMove(ctx context.Context, mv store.Move, rev int64, done bool) error
	// WatchMoves sends, batch by batch from now on, every change of a
	// move record and every deletion of a claim, whichever addresses
	// they are of; a change may come twice after the watch broke. It
	// returns once the watch is in place: every change made after it
	// returns comes. The channel closes when ctx is done.
	WatchMoves(ctx context.Context) (<-chan []MoveChange, error)
	// MoveView reads what a move of addrs to the node called to needs
	// to plan, at one revision: that node and its cordon (none when to
	// is empty), each address's claim and move, and the nodes holding
	// them. It may return more (the whole fleet, when addrs are more
	// than one transaction reads).
	MoveView(ctx context.Context, addrs []netip.Addr, to string) (store.View, error)
}

// HistoryLedger is the part of the Ledger for the history, for the changes no other transaction records.
type HistoryLedger interface {
	// Record appends changes no transaction of the ledger made (a fence,
	// a resumption, a loss) to the history.
	Record(ctx context.Context, changes []store.Change) error
	// History reads the history of ownership as q asks, and the
	// revision read.
	History(ctx context.Context, q store.HistoryQuery) ([]store.Change, int64, error)
}

// NodeLedger is the part of the Ledger for the live nodes, and the failsafe sets that name them.
type NodeLedger interface {
	// Nodes reads the live nodes' records, and the revision read.
	Nodes(ctx context.Context) ([]store.Node, int64, error)
	// CountNodes counts the live nodes' records, reading none: whether
	// a read of them could find other nodes than the last.
	CountNodes(ctx context.Context) (int, error)
	// WatchNodes watches the nodes' records from after rev, calling fn
	// with the changes of each revision in order (those written, one
	// that does not decode Unreadable; those deleted, by name, their
	// CreateRev 0; and that revision), until the watch breaks or ctx is
	// done; it returns the revision it got to. A watch compacted past
	// changes it had not told calls fn with revision 0 first: they are
	// lost.
	WatchNodes(ctx context.Context, rev int64, fn func(put, gone []store.Node, rev int64)) int64
	// Reach reads one small key of node's (its record, counted only),
	// as linearizable as a take: whether the store answers this node now.
	Reach(ctx context.Context, node string) error
	// PutFailsafeSet writes the node's failsafe set, which no lease
	// binds (store.FailsafeSet), and returns the revision it wrote at;
	// only while the node's record is under the set's lease, else
	// ErrLeaseGone.
	PutFailsafeSet(ctx context.Context, rec store.FailsafeSet) (int64, error)
	// FailsafeSets reads every node's failsafe set (each with its
	// ModRev) and, if there is any, the live records (each with its
	// Lease and CreateRev) of their nodes and of self, all at the
	// revision it returns.
	FailsafeSets(ctx context.Context, self string) ([]store.FailsafeSet, []store.Node, int64, error)
	// ClearFailsafeSet deletes node's failsafe set if it is still the
	// one last modified at modRev, and says whether it did.
	ClearFailsafeSet(ctx context.Context, node string, modRev int64) (bool, error)
	// NodeAt returns the revision that node's record standing at
	// revision rev was created at, whichever of its agents wrote it (0:
	// none stood then); an error when the store no longer keeps rev
	// (compacted), or has not reached it.
	NodeAt(ctx context.Context, node string, rev int64) (int64, error)
	// Fleet reads the whole fleet.
	Fleet(ctx context.Context) (store.View, error)
	// ReadLeases adds to v what the store says of each live node's lease
	// (store.Client.ReadLeases), for the nodes' health.
	ReadLeases(ctx context.Context, v *store.View)
}
