package fleet

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vip/internal/store"
)

// DrainPlan is where each address a drained node holds goes.
type DrainPlan struct {
	// To is each address's target, by address.
	To map[netip.Addr]string
	// Nowhere are the addresses with no target: no --to, and no standby
	// that is live and not cordoned.
	Nowhere []netip.Addr
}

// Targets returns the plan's addresses by target, targets sorted.
func (p DrainPlan) Targets() (targets []string, addrs map[string][]netip.Addr) {
	addrs = map[string][]netip.Addr{}
	for a, to := range p.To {
		addrs[to] = append(addrs[to], a)
	}
	for to := range addrs {
		slices.SortFunc(addrs[to], netip.Addr.Compare)
		targets = append(targets, to)
	}
	slices.Sort(targets)
	return targets, addrs
}

// PlanDrain says where each address node holds in v goes: to to when it is
// given, else to the first of its standbys (by name) that is live and not
// cordoned at now. It refuses a to that cannot take them (node itself, not
// live, or cordoned unless force), with one sentence.
func PlanDrain(v store.View, node, to string, force bool, now time.Time) (DrainPlan, error) {
	usable := func(n string) bool {
		if _, live := v.NodeByName(n); !live || n == node {
			return false
		}
		c, ok := v.CordonOf(n)
		return !ok || !c.Active(now)
	}
	if to != "" {
		switch _, live := v.NodeByName(to); {
		case to == node:
			return DrainPlan{}, fmt.Errorf("--to %s is the node drained: name another node", to)
		case !live:
			return DrainPlan{}, fmt.Errorf("--to %s is not alive in the store (live nodes: %s): name a live node", to, liveNames(v))
		}
		if c, ok := v.CordonOf(to); ok && c.Active(now) && !force {
			return DrainPlan{}, fmt.Errorf("--to %s: %s: name another node, uncordon it, or give --force", to, c.Describe(now))
		}
	}
	p := DrainPlan{To: map[netip.Addr]string{}}
	// A group goes whole to one node: one that stands by for every
	// address of it.
	groupStandbys := map[string]map[string]int{}
	groupSize := map[string]int{}
	for _, cv := range v.Claims {
		if g := cv.Claim.Group; g != "" && cv.Claim.Node == node {
			if groupStandbys[g] == nil {
				groupStandbys[g] = map[string]int{}
			}
			groupSize[g]++
			for _, s := range cv.Standbys {
				groupStandbys[g][s.Node]++
			}
		}
	}
	for _, cv := range v.Claims {
		if cv.Claim.Node != node {
			continue
		}
		a := cv.Claim.Addr
		if to != "" {
			p.To[a] = to
			continue
		}
		var names []string
		if g := cv.Claim.Group; g != "" {
			for n, k := range groupStandbys[g] {
				if k == groupSize[g] {
					names = append(names, n)
				}
			}
		} else {
			for _, s := range cv.Standbys {
				names = append(names, s.Node)
			}
		}
		slices.Sort(names)
		if i := slices.IndexFunc(names, usable); i >= 0 {
			p.To[a] = names[i]
		} else {
			p.Nowhere = append(p.Nowhere, a)
		}
	}
	slices.SortFunc(p.Nowhere, netip.Addr.Compare)
	return p, nil
}

