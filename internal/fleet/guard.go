package fleet

import (
	"context"
	"errors"
	"fmt"
)

// guardTries bounds how often a take is tried again after
// ErrFailsafeChanged, each time on a fresh read of the sets.
const guardTries = 8

// guarded runs take, a transaction through the store under the guard ctx
// carries, and tries it again on a fresh read of the sets (waiting if one
// now holds the take and the guard says to) while it fails with
// ErrFailsafeChanged. From the third try on it waits first, a sixteenth of
// a renewal period, then twice as long each time up to one: the owners
// write their sets in bursts (a fleet joining: each names every newcomer,
// within a renewal period of the last), and a take in one fails on every
// set written between its read and its transaction.
func guarded[T any](m *Member, ctx context.Context, take func(context.Context) (T, error)) (T, error) {
	pause := m.timing.Renew / 16
	for i := 0; ; i++ {
		v, err := take(ctx)
		if !errors.Is(err, ErrFailsafeChanged) {
			return v, err
		}
		if i+1 == guardTries {
			return v, fmt.Errorf("%w, %d times in a row: try again once the fleet has settled", err, guardTries)
		}
		m.log.Debug("failsafe: a set changed while this node took: reading them again", "err", err)
		if i > 0 {
			select {
			case <-ctx.Done():
				return v, fmt.Errorf("%w: %w", err, ctx.Err())
			case <-m.clock.After(pause):
			}
			pause = min(2*pause, m.timing.Renew)
		}
		g, _ := GuardOf(ctx)
		if ctx, err = m.readGuard(ctx, g.Wait, g.Rev); err != nil {
			return v, err
		}
	}
}
