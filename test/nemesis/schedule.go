package nemesis

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault, or an operator's action the nemesis takes.
type Kind uint8

// The faults, then the operator's actions. Each fault targets the current
// owner (read from the store) unless it hits the store itself.
const (
	// FreezeShort stops the owner's agent with SIGSTOP for less than the
	// lease's TTL, then SIGCONT.
	FreezeShort Kind = iota + 1
	// FreezeLong stops it for longer than the TTL: its lease expires.
	FreezeLong
	// Kill kills the owner's agent with SIGKILL; it is started again only
	// once a standby holds its addresses.
	Kill
	// KillRestart kills it and starts a new agent of the same node, on the
	// same socket and state, at once, within the dead one's lease.
	KillRestart
	// CutStore cuts the owner off from every etcd member, and only them.
	CutStore
	// CutClient cuts the owner off from the probing client only.
	CutClient
	// CutAll cuts the owner's port off the segment: nothing in or out.
	CutAll
	// LeaderKill kills the etcd leader with SIGKILL and restarts it.
	LeaderKill
	// StoreDown stops every etcd member for longer than the TTL, then
	// starts them again on their data.
	StoreDown
	// TermRestart stops the owner's agent with SIGTERM (as systemctl
	// restart does; a guarded agent keeps its claims for a restart) and
	// starts it again at once.
	TermRestart
	// Term stops it with SIGTERM and starts it again only once a standby
	// holds its addresses, past its lease.
	Term
	// SlowStore slows every agent's round trip to the store (both ways
	// through a relay), for longer than the TTL, but less than the
	// longest round trip the TTL survives: no owner may fence.
	SlowStore
	// Move is `vip move ADDR... --to NODE` to a node that does not own it.
	Move
	// TakeOver is `vip claim ADDR... --take-over` on a node that does not
	// own it.
	TakeOver
	// ReleaseClaim is `vip release` on the owner, then `vip claim` on a
	// node picked at random: the address is free in between, on purpose.
	ReleaseClaim
	// StoreFrozen stops every etcd member with SIGSTOP for longer than
	// the TTL, then SIGCONT: a hung store, which answers no one and
	// closes no connection. Thawed, etcd expires every lease at once.
	StoreFrozen
	// QuorumLost stops two of the three etcd members for longer than the
	// TTL, then starts them again: the one left answers no request.
	QuorumLost
	// OutageAckCut freezes the store, and a TTL into the outage, once
	// the owner answers on failsafe, cuts a node of its failsafe set (one
	// that acknowledges it) off the segment: the owner must fall silent
	// within that node's last promise, and stay silent until the store is
	// back.
	OutageAckCut
)

// Faults lists the faults, Actions the operator's actions.
var (
	faults  = []Kind{FreezeShort, FreezeLong, Kill, KillRestart, CutStore, CutClient, CutAll, LeaderKill, StoreDown, TermRestart, Term, SlowStore, StoreFrozen, QuorumLost, OutageAckCut}
	actions = []Kind{Move, TakeOver, ReleaseClaim}
)

// Faults returns every fault kind, in order.
func Faults() []Kind { return append([]Kind(nil), faults...) }

// Actions returns every operator action, in order.
func Actions() []Kind { return append([]Kind(nil), actions...) }

// All returns every kind, faults first.
func All() []Kind { return append(Faults(), actions...) }

// IsAction reports whether k is an operator's action rather than a fault.
func (k Kind) IsAction() bool { return k >= Move && k <= ReleaseClaim }

// StoreWide reports whether k takes the whole store away from every node:
// no node can take an address over until it is back, so the owner must
// keep answering (on failsafe), unless a node of its set is unreachable
// too.
func (k Kind) StoreWide() bool {
	return k == StoreDown || k == StoreFrozen || k == QuorumLost || k == OutageAckCut
}

// String names the kind as the report's table does.
func (k Kind) String() string {
	switch k {
	case FreezeShort:
		return "SIGSTOP < TTL"
	case FreezeLong:
		return "SIGSTOP > TTL"
	case Kill:
		return "kill -9, restart later"
	case KillRestart:
		return "kill -9, restart at once"
	case CutStore:
		return "owner cut off from the store"
	case CutClient:
		return "owner cut off from the client"
	case CutAll:
		return "owner cut off from everything"
	case LeaderKill:
		return "etcd leader killed"
	case StoreDown:
		return "all of etcd down > TTL"
	case TermRestart:
		return "SIGTERM, restart at once"
	case Term:
		return "SIGTERM, restart later"
	case SlowStore:
		return "store slow > TTL"
	case Move:
		return "vip move"
	case TakeOver:
		return "claim --take-over"
	case ReleaseClaim:
		return "release, then claim"
	case StoreFrozen:
		return "all of etcd frozen > TTL"
	case QuorumLost:
		return "etcd quorum lost > TTL"
	case OutageAckCut:
		return "store out, an acknowledger cut off"
	case 0:
		return "none"
	}
	return fmt.Sprintf("kind %d", k)
}

