package store

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// LeaseID names a lease in the
type LeaseID int64

// ErrLeaseGone is the store's word that a lease no longer exists: it
// expired or was revoked, and every key bound to it went with it.
var ErrLeaseGone = errors.New("the store no longer has the lease")

// MoveRecord is a move as read from the store, with what a transaction on
// it compares and binds: the record's creation revision (one move of an
// address is told from the next by it) and the mover's lease, under which
// the owner tells the target it let go.
type MoveRecord struct {
	Move Move
	Rev  int64
	// ModRev is the record's last write: the owner's hand-over writes
	// Released into it, so a target that took the address on an older
	// copy would record a move with no release (MoveArrival compares it).
	ModRev int64
	Lease  LeaseID
	// Standby, when set, is the owner's standby record that HandOver
	// writes with the hand-over: the old owner stands by in the
	// target's place.
	Standby *Standby
}

// TakeCond is whose take a Ledger.Take is, and so what its transaction
// compares besides a free key and the address's move.
type TakeCond struct {
	arrival   bool
	cordonRev int64
	// moveModRev, for an arrival, is the move record's last write as the
	// target read it (0: not compared).
	moveModRev int64
}

// StandbyTake is a standby's take, on its node's cordon as it read it:
// last modified at cordonRev (0: none).
func StandbyTake(cordonRev int64) TakeCond { return TakeCond{cordonRev: cordonRev} }

// MoveArrival is a move's target taking the address the move brings, on
// the move's record as it read it, last written at modRev (0: any): a
// record the owner wrote since (its release) fails the take, so that the
// take's history record carries the release the target had not read.
func MoveArrival(modRev int64) TakeCond { return TakeCond{arrival: true, moveModRev: modRev} }

// MoveModRev is, for an arrival, the move record's last write it compares
// (0: none).
func (c TakeCond) MoveModRev() int64 { return c.moveModRev }

// Standby says whether the take is a standby's, and the revision of the
// cordon it read.
func (c TakeCond) Standby() (cordonRev int64, ok bool) { return c.cordonRev, !c.arrival }

// Asking is one move a mover asks for (Ledger.Ask): its record, and the
// revisions of the claim (0: none) and of the target's cordon (0: none)
// it was planned on.
type Asking struct {
	Move                Move
	ClaimRev, CordonRev int64
}

// MoveChange is a change of the store that a move turns on.
type MoveChange struct {
	Kind MoveChangeKind
	Addr netip.Addr
	// Move is the record as written, for MoveWritten.
	Move Move
}

// MoveChangeKind says what changed.
type MoveChangeKind int

const (
	// MoveWritten: the move record was written (asked, released, live,
	// failed, counted).
	MoveWritten MoveChangeKind = iota
	// MoveDeleted: the move record is gone: the target ended the move,
	// or the mover's lease went.
	MoveDeleted
	// ClaimDeleted: the address's claim was deleted: its owner let go,
	// or its lease expired.
	ClaimDeleted
)

// HeldError refuses a claim of an address another node holds.
type HeldError struct {
	Addr  netip.Addr
	Node  string
	Since time.Time
	// Self is this agent's node name, for the advice.
	Self string
}

func (e *HeldError) Error() string {
	since := ""
	if !e.Since.IsZero() {
		since = fmt.Sprintf(" since %s (%s ago)", e.Since.Local().Format("2006-01-02 15:04:05"), time.Since(e.Since).Round(time.Second))
	}
	return fmt.Sprintf("%s is held by node %s%s: move it here with \"vip move %s --to %s\", or take it with \"vip claim %s --take-over\"",
		e.Addr, e.Node, since, e.Addr, e.Self, e.Addr)
}

// GroupError refuses to put an address of one group in another: an
// address is in one group at most, until it is released.
type GroupError struct {
	Addr      netip.Addr
	Group     string // the group it is in
	Requested string // the group asked for ("" for none)
}

func (e *GroupError) Error() string {
	if e.Requested == "" {
		return fmt.Sprintf("%s is in group %s in the store: claim it with --group %s, or release the group first (vip release --group %s)", e.Addr, e.Group, e.Group, e.Group)
	}
	return fmt.Sprintf("%s is in group %s in the store, not %s: an address is in one group at most; release it first (vip release --group %s)", e.Addr, e.Group, e.Requested, e.Group)
}

// Is makes a GroupError a refusal of the input (ErrRefused's kind).
func (e *GroupError) Is(target error) bool { return target == ErrRefused }

// MaxGroupAddrs bounds the addresses of one group, which are taken, moved
// and handed over in one transaction: a hand-over has four operations an
// address (its claim deleted, its move record, the target's notice, the
// old owner's standby record), a take as many (its claim, and the
// history's record with its copies for the two nodes).
const MaxGroupAddrs = MaxTxnOps / max(handOverOps, 1+MaxHistoryOps)

// handOverOps are the operations of one address in HandOver.
const handOverOps = 4
