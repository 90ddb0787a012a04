package fleet

import (
	"context"
	"errors"
	"fmt"
)

// guardTries bounds how often a take is tried again after
// ErrFailsafeChanged, each time on a fresh read of the sets.
const guardTries = 5

// guarded runs take, a transaction through the store under the guard ctx
// carries, and tries it again on a fresh read of the sets (waiting if one
// now holds the take and the guard says to) while it fails with
// ErrFailsafeChanged.
func guarded[T any](m *Member, ctx context.Context, take func(context.Context) (T, error)) (T, error) {
	for i := 0; ; i++ {
		v, err := take(ctx)
		if !errors.Is(err, ErrFailsafeChanged) {
			return v, err
		}
		if i+1 == guardTries {
			return v, fmt.Errorf("%w, %d times in a row: try again once the fleet has settled", err, guardTries)
		}
		m.log.Debug("failsafe: a set changed while this node took: reading them again", "err", err)
		g, _ := GuardOf(ctx)
		if ctx, err = m.readGuard(ctx, g.Wait, g.Rev); err != nil {
			return v, err
		}
	}
}
