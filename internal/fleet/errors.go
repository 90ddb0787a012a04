package fleet

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/store"
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

// ErrFenced refuses what a fenced agent is asked to do.
var ErrFenced = errors.New("this agent is fenced: it cannot renew its lease in the store")

// fencedError says since when, and what to do.
func fencedError(since time.Time) error {
	return fmt.Errorf("%w since %s, so it claims nothing until the store is back: check the store and the network to it", ErrFenced, since.Local().Format("15:04:05"))
}

// ErrOwnAddress refuses a guarded claim of an address the host's own
// interface already has: its kernel answers for it whatever vip does, so a
// move or a standby's takeover could never make the other node its only
// owner.
var ErrOwnAddress = errors.New("an address of this host's own interface")

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

// Is makes a GroupError a refusal of the input (store.ErrRefused's kind).
func (e *GroupError) Is(target error) bool { return target == store.ErrRefused }

// MaxGroupAddrs bounds the addresses of one group, which are taken, moved
// and handed over in one transaction: a hand-over has the most operations
// an address, four (its claim deleted, its move record, the target's
// notice, the old owner's standby record).
const MaxGroupAddrs = store.MaxTxnOps / handOverOps

// handOverOps are the operations of one address in HandOver.
const handOverOps = 4
