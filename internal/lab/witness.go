package lab

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vipctl/vip/sniff"
)

// A Witness keeps what a capture on one side of the wire saw answer for a
// few addresses: each frame that binds one of them to a MAC (an ARP reply
// or announcement, a neighbor advertisement), with its capture time. It is
// the proof of the fleet demo's acts, taken where a client stands, so that
// what the agents say of themselves is checked against what left them.
// Observe may be called from a capture's goroutine while the questions are
// asked from another.
type Witness struct {
	mu      sync.Mutex
	watched map[netip.Addr]bool
	seen    []Answer
}

// Answer is one frame that bound Addr to MAC, captured at Time.
type Answer struct {
	Time time.Time
	Addr netip.Addr
	MAC  string
}

// NewWitness keeps the answers for addrs.
func NewWitness(addrs ...netip.Addr) *Witness {
	w := &Witness{watched: make(map[netip.Addr]bool, len(addrs))}
	for _, a := range addrs {
		w.watched[a] = true
	}
	return w
}

// Observe keeps o when it answers for a watched address (sniff.Observer).
func (w *Witness) Observe(o sniff.Observation) {
	if !o.Kind.IsAnswer() {
		return
	}
	addr, mac, ok := o.Claim()
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched[addr] {
		w.seen = append(w.seen, Answer{Time: o.Time, Addr: addr, MAC: mac.String()})
	}
}

// Add keeps an answer as Observe does; the tests build a night with it.
func (w *Witness) Add(a Answer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, a)
}

// answers returns the answers for addr in [from, to), in capture order.
func (w *Witness) answers(addr netip.Addr, from, to time.Time) []Answer {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Answer
	for _, a := range w.seen {
		if a.Addr == addr && !a.Time.Before(from) && a.Time.Before(to) {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(x, y Answer) int { return x.Time.Compare(y.Time) })
	return out
}

// Count returns how many answers for addr came from each MAC in [from, to).
func (w *Witness) Count(addr netip.Addr, from, to time.Time) map[string]int {
	out := map[string]int{}
	for _, a := range w.answers(addr, from, to) {
		out[a.MAC]++
	}
	return out
}

// Handover is what the witness saw of addr passing from one MAC to another
// after from: the old owner's last answer, the new one's first, and the old
// one's answers after that (which must be none).
type Handover struct {
	Addr        netip.Addr
	Old, New    string
	LastOld     time.Time // zero: none after from
	FirstNew    time.Time // zero: the new owner never answered
	OldAfterNew int
	NewAnswers  int
	// Others counts the answers of any other MAC after FirstNew: a third
	// owner (two standbys that both took the address).
	Others map[string]int
	// Silent is the longest stretch after FirstNew without an answer
	// from anyone: a capture or an asker that stopped would pass for an
	// old owner's silence, so a stretch over the asks' pace says so.
	Silent         time.Duration
	UntilWatchEnds time.Duration // how long after FirstNew the witness looked
}

// Handover returns what the witness saw of addr moving from old to new in
// [from, to).
func (w *Witness) Handover(addr netip.Addr, old, new string, from, to time.Time) Handover {
	h := Handover{Addr: addr, Old: old, New: new, Others: map[string]int{}}
	for _, a := range w.answers(addr, from, to) {
		switch {
		case a.MAC == new:
			if h.FirstNew.IsZero() {
				h.FirstNew = a.Time
			}
			h.NewAnswers++
		case a.MAC == old && h.FirstNew.IsZero():
			h.LastOld = a.Time
		case a.MAC == old:
			h.OldAfterNew++
		case !h.FirstNew.IsZero():
			h.Others[a.MAC]++
		}
	}
	if !h.FirstNew.IsZero() {
		h.UntilWatchEnds = to.Sub(h.FirstNew)
		h.Silent = w.Silence(addr, h.FirstNew, to).Longest
	}
	return h
}

// Err says why the handover is not clean: the new owner never answered,
// the old one or a third MAC answered after the new one's first answer,
// or the witness heard nothing for longer than quiet after it (it was not
// listening, or the new owner fell silent).
func (h Handover) Err(quiet time.Duration) error {
	switch {
	case h.FirstNew.IsZero():
		return fmt.Errorf("%s: no answer from %s (the new owner) on the wire", h.Addr, h.New)
	case h.OldAfterNew > 0:
		return fmt.Errorf("%s: %d answers from %s (the old owner) after %s's first: answered twice", h.Addr, h.OldAfterNew, h.Old, h.New)
	case len(h.Others) > 0:
		var who []string
		for mac, n := range h.Others {
			who = append(who, fmt.Sprintf("%s %d times", mac, n))
		}
		slices.Sort(who)
		return fmt.Errorf("%s: answered by %s too after %s's first: answered twice", h.Addr, strings.Join(who, ", "), h.New)
	case h.Silent > quiet:
		return fmt.Errorf("%s: nothing answered for %s after %s's first: the new owner fell silent, or the client's capture stopped", h.Addr, h.Silent.Round(time.Millisecond), h.New)
	}
	return nil
}

// Silence is the longest stretch in [from, to) in which nothing answered
// for addr, from from to the first answer, between two answers, or from
// the last answer to to; and the MACs that answered then.
type Silence struct {
	Addr    netip.Addr
	Longest time.Duration
	At      time.Time // when the longest stretch began
	MACs    map[string]int
}

// Silence returns the longest stretch in [from, to) in which nobody
// answered for addr, and who answered in it.
func (w *Witness) Silence(addr netip.Addr, from, to time.Time) Silence {
	s := Silence{Addr: addr, MACs: map[string]int{}}
	last := from
	gap := func(t time.Time) {
		if d := t.Sub(last); d > s.Longest {
			s.Longest, s.At = d, last
		}
	}
	for _, a := range w.answers(addr, from, to) {
		gap(a.Time)
		last = a.Time
		s.MACs[a.MAC]++
	}
	gap(to)
	return s
}
