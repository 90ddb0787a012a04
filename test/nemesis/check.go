package nemesis

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Bounds are the checker's allowances, each stated where the run sets it.
type Bounds struct {
	// ClockError is the most the holder check allows for the uncertain
	// time of a change: a change's commit lies in the bracket its
	// neighbouring ticks put around it (or, with no tick before it, up to
	// this much before the watch saw it), and an answer inside a bracket
	// passes only if it lies within ClockError of the time the key was
	// surely its node's. An answer whose verdict would need more fails
	// (RuleClock): the run could not tell. The capture and the store's
	// history read one wall clock (one kernel runs every lab host), so this
	// is the whole clock error.
	ClockError time.Duration
	// MaxGap is the longest an address may go unanswered outside the
	// exclusions: the lease's TTL plus the time a standby takes to claim
	// and answer, and one probe interval.
	MaxGap time.Duration
	// KindGap lowers MaxGap for a silence that only faults of the kinds
	// it names overlapped: those after which an address must stay
	// answered, not fail over (a slow store, a restart). A silence that
	// overlaps another kind too gets the larger bound.
	KindGap map[Kind]time.Duration
	// FailsafeLinger is how long the last holder of a key that was deleted
	// (its lease expired or was revoked, as etcd does to every lease on
	// waking from a freeze) may still answer while nobody else holds it:
	// an owner on failsafe answers until the promises it holds run out,
	// and the nodes that promised take nothing meanwhile. Zero allows
	// none.
	FailsafeLinger time.Duration
}

// gapBound is the longest a silence that overlapped the faults ks may
// last.
func (b Bounds) gapBound(ks []Kind) time.Duration {
	if len(ks) == 0 {
		return b.MaxGap
	}
	var bound time.Duration
	for _, k := range ks {
		kb, ok := b.KindGap[k]
		if !ok {
			kb = b.MaxGap
		}
		bound = max(bound, kb)
	}
	return bound
}

// Rule names the invariant a violation broke.
type Rule string

// The rules.
const (
	RuleOverlap   Rule = "two MACs answered one request"
	RuleNotHolder Rule = "answer from a node not holding the key"
	// RuleAccept is a connection accepted on the address by a node that
	// did not hold its key: a service reached on the wrong host.
	RuleAccept  Rule = "connection accepted by a node not holding the key"
	RuleUnknown Rule = "answer from a MAC of no node"
	RuleGap     Rule = "unanswered too long"
	// RuleSilent is a frame from a node in a window it must be silent in
	// (History.Silent): one that should have fenced.
	RuleSilent Rule = "answer from a node that must be silent"
	RuleClock  Rule = "an answer the clock bound cannot decide"
)

// Violation is one breach of a rule, with the fault(s) under way then.
type Violation struct {
	Rule   Rule
	Addr   netip.Addr
	At     time.Time
	During []Kind
	Detail string
}

func (v Violation) String() string {
	var ks []string
	for _, k := range v.During {
		ks = append(ks, k.String())
	}
	during := "no fault"
	if len(ks) > 0 {
		during = strings.Join(ks, ", ")
	}
	return fmt.Sprintf("%s %s %s (during %s): %s", v.At.Format("15:04:05.000"), v.Addr, v.Rule, during, v.Detail)
}

// KindStats is one row of the report.
type KindStats struct {
	Kind     Kind
	Injected int
	// LongestGap is the longest an address went unanswered in a silence
	// that overlapped a fault of this kind, excused or not.
	LongestGap time.Duration
	Overlaps   int
	Violations int
}

// Report is what Check found.
type Report struct {
	Kinds []KindStats
	// Steady is the longest silence that overlapped no fault.
	Steady time.Duration
	// Sent and Answered count the probes seen on the wire and those with
	// a reply.
	Sent, Answered int
	Overlaps       int
	// ClockError is the widest bracket of a change's commit time, and
	// Allowance the most of it an answer needed.
	ClockError, Allowance time.Duration
	Violations            []Violation
}

