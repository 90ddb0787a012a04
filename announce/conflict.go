package announce

import (
	"context"
	"fmt"
	"github.com/vipctl/vip/internal/event"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// ConflictPolicy says what a claim does when another MAC answers for its
// address.
type ConflictPolicy string

// The conflict policies.
const (
	// PolicyDefend re-arms the gratuitous window, at most once per
	// DefendInterval, so that two defenders cannot start a storm.
	PolicyDefend ConflictPolicy = "defend"
	// PolicyWarn only reports the competing claimer.
	PolicyWarn ConflictPolicy = "warn"
	// PolicyYield releases the address to the other claimer.
	PolicyYield ConflictPolicy = "yield"
)

// ParseConflictPolicy parses defend, warn or yield.
func ParseConflictPolicy(s string) (ConflictPolicy, error) {
	switch p := ConflictPolicy(s); p {
	case PolicyDefend, PolicyWarn, PolicyYield:
		return p, nil
	case "":
		return PolicyDefend, nil
	}
	return "", fmt.Errorf("unknown conflict policy %q: use defend, warn or yield", s)
}

// Timing of conflict handling, from RFC 5227.
const (
	// DefendInterval is the least time between two defences of an address.
	DefendInterval = 10 * time.Second
	// ConflictHold is how long a claim stays in state conflict after a
	// competing claimer was last seen.
	ConflictHold = 10 * time.Second
	// DefaultProbeEvery is the period of the probes for silent claimers.
	DefaultProbeEvery = 10 * time.Second
	// maxClaimers bounds the competing claimers remembered per address.
	maxClaimers = 16
)

// Claimer is another MAC answering for a held address.
type Claimer struct {
	MAC       net.HardwareAddr `json:"mac"`
	Kind      string           `json:"kind"`
	FirstSeen time.Time        `json:"first_seen"`
	LastSeen  time.Time        `json:"last_seen"`
	Count     uint64           `json:"count"`
}

// Conflict reports that mac, not ours, answered for addr (RFC 5227 section
// 2.4): frame kind, when it was first and last seen, and how often. The
// claim then follows its policy: defend re-arms its window (at most once per
// DefendInterval), yield releases it, warn only reports. Reports for an
// address not held, or from one of our own MACs, are ignored.
func (e *Engine) Conflict(addr netip.Addr, c Claimer) {
	e.mu.Lock()
	cs, ok := e.claims[addr]
	if !ok || (cs.port != nil && sameMAC(cs.port.MAC(), c.MAC)) {
		e.mu.Unlock()
		return
	}
	key := c.MAC.String()
	e.totals.conflicts.Add(1)
	seen := c.Count
	if old, ok := cs.claimers[key]; ok {
		if c.FirstSeen.IsZero() || old.FirstSeen.Before(c.FirstSeen) {
			c.FirstSeen = old.FirstSeen
		}
		if c.Count >= old.Count {
			seen = c.Count - old.Count // the detector's count is its running total
		}
	} else if len(cs.claimers) >= maxClaimers {
		e.dropOldestClaimerLocked(cs)
	}
	e.totals.claimerFrames.Add(seen)
	cs.claimers[key] = &c
	policy := cs.claim.Options.OnConflict
	if policy == "" {
		policy = PolicyDefend
	}
	e.log.Warn("competing claimer", "addr", addr, "interface", cs.claim.Interface, "mac", key, "kind", c.Kind, "count", c.Count, "policy", string(policy))
	e.publish(Event{Kind: EventConflict, Addr: addr, Interface: cs.claim.Interface, MAC: key, State: api.StateConflict, Count: int(c.Count),
		Message: fmt.Sprintf("%s also answers for %s (%s, seen %d times): %s", key, addr, c.Kind, c.Count, policy)})
	now := e.clock.Now()
	switch policy {
	case PolicyDefend:
		if cs.live() && (cs.lastDefend.IsZero() || now.Sub(cs.lastDefend) >= DefendInterval) {
			cs.lastDefend = now
			e.log.Info("defending: gratuitous window re-armed", "addr", addr)
			e.arm(cs)
		}
		e.mu.Unlock()
	case PolicyYield:
		iface := cs.claim.Interface
		e.mu.Unlock()
		e.log.Warn("yielding the address to the competing claimer", "addr", addr, "mac", key)
		released, _, err := e.Release(context.Background(), []netip.Addr{addr})
		if err != nil || len(released) == 0 {
			e.log.Error("yield: the address could not be released", "addr", addr, "err", err)
			return
		}
		e.publish(Event{Kind: EventConflict, Addr: addr, Interface: iface, MAC: key, From: event.StateOwner, To: event.StateNone, Peer: key, Reason: event.ReasonYielded, Message: "yielded: released to " + key})
		e.selfReleased(released, "yielded to the competing claimer "+key)
	default:
		e.mu.Unlock()
	}
}

func (e *Engine) dropOldestClaimerLocked(cs *claimState) {
	var oldest string
	for k, c := range cs.claimers {
		if oldest == "" || c.LastSeen.Before(cs.claimers[oldest].LastSeen) {
			oldest = k
		}
	}
	delete(cs.claimers, oldest)
}

// claimersLocked lists a claim's competing claimers, most recent first,
// and whether any was seen within ConflictHold.
func (e *Engine) claimersLocked(cs *claimState) ([]Claimer, bool) {
	if len(cs.claimers) == 0 {
		return nil, false
	}
	now := e.clock.Now()
	out := make([]Claimer, 0, len(cs.claimers))
	recent := false
	for _, c := range cs.claimers {
		out = append(out, *c)
		if now.Sub(c.LastSeen) < ConflictHold {
			recent = true
		}
	}
	slices.SortFunc(out, func(a, b Claimer) int { return b.LastSeen.Compare(a.LastSeen) })
	return out, recent
}
