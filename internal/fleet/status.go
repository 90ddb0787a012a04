package fleet

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// Status returns the engine's claims and, beside them, the claims this
// member keeps out of the engine: fenced, lost to another node, standby.
func (m *Member) Status(addrs ...netip.Addr) []announce.Status {
	st := m.eng.Status(addrs...)
	want := func(a netip.Addr) bool { return len(addrs) == 0 || slices.Contains(addrs, a) }
	m.mu.Lock()
	m.claims.in(func(a netip.Addr, e *claimEntry) {
		switch {
		case !want(a):
		case e.place == event.StateFenced:
			st = append(st, announce.Status{Claim: e.owned.claim, MAC: e.owned.mac, State: api.StateFenced})
		default:
			st = append(st, announce.Status{Claim: e.lost.claim, State: api.StateLost})
		}
	}, event.StateFenced, event.StateLost)
	m.claims.standbys(func(s store.Standby) {
		if want(s.Addr) && m.standbyOnlyLocked(s.Addr) {
			var opts announce.ClaimOptions
			_ = json.Unmarshal(s.Options, &opts)
			st = append(st, announce.Status{Claim: announce.Claim{Addr: s.Addr, Interface: s.Interface, ClaimedAt: s.Since, Options: opts}, State: api.StateStandby})
		}
	})
	m.mu.Unlock()
	slices.SortStableFunc(st, func(x, y announce.Status) int { return x.Addr.Compare(y.Addr) })
	return st
}

// Kept counts the claims the member keeps out of the engine, by state,
// for the metrics: no status of every claim is read for them.
func (m *Member) Kept() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	standby := 0
	m.claims.standbys(func(s store.Standby) {
		if m.standbyOnlyLocked(s.Addr) {
			standby++
		}
	})
	return map[string]int{api.StateFenced: m.claims.count(event.StateFenced), api.StateLost: m.claims.count(event.StateLost), api.StateStandby: standby}
}

// Notes says, for the claims that need it, what the store says of them:
// who took a lost claim, whom a standby waits on, since when a claim is
// fenced.
func (m *Member) Notes() map[netip.Addr]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[netip.Addr]string{}
	for _, a := range m.claims.addrs(event.StateFenced) {
		out[a] = fmt.Sprintf("fenced since %s: the store is unreachable", m.fencedAt.Local().Format("15:04:05"))
	}
	m.claims.in(func(a netip.Addr, e *claimEntry) {
		l := e.lost
		// Both times: when the other node took it (its claim's), and
		// when this one, fenced, found it gone.
		took := ""
		if !l.taken.IsZero() {
			took = fmt.Sprintf(", which took it at %s", l.taken.Local().Format("15:04:05"))
		}
		out[a] = fmt.Sprintf("lost to %s%s; found at %s, when this node's fence lifted", l.to, took, l.at.Local().Format("15:04:05"))
	}, event.StateLost)
	m.claims.standbys(func(s store.Standby) {
		if m.standbyOnlyLocked(s.Addr) {
			out[s.Addr] = "standby: takes the address if its owner's lease expires"
		}
	})
	return out
}
