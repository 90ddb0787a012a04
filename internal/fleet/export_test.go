package fleet

import "github.com/jonboulle/clockwork"

// Crash stops the member as kill -9 would: no release, no revoke, so its
// lease runs out in the store.
func (m *Member) Crash() {
	m.halt()
}

// NewTestMover returns a Mover over l, on clock.
func NewTestMover(l Ledger, clock clockwork.Clock) *Mover { return &Mover{l: l, clock: clock} }