// OK reports whether the history kept every rule.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// holding is one interval in which node may have held an address's key:
// from the earliest its change could have been committed to the latest the
// next one could.
type holding struct {
	node     string
	from, to time.Time // to is zero while still held at the end
	// sureFrom and sureTo bound when the key was surely the node's: the
	// latest its change could have been committed, the earliest the next.
	sureFrom, sureTo time.Time
}

// span is when a change may have been committed.
type span struct{ lo, hi time.Time }

// bracket returns, for each claim, the span its commit lies in: after the
// send of the latest-sent tick of a lower revision and after the time its
// record was written at, before the acknowledgement of the
// first-acknowledged tick of a higher one, and no later than the watch saw
// it. Without a tick before it, lo is fallback before the watch saw it.
// Right after a thaw the ticks are sparse: a take's bracket reached back
// to the tick before it, 72 ms before the taker even wrote its record, and
// the former owner's last answers on failsafe, before its fence and well
// before the take, counted as answers after it (stop 41's and this one's
// unexplained violations; the nemesis of b2a108b, seed 1796684139141538503).
//
// No change is committed inside a quiet window (the store frozen, stopped or
// without a quorum): a lo inside one moves to its end. A tick sent during a
// freeze is committed only after the thaw, and would otherwise stretch the
// bracket of every change right after the thaw back across the freeze.
func bracket(claims []Claim, ticks []Tick, fallback time.Duration, quiet []Window) []span {
	ts := slices.Clone(ticks)
	slices.SortFunc(ts, func(x, y Tick) int { return cmp.Compare(x.Rev, y.Rev) })
	sentMax := make([]time.Time, len(ts)) // latest Sent of ts[:i+1]
	doneMin := make([]time.Time, len(ts)) // earliest Done of ts[i:]
	for i, tk := range ts {
		sentMax[i] = tk.Sent
		if i > 0 && sentMax[i-1].After(tk.Sent) {
			sentMax[i] = sentMax[i-1]
		}
	}
	for i := len(ts) - 1; i >= 0; i-- {
		doneMin[i] = ts[i].Done
		if i < len(ts)-1 && doneMin[i+1].Before(ts[i].Done) {
			doneMin[i] = doneMin[i+1]
		}
	}
	out := make([]span, len(claims))
	for i, c := range claims {
		j, _ := slices.BinarySearchFunc(ts, c.Rev, func(tk Tick, r int64) int { return cmp.Compare(tk.Rev, r) })
		s := span{lo: c.Seen.Add(-fallback), hi: c.Seen}
		if j > 0 {
			s.lo = sentMax[j-1]
		}
		if c.Written.After(s.lo) {
			s.lo = c.Written
		}
		k := j
		if k < len(ts) && ts[k].Rev == c.Rev {
			k++
		}
		if k < len(ts) && doneMin[k].Before(s.hi) {
			s.hi = doneMin[k]
		}
		for _, w := range quiet {
			if !s.lo.Before(w.Start) && s.lo.Before(w.End) {
				s.lo = w.End
			}
		}
		if s.lo.After(s.hi) {
			s.lo = s.hi
		}
		out[i] = s
	}
	return out
}

