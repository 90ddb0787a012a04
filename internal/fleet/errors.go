package fleet

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
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