func liveNames(v store.View) string {
	var names []string
	for _, n := range v.Nodes {
		names = append(names, n.Node)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Quiet follows the traffic that still reaches a drained node for the
// addresses it let go, as its Lingering records tell, in the drainer's
// clock: an address is quiet once no new packet for it was counted for
// the wanted time since it was released or since the count last grew.
// The node writes its record at most once a second, so a packet is seen
// up to that late. An address the node stops counting (its record drops
// it, or starts it again: the agent restarted, or released it anew) is
// never quiet: Lost.
type Quiet struct {
	want  time.Duration
	addrs map[netip.Addr]*QuietAddr
	// formers are, by node and address, the drained addresses that other
	// nodes let go before the drain and still count (ObserveFormer).
	formers map[string]map[netip.Addr]*FormerAddr
	// updated is the record's Updated as last read, and seen when it
	// last changed, in the drainer's clock.
	updated, seen time.Time
}

// QuietAddr is what Quiet knows of one address.
type QuietAddr struct {
	Addr netip.Addr
	// Released is when the node let it go (the move's release), in the
	// drainer's clock; Changed when its count last grew, or Released.
	Released time.Time
	Changed  time.Time
	// Counted says the node's record lists the address: it counts it.
	Counted bool
	// Lost says the node stopped counting it after it was Counted.
	Lost bool
	// Linger is the address as the record last listed it.
	Linger store.LingerAddr
}

// FormerAddr is what Quiet knows of a drained address at a former owner:
// a node that let it go before the drain and still counts what reaches it
// (it lingers there). A host whose cache still names that node gets no
// answer from it, so the drain proves quiet there too.
type FormerAddr struct {
	Node string
	Addr netip.Addr
	// Seen is when the drain first read the node's count, Changed when
	// the count last grew (or Seen), in the drainer's clock.
	Seen, Changed time.Time
	// Base is the count when first read: what came before the drain.
	Base   uint64
	Linger store.LingerAddr
}

// Packets is how many packets reached the former owner since the drain
// first read its count.
func (f *FormerAddr) Packets() uint64 { return f.Linger.Packets - min(f.Base, f.Linger.Packets) }

// NewQuiet follows addrs, each released at its time, wanting want of
// quiet.
func NewQuiet(want time.Duration, released map[netip.Addr]time.Time) *Quiet {
	q := &Quiet{want: want, addrs: map[netip.Addr]*QuietAddr{}, formers: map[string]map[netip.Addr]*FormerAddr{}}
	for a, t := range released {
		q.addrs[a] = &QuietAddr{Addr: a, Released: t, Changed: t}
	}
	return q
}

// Observe takes the node's record as read at now (nil: none).
func (q *Quiet) Observe(rec *store.Lingering, now time.Time) {
	if rec == nil {
		return
	}
	if !rec.Updated.Equal(q.updated) || q.seen.IsZero() {
		q.updated, q.seen = rec.Updated, now
	}
	for a, qa := range q.addrs {
		la, ok := rec.Of(a)
		if qa.Counted && (!ok || !la.Since.Equal(qa.Linger.Since) || la.Packets < qa.Linger.Packets) {
			qa.Lost = true
		}
		if !ok || la.Since.IsZero() || qa.Lost {
			continue
		}
		if qa.Counted && la.Packets > qa.Linger.Packets {
			qa.Changed = now
		}
		if !qa.Counted && la.Packets > 0 {
			// Packets counted since the release, before this first
			// look: the latest may be as late as now (the node's
			// clock, in Last, is not compared with this one).
			qa.Changed = now
		}
		qa.Counted = true
		qa.Linger = la
	}
}

// ObserveFormer takes the record of a node other than the drained one,
// read at now: each drained address it still counts is followed there,
// unless the node holds it again (holder says who does: a move's target
// counts nothing of its own). An address it no longer counts is followed
// no more: nobody there can tell what reaches it.
func (q *Quiet) ObserveFormer(rec store.Lingering, holder func(netip.Addr) string, now time.Time) {
	for a := range q.addrs {
		la, ok := rec.Of(a)
		tracked := q.formers[rec.Node][a]
		if !ok || la.Since.IsZero() || holder(a) == rec.Node {
			if tracked != nil {
				delete(q.formers[rec.Node], a)
			}
			continue
		}
		if tracked == nil || !la.Since.Equal(tracked.Linger.Since) {
			// First seen, or released there anew: what it counted
			// so far came before.
			if q.formers[rec.Node] == nil {
				q.formers[rec.Node] = map[netip.Addr]*FormerAddr{}
			}
			q.formers[rec.Node][a] = &FormerAddr{Node: rec.Node, Addr: a, Seen: now, Changed: now, Base: la.Packets, Linger: la}
			continue
		}
		if la.Packets > tracked.Linger.Packets {
			tracked.Changed = now
		}
		tracked.Linger = la
	}
}

// FormersOf returns what is known of a at the former owners that still
// count it, by node.
func (q *Quiet) FormersOf(a netip.Addr) []*FormerAddr {
	var out []*FormerAddr
	for _, byAddr := range q.formers {
		if f, ok := byAddr[a]; ok {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(x, y *FormerAddr) int { return strings.Compare(x.Node, y.Node) })
	return out
}

// FormerQuiet says whether nothing new reached f for the quiet wanted, at
// now.
func (q *Quiet) FormerQuiet(f *FormerAddr, now time.Time) bool { return now.Sub(f.Changed) >= q.want }

// Done says whether every address is quiet at now, at the drained node
// and at every former owner that still counts it.
func (q *Quiet) Done(now time.Time) bool {
	for _, qa := range q.addrs {
		if !q.IsQuiet(qa, now) {
			return false
		}
	}
	for _, byAddr := range q.formers {
		for _, f := range byAddr {
			if !q.FormerQuiet(f, now) {
				return false
			}
		}
	}
	return true
}

// IsQuiet says whether qa is counted and quiet at now.
func (q *Quiet) IsQuiet(qa *QuietAddr, now time.Time) bool {
	return qa.Counted && !qa.Lost && now.Sub(qa.Changed) >= q.want
}

// Stale says how long the node's record has gone unchanged, in the
// drainer's clock, since it was first read (zero before).
func (q *Quiet) Stale(now time.Time) time.Duration {
	if q.seen.IsZero() {
		return 0
	}
	return now.Sub(q.seen)
}

// Uncounted says whether an address is not counted, or counted no more.
func (q *Quiet) Uncounted() bool {
	for _, qa := range q.addrs {
		if !qa.Counted || qa.Lost {
			return true
		}
	}
	return false
}

// Addrs returns what is known of each address, sorted.
func (q *Quiet) Addrs() []*QuietAddr {
	out := make([]*QuietAddr, 0, len(q.addrs))
	for _, qa := range q.addrs {
		out = append(out, qa)
	}
	slices.SortFunc(out, func(x, y *QuietAddr) int { return x.Addr.Compare(y.Addr) })
	return out
}