// Check decides from h alone whether vip kept its guarantee within b.
func Check(h History, b Bounds) *Report {
	rep := &Report{}
	stats := map[Kind]*KindStats{}
	stat := func(k Kind) *KindStats {
		if s, ok := stats[k]; ok {
			return s
		}
		s := &KindStats{Kind: k}
		stats[k] = s
		return s
	}
	for _, in := range h.Injections {
		stat(in.Kind).Injected++
		if in.During != 0 {
			stat(in.During).Injected++
		}
	}
	during := func(from, to time.Time) []Kind {
		var ks []Kind
		for _, in := range h.Injections {
			if in.Start.After(to) || in.Settled.Before(from) {
				continue
			}
			if !slices.Contains(ks, in.Kind) {
				ks = append(ks, in.Kind)
			}
			if in.During != 0 && !slices.Contains(ks, in.During) {
				ks = append(ks, in.During)
			}
		}
		return ks
	}
	violate := func(v Violation) {
		v.During = during(v.At, v.At)
		for _, k := range v.During {
			stat(k).Violations++
		}
		rep.Violations = append(rep.Violations, v)
	}

	h.Claims = earliest(h.Claims)
	brackets := bracket(h.Claims, h.Ticks, b.ClockError, h.Quiet)
	for _, sp := range brackets {
		rep.ClockError = max(rep.ClockError, sp.hi.Sub(sp.lo))
	}
	held := holdings(h.Claims, brackets)
	for _, a := range h.Addrs {
		var frames []Frame
		for _, f := range h.Frames {
			if f.Addr == a {
				frames = append(frames, f)
			}
		}
		slices.SortStableFunc(frames, func(x, y Frame) int { return x.At.Compare(y.At) })
		checkAnswers(h, b, a, frames, held[a], rep, violate, stat, during)
		checkGaps(h, b, a, frames, rep, violate, stat, during)
	}
	checkSilences(h, violate)
	for _, k := range All() {
		if s, ok := stats[k]; ok {
			rep.Kinds = append(rep.Kinds, *s)
		}
	}
	slices.SortStableFunc(rep.Violations, func(x, y Violation) int { return x.At.Compare(y.At) })
	return rep
}

// checkSilences finds the frames sent in a window their node must be
// silent in: the first of each window and address, with how many more.
func checkSilences(h History, violate func(Violation)) {
	for _, sl := range h.Silent {
		first := map[netip.Addr]Frame{}
		count := map[netip.Addr]int{}
		for _, f := range h.Frames {
			if f.Kind == Request || h.Nodes[f.MAC] != sl.Node || f.At.Before(sl.Start) || f.At.After(sl.End) {
				continue
			}
			if _, ok := first[f.Addr]; !ok || f.At.Before(first[f.Addr].At) {
				first[f.Addr] = f
			}
			count[f.Addr]++
		}
		for _, a := range slices.SortedFunc(maps.Keys(first), netip.Addr.Compare) {
			f := first[a]
			violate(Violation{Rule: RuleSilent, Addr: a, At: f.At, Detail: fmt.Sprintf("%s from %s (%s) at %s, %d frames in all from %s to %s, in which it must be silent: %s",
				f.Kind, sl.Node, f.MAC, f.At.Format("15:04:05.000"), count[a], sl.Start.Format("15:04:05.000"), sl.End.Format("15:04:05.000"), sl.Why)})
		}
	}
}

// earliest keeps one of each change (address and revision), at its
// earliest sighting: the recorder's watch and its reads may each see one.
func earliest(claims []Claim) []Claim {
	type key struct {
		addr netip.Addr
		rev  int64
	}
	at := map[key]int{}
	var out []Claim
	for _, c := range claims {
		k := key{c.Addr, c.Rev}
		if i, ok := at[k]; ok {
			if c.Seen.Before(out[i].Seen) {
				out[i].Seen = c.Seen
			}
			continue
		}
		at[k] = len(out)
		out = append(out, c)
	}
	return out
}

// holdings turns the store's changes into who may have held each key
// when, in revision order, each holding stretched to its changes' brackets.
// A change to the same node (a new lease for the same owner) continues its
// holding.
func holdings(claims []Claim, spans []span) map[netip.Addr][]holding {
	idx := make([]int, len(claims))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int { return cmp.Compare(claims[x].Rev, claims[y].Rev) })
	out := map[netip.Addr][]holding{}
	for _, i := range idx {
		c, sp := claims[i], spans[i]
		hs := out[c.Addr]
		open := len(hs) > 0 && hs[len(hs)-1].to.IsZero()
		if open && hs[len(hs)-1].node == c.Node {
			continue
		}
		if open {
			hs[len(hs)-1].to, hs[len(hs)-1].sureTo = sp.hi, sp.lo
		}
		if c.Node != "" {
			hs = append(hs, holding{node: c.Node, from: sp.lo, sureFrom: sp.hi})
		}
		out[c.Addr] = hs
	}
	return out
}

