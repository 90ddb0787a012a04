package api

import (
	"fmt"
	"math"
)

// Summary is the move's timeline in one line, in milliseconds since it was
// asked, as vip move and the live view print it. A failed move's line is
// its Error.
func (m MoveResult) Summary() string {
	switch {
	case !m.OK:
		return fmt.Sprintf("%s not moved to %s: %s", m.Addr, m.To, m.Error)
	case m.Already:
		return fmt.Sprintf("%s is on %s (%s) already: nothing changed", m.Addr, m.To, m.Interface)
	case m.Unheld:
		return fmt.Sprintf("nobody held %s: claimed on %s (%s), live +%s", m.Addr, m.To, m.Interface, millis(m.LiveMS))
	}
	released := fmt.Sprintf("released by %s +%s", m.From, millis(m.ReleasedMS))
	if m.Waited {
		released = fmt.Sprintf("waited %s for %s's lease to expire (it did not answer)", millis(m.ReleasedMS), m.From)
	}
	return fmt.Sprintf("moved %s from %s to %s (%s): asked, %s, live on %s +%s", m.Addr, m.From, m.To, m.Interface, released, m.To, millis(m.LiveMS))
}

// millis writes milliseconds as whole ones, such as "12 ms".
func millis(v float64) string { return fmt.Sprintf("%d ms", int64(math.Round(max(v, 0)))) }