// Step is one entry of a schedule: a fault (or action) held for Hold, and,
// when During is set, an operator's action run After into the hold.
type Step struct {
	Kind   Kind
	Hold   time.Duration
	During Kind
	After  time.Duration
	// Pick chooses among candidates where the step needs a choice (the
	// node a move goes to, the node that claims after a release), so
	// that the seed decides it too.
	Pick uint32
}

// Plan says what a schedule is made of.
type Plan struct {
	Seed int64
	// Steps is how many steps to make; every kind in Kinds comes once
	// before any comes twice, so a plan of len(Kinds) steps or more
	// covers them all.
	Steps int
	Kinds []Kind
	// TTL is the agents' lease TTL: holds are drawn relative to it.
	TTL time.Duration
	// DuringOdds is the chance, from 0 to 1, that a fault gets an action
	// in its middle.
	DuringOdds float64
}

// Schedule returns the steps of p, the same for the same plan. The kinds
// come in shuffled rounds, each round a permutation of p.Kinds.
func Schedule(p Plan) ([]Step, error) {
	if len(p.Kinds) == 0 || p.Steps <= 0 || p.TTL <= 0 {
		return nil, fmt.Errorf("schedule of %d steps over %d kinds with TTL %v: want steps, kinds and a TTL", p.Steps, len(p.Kinds), p.TTL)
	}
	if p.DuringOdds < 0 || p.DuringOdds > 1 {
		return nil, fmt.Errorf("schedule: odds of an action during a fault %v: want 0 to 1", p.DuringOdds)
	}
	r := rand.New(rand.NewPCG(uint64(p.Seed), uint64(p.Seed)>>32^0x9e3779b97f4a7c15))
	var out []Step
	for len(out) < p.Steps {
		round := append([]Kind(nil), p.Kinds...)
		r.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		for _, k := range round {
			if len(out) == p.Steps {
				break
			}
			s := Step{Kind: k, Hold: hold(r, k, p.TTL), Pick: r.Uint32()}
			// No action during a store-wide outage: each fails at the
			// store, and one that released an address on purpose would
			// leave it free until the store is back.
			if !k.IsAction() && !k.StoreWide() && s.Hold > 0 && r.Float64() < p.DuringOdds {
				s.During = actions[r.IntN(len(actions))]
				s.After = time.Duration(r.Int64N(int64(s.Hold)))
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// between draws a duration in [lo, hi), to the millisecond.
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return (lo + time.Duration(r.Int64N(int64(hi-lo)))).Truncate(time.Millisecond)
}

// hold draws how long a fault lasts: a freeze short of the TTL stays
// under the fence delay's worst case; one past it, a cut from the store and
// the store down last past the TTL, so the lease can expire.
func hold(r *rand.Rand, k Kind, ttl time.Duration) time.Duration {
	switch k {
	case FreezeShort:
		return between(r, ttl/4, ttl*3/4)
	case FreezeLong:
		return between(r, ttl+time.Second, 2*ttl+time.Second)
	case CutStore, CutAll, StoreDown, SlowStore, StoreFrozen, QuorumLost:
		return between(r, ttl+time.Second, 2*ttl)
	case OutageAckCut:
		// A TTL before the cut, then time for the promise to run out
		// and the silence to show.
		return between(r, 2*ttl+time.Second, 3*ttl)
	case CutClient:
		return between(r, time.Second, ttl)
	case LeaderKill:
		return between(r, time.Second, ttl)
	}
	// Kill and Term wait for the standby; the actions take what they take.
	return 0
}

// names are the kinds' short names, for VIP_NEMESIS_KINDS.
var names = map[string]Kind{
	"freeze-short": FreezeShort, "freeze-long": FreezeLong, "kill": Kill, "kill-restart": KillRestart,
	"cut-store": CutStore, "cut-client": CutClient, "cut-all": CutAll, "leader-kill": LeaderKill,
	"store-down": StoreDown, "term-restart": TermRestart, "term": Term, "slow-store": SlowStore, "store-frozen": StoreFrozen, "quorum-lost": QuorumLost, "outage-ack-cut": OutageAckCut, "move": Move, "take-over": TakeOver, "release-claim": ReleaseClaim,
}

// ParseKinds reads a comma-separated list of short names, such as
// "freeze-long,kill".
func ParseKinds(s string) ([]Kind, error) {
	var ks []Kind
	for _, n := range strings.Split(s, ",") {
		k, ok := names[strings.TrimSpace(n)]
		if !ok {
			known := slices.Sorted(maps.Keys(names))
			return nil, fmt.Errorf("fault kind %q: want one of %s", n, strings.Join(known, ", "))
		}
		ks = append(ks, k)
	}
	return ks, nil
}