// heldBy reports whether node may have held the key at t, and if so how
// much of a change's uncertain time the verdict needs (zero when the key
// was surely its node's at t).
func heldBy(hs []holding, node string, t time.Time) (bool, time.Duration) {
	for _, x := range hs {
		if x.node != node || t.Before(x.from) || (!x.to.IsZero() && t.After(x.to)) {
			continue
		}
		var need time.Duration
		if t.Before(x.sureFrom) {
			need = x.sureFrom.Sub(t)
		}
		if !x.to.IsZero() && t.After(x.sureTo) {
			need = max(need, t.Sub(x.sureTo))
		}
		return true, need
	}
	return false, 0
}

// lingers reports whether node's answer at t passes as an owner's on
// failsafe after its key was deleted: node held the key last, nobody may
// have held it since, and t is within linger of the deletion's latest
// commit time. need is as heldBy's, for the holding's start.
func lingers(hs []holding, node string, t time.Time, linger time.Duration) (bool, time.Duration) {
	if linger <= 0 {
		return false, 0
	}
	for i, x := range hs {
		if x.node != node || x.to.IsZero() || !t.After(x.to) || t.After(x.to.Add(linger)) {
			continue
		}
		if i+1 < len(hs) && !t.Before(hs[i+1].from) {
			continue // another node may have held it by then
		}
		var need time.Duration
		if t.Before(x.sureFrom) {
			need = x.sureFrom.Sub(t)
		}
		return true, need
	}
	return false, 0
}

func checkAnswers(h History, b Bounds, a netip.Addr, frames []Frame, hs []holding, rep *Report,
	violate func(Violation), stat func(Kind) *KindStats, during func(from, to time.Time) []Kind) {
	type asked struct {
		at   time.Time
		macs []string
	}
	bySeq := map[uint32]*asked{}
	var order []uint32
	for _, f := range frames {
		switch f.Kind {
		case Request:
			if _, ok := bySeq[f.Seq]; !ok {
				bySeq[f.Seq] = &asked{at: f.At}
				order = append(order, f.Seq)
			}
			continue
		case Reply:
			q, ok := bySeq[f.Seq]
			if !ok {
				// The request itself was not captured: the first
				// reply times it.
				q = &asked{at: f.At}
				bySeq[f.Seq] = q
				order = append(order, f.Seq)
			}
			if !slices.Contains(q.macs, f.MAC) {
				q.macs = append(q.macs, f.MAC)
			}
		}
		node, ok := h.Nodes[f.MAC]
		if !ok {
			violate(Violation{Rule: RuleUnknown, Addr: a, At: f.At, Detail: fmt.Sprintf("%s from %s", f.Kind, f.MAC)})
			continue
		}
		held, need := heldBy(hs, node, f.At)
		if !held {
			held, need = lingers(hs, node, f.At, b.FailsafeLinger)
		}
		rep.Allowance = max(rep.Allowance, need)
		switch {
		case !held:
			rule := RuleNotHolder
			if f.Kind == Accept {
				rule = RuleAccept
			}
			violate(Violation{Rule: rule, Addr: a, At: f.At, Detail: fmt.Sprintf("%s from %s (node %s); the key was %s", f.Kind, f.MAC, node, holderAt(hs, f.At))})
		case b.ClockError > 0 && need > b.ClockError:
			violate(Violation{Rule: RuleClock, Addr: a, At: f.At, Detail: fmt.Sprintf("%s from %s (node %s) passes only if the key's change was %v off its surest time, over the bound of %v",
				f.Kind, f.MAC, node, need.Round(time.Millisecond), b.ClockError)})
		}
	}
	requests := 0
	for _, f := range frames {
		if f.Kind == Request {
			requests++
		}
	}
	rep.Sent += max(requests, h.Sent[a])
	for _, s := range order {
		q := bySeq[s]
		if len(q.macs) > 0 {
			rep.Answered++
		}
		if len(q.macs) > 1 {
			rep.Overlaps++
			for _, k := range during(q.at, q.at) {
				stat(k).Overlaps++
			}
			var names []string
			for _, m := range q.macs {
				names = append(names, fmt.Sprintf("%s (node %s)", m, cmp.Or(h.Nodes[m], "?")))
			}
			violate(Violation{Rule: RuleOverlap, Addr: a, At: q.at, Detail: fmt.Sprintf("request %d answered by %s", s, strings.Join(names, " and "))})
		}
	}
}

