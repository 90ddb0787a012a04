package api

import (
	"fmt"
	"math"
	"time"
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
		return fmt.Sprintf("nobody held %s: claimed on %s (%s), live +%s%s", m.Addr, m.To, m.Interface, millis(m.LiveMS), m.trafficSummary())
	}
	released := fmt.Sprintf("released by %s +%s", m.From, millis(m.ReleasedMS))
	if m.Waited {
		released = fmt.Sprintf("waited %s for %s's lease to expire (it did not answer)", millis(m.ReleasedMS), m.From)
	}
	taken := ""
	if m.TakenMS != nil {
		taken = fmt.Sprintf("taken by %s +%s, ", m.To, millis(m.TakenMS))
	}
	return fmt.Sprintf("moved %s from %s to %s (%s): asked, %s, %slive on %s +%s%s", m.Addr, m.From, m.To, m.Interface, released, taken, m.To, millis(m.LiveMS), m.trafficSummary())
}

// trafficSummary says what arrived at the target after the move, when the
// move counted it.
func (m MoveResult) trafficSummary() string {
	t := m.Traffic
	switch {
	case t == nil:
		return ""
	case !t.Counted:
		return fmt.Sprintf("; traffic not counted on %s (it answers on sockets)", m.To)
	}
	return fmt.Sprintf("; then %d packets (%d bytes) arrived for it on %s in %s", t.Packets, t.Bytes, m.To, time.Duration(t.Window))
}

// millis writes milliseconds as whole ones, such as "12 ms"; a step that
// did not happen reads "-".
func millis(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%d ms", int64(math.Round(max(*v, 0))))
}

// Millis is a step of a move's timeline, d after it was asked, as
// MoveResult holds it.
func Millis(d time.Duration) *float64 {
	v := float64(d.Microseconds()) / 1000
	return &v
}
