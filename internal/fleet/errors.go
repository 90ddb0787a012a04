package fleet

import (
	"errors"
	"fmt"
	"time"
)

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

// isGroupRefusal reports whether err refuses a group's claim as a whole:
// an address held by another node or in another group.
func isGroupRefusal(err error) bool {
	return errors.As(err, new(*HeldError)) || errors.As(err, new(*GroupError))
}