// holderAt says who held the key at t, for a violation's detail.
func holderAt(hs []holding, t time.Time) string {
	for _, x := range hs {
		if !t.Before(x.from) && (x.to.IsZero() || t.Before(x.to)) {
			return "node " + x.node + "'s since " + x.from.Format("15:04:05.000")
		}
	}
	return "nobody's"
}

func checkGaps(h History, b Bounds, a netip.Addr, frames []Frame, rep *Report,
	violate func(Violation), stat func(Kind) *KindStats, during func(from, to time.Time) []Kind) {
	var excl []Exclusion
	for _, e := range h.Excluded {
		if !e.Addr.IsValid() || e.Addr == a {
			excl = append(excl, e)
		}
	}
	// The clock runs from the first answer: before it the address was not
	// yet claimed.
	var prev time.Time
	gap := func(from, to time.Time) {
		d := to.Sub(from)
		ks := during(from, to)
		for _, k := range ks {
			s := stat(k)
			s.LongestGap = max(s.LongestGap, d)
		}
		if len(ks) == 0 {
			rep.Steady = max(rep.Steady, d)
		}
		bound := b.gapBound(ks)
		if bound <= 0 || d <= bound {
			return
		}
		if u, at := uncovered(from, to, excl); u > bound {
			violate(Violation{Rule: RuleGap, Addr: a, At: at, Detail: fmt.Sprintf("no answer from %s to %s (%v, of which %v outside any exclusion; bound %v)",
				from.Format("15:04:05.000"), to.Format("15:04:05.000"), d.Round(time.Millisecond), u.Round(time.Millisecond), bound)})
		}
	}
	for _, f := range frames {
		if f.Kind == Request || f.Kind == Accept {
			continue
		}
		if !prev.IsZero() {
			gap(prev, f.At)
		}
		prev = f.At
	}
	if !prev.IsZero() && h.End.After(prev) {
		gap(prev, h.End)
	}
}

// uncovered returns the longest part of [from, to] that no exclusion
// covers, and where it starts.
func uncovered(from, to time.Time, excl []Exclusion) (time.Duration, time.Time) {
	es := slices.Clone(excl)
	slices.SortFunc(es, func(x, y Exclusion) int { return x.Start.Compare(y.Start) })
	var longest time.Duration
	at := from
	cur := from
	for _, e := range es {
		if !e.End.After(cur) || !e.Start.Before(to) {
			continue
		}
		if e.Start.After(cur) && e.Start.Sub(cur) > longest {
			longest, at = e.Start.Sub(cur), cur
		}
		if e.End.After(cur) {
			cur = e.End
		}
		if !cur.Before(to) {
			break
		}
	}
	if to.After(cur) && to.Sub(cur) > longest {
		longest, at = to.Sub(cur), cur
	}
	return longest, at
}

// Markdown renders the report as a table for RELIABILITY.md.
func (r *Report) Markdown() string {
	var s strings.Builder
	s.WriteString("| fault | injected | longest unanswered | overlaps | violations |\n|---|---|---|---|---|\n")
	for _, k := range r.Kinds {
		fmt.Fprintf(&s, "| %s | %d | %v | %d | %d |\n", k.Kind, k.Injected, k.LongestGap.Round(time.Millisecond), k.Overlaps, k.Violations)
	}
	fmt.Fprintf(&s, "| no fault under way | | %v | | |\n", r.Steady.Round(time.Millisecond))
	fmt.Fprintf(&s, "| **total** | | | %d | %d |\n", r.Overlaps, len(r.Violations))
	fmt.Fprintf(&s, "\nprobes sent %d, answered %d (%.2f%%); widest bracket of a change's commit time %v, most of it an answer needed %v\n",
		r.Sent, r.Answered, 100*float64(r.Answered)/float64(max(r.Sent, 1)), r.ClockError.Round(time.Millisecond), r.Allowance.Round(time.Millisecond))
	return s.String()
}
