package fleet

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
)

// The answer deadline as the member keeps it (announce.Deadline: checked
// where frames leave), and what it tells of it: the frames withheld past
// it, and a stall past it once the member runs again.

// moveDeadline moves the answer deadline to FenceAfter, and alone more
// (aloneAfter), past sent, the send time of a grant or renewal the store
// acknowledged, on the Deadline's clock. A deadline it replaces after it
// had passed (or was closed) is kept for reportWithheld: the frames
// withheld for it are reported after the move, when the Deadline no
// longer knows it.
func (m *Member) moveDeadline(sent, alone time.Duration) {
	if at, now := m.cfg.Deadline.At(); at <= now {
		m.mu.Lock()
		m.passed = at
		m.mu.Unlock()
	}
	if err := m.cfg.Deadline.Set(sent + m.timing.FenceAfter() + alone); err != nil {
		m.log.Error("move the answer deadline: the responders keep the older one and fall silent at it", "err", err)
	}
	m.failsafeRenewed(sent)
}

// reportWithheld says, in an event, how many frames were withheld for a
// past deadline since it last did, and which deadline that was: the one
// in force if it has passed, else the one the last renewal replaced.
func (m *Member) reportWithheld() {
	n := m.cfg.Deadline.Withheld()
	at, now := m.cfg.Deadline.At()
	wall := m.clock.Now()
	m.mu.Lock()
	if n < m.withheldSeen {
		// A count that could not be read (a map gone with its
		// interface): the next read that can says the rest.
		m.mu.Unlock()
		return
	}
	fresh := n - m.withheldSeen
	m.withheldSeen = n
	if at > now {
		at = m.passed
	}
	m.mu.Unlock()
	if fresh == 0 {
		return
	}
	frames := fmt.Sprintf("withheld %d frames (answers, gratuitous rounds, probes)", fresh)
	var msg, when string
	if at == announce.ClosedAt {
		// A closed deadline (a fence, or no lease acknowledged yet)
		// did not pass at any time worth showing.
		when = "closed"
		msg = frames + ": the answer deadline was closed (fenced, or no lease acknowledged yet) until the store acknowledged a renewal"
	} else {
		// The deadline is a reading of CLOCK_BOOTTIME: the wall clock
		// it corresponds to is now's, less how long ago it passed on
		// the Deadline's own clock.
		when = wall.Add(at - now).Local().Format("15:04:05.000")
		msg = frames + ": the answer deadline of this agent's lease passed at " + when + " with no renewal acknowledged"
	}
	m.log.Warn("frames withheld: the answer deadline had passed", "frames", fresh, "deadline", when)
	m.eng.Notify(announce.Event{Kind: event.Withheld, Count: int(min(fresh, 1<<31-1)), Message: msg})
}

// reportStall tells, in one event, what a stall past the deadline came
// to once the resumption after it is done: how long the agent did not
// run, whether its lease had expired, and who holds what it had.
func (m *Member) reportStall(leaseLost bool, resumed int, lost map[netip.Addr]string) {
	m.mu.Lock()
	gap := m.stalled
	m.stalled = 0
	m.mu.Unlock()
	if gap == 0 {
		return
	}
	lease := "its lease was still alive in the store"
	if leaseLost {
		lease = "its lease had expired in the store"
	}
	msg := fmt.Sprintf("this agent did not run for %s (frozen or starved), past its answer deadline, so it answered nothing meanwhile; %s", gap.Round(time.Millisecond), lease)
	if len(lost) > 0 {
		addrs := make([]netip.Addr, 0, len(lost))
		for a := range lost {
			addrs = append(addrs, a)
		}
		slices.SortFunc(addrs, netip.Addr.Compare)
		held := make([]string, len(addrs))
		for i, a := range addrs {
			held[i] = a.String() + " is " + lost[a] + "'s"
		}
		msg += "; " + strings.Join(held, ", ") + " now: it stays silent for them"
	}
	if resumed > 0 {
		msg += fmt.Sprintf("; %d claims still this node's resumed with a fresh burst", resumed)
	}
	m.log.Warn("after a stall", "for", gap.Round(time.Millisecond), "lease_lost", leaseLost, "lost", len(lost), "resumed", resumed)
	m.eng.Notify(announce.Event{Kind: event.Stall, State: "stalled", Count: len(lost), Message: msg})
}
