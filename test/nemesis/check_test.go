package nemesis

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	v4   = netip.MustParseAddr("192.0.2.50")
	macA = "02:00:00:00:00:0a"
	macB = "02:00:00:00:00:0b"
	t0   = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// probes returns a request every 20 ms from ms to ms+n*20, each answered by
// mac unless mac is empty.
func probes(seq0 uint32, ms, n int, macs ...string) []Frame {
	var fs []Frame
	for i := range n {
		s, t := seq0+uint32(i), at(ms+20*i)
		fs = append(fs, Frame{At: t, Addr: v4, MAC: "02:00:00:00:00:99", Kind: Request, Seq: s})
		for _, m := range macs {
			fs = append(fs, Frame{At: t.Add(time.Millisecond), Addr: v4, MAC: m, Kind: Reply, Seq: s})
		}
	}
	return fs
}

func join(fss ...[]Frame) []Frame {
	var out []Frame
	for _, fs := range fss {
		out = append(out, fs...)
	}
	return out
}

func TestCheck(t *testing.T) {
	bounds := Bounds{ClockError: 100 * time.Millisecond, MaxGap: 4 * time.Second}
	nodes := map[string]string{macA: "a", macB: "b"}
	// a holds from the start; b from 5 s on, seen by the watch at 5.05 s.
	handover := []Claim{{Seen: at(0), Rev: 2, Addr: v4, Node: "a"}, {Seen: at(5000), Rev: 3, Addr: v4}, {Seen: at(5050), Rev: 4, Addr: v4, Node: "b"}}
	freeze := []Injection{{Kind: FreezeLong, Target: "a", Start: at(2000), Healed: at(7000), Settled: at(8000)}}
	tests := []struct {
		name       string
		frames     []Frame
		claims     []Claim
		excluded   []Exclusion
		ticks      []Tick
		end        int
		want       []Rule // in order
		overlaps   int
		answered   int
		longestGap time.Duration // of FreezeLong
	}{
		{
			name: "a clean handover",
			// a answers to 2 s, silence, b from 5.02 s (before the watch
			// saw its key, within the delay) to 10 s.
			frames: join(probes(0, 0, 100, macA), probes(100, 2000, 150), probes(250, 5020, 250, macB)),
			claims: handover, end: 10000,
			answered: 350, longestGap: 3040 * time.Millisecond,
		},
		{
			name:   "two MACs answer one request",
			frames: join(probes(0, 0, 100, macA), probes(100, 2000, 150), probes(250, 5020, 3, macA, macB), probes(253, 5080, 200, macB)),
			claims: handover, end: 10000,
			// a's replies after its key was deleted break the holder
			// rule too, and each request answered twice is an overlap.
			want:     []Rule{RuleOverlap, RuleNotHolder, RuleOverlap, RuleNotHolder, RuleOverlap, RuleNotHolder},
			overlaps: 3, answered: 303, longestGap: 3040 * time.Millisecond,
		},
		{
			name: "an answer from a node that does not hold the key",
			// b answers at 4 s, a second before its key.
			frames: join(probes(0, 0, 100, macA), probes(100, 2000, 100), []Frame{{At: at(4000), Addr: v4, MAC: macB, Kind: Announcement}}, probes(200, 5060, 100, macB)),
			claims: handover, end: 7040,
			want: []Rule{RuleNotHolder}, answered: 200, longestGap: 2019 * time.Millisecond,
		},
		{
			name:   "a MAC of no node",
			frames: join(probes(0, 0, 10, macA), []Frame{{At: at(300), Addr: v4, MAC: "02:00:00:00:00:66", Kind: Announcement}}),
			claims: handover[:1], end: 400,
			want: []Rule{RuleUnknown}, answered: 10,
		},
		{
			name: "a connection accepted by the old owner after the key moved",
			// a's service accepts at 1 s (its key) and at 6 s (b's
			// key): the second breaks the rule. Neither fills the
			// silence from 2 s to 5.02 s.
			frames: join(probes(0, 0, 100, macA), probes(100, 2000, 150), []Frame{{At: at(1000), Addr: v4, MAC: macA, Kind: Accept}, {At: at(3500), Addr: v4, MAC: macA, Kind: Accept}},
				probes(250, 5020, 250, macB), []Frame{{At: at(6000), Addr: v4, MAC: macA, Kind: Accept}, {At: at(6100), Addr: v4, MAC: macB, Kind: Accept}}),
			claims: handover, end: 10000,
			want: []Rule{RuleAccept}, answered: 350, longestGap: 3040 * time.Millisecond,
		},
		{
			name: "a gap too long",
			// b answers only from 8 s: 6 s of silence after a's last.
			frames: join(probes(0, 0, 100, macA), probes(100, 2000, 300), probes(400, 8000, 100, macB)),
			claims: handover, end: 10000,
			want: []Rule{RuleGap}, answered: 200, longestGap: 6020 * time.Millisecond,
		},
		{
			name:     "a long gap inside an exclusion",
			frames:   join(probes(0, 0, 100, macA), probes(100, 2000, 300), probes(400, 8000, 100, macB)),
			claims:   handover,
			excluded: []Exclusion{{Start: at(2500), End: at(6000), Why: "all of etcd down"}},
			end:      10000, answered: 200, longestGap: 6020 * time.Millisecond,
		},
		{
			name:     "a gap only partly excluded",
			frames:   join(probes(0, 0, 100, macA), probes(100, 2000, 500), probes(600, 12000, 10, macB)),
			claims:   handover,
			excluded: []Exclusion{{Addr: v4, Start: at(3000), End: at(5000), Why: "released on purpose"}},
			end:      12200, want: []Rule{RuleGap}, answered: 110, longestGap: 10020 * time.Millisecond,
		},
		{
			name: "an answer only a wider clock error would pass",
			// a's key at revision 2 was committed between a tick sent at
			// -1 s and the watch's sight of it at 0.4 s; a answers from 0
			// on, which passes only if the commit was 0.4 s before the
			// watch saw it, over the bound of 0.1 s.
			frames: probes(0, 0, 10, macA), claims: []Claim{{Seen: at(400), Rev: 2, Addr: v4, Node: "a"}}, end: 500,
			ticks: []Tick{{Sent: at(-1000), Done: at(-995), Rev: 1}, {Sent: at(1500), Done: at(1505), Rev: 3}},
			want:  []Rule{RuleClock, RuleClock, RuleClock, RuleClock, RuleClock, RuleClock, RuleClock, RuleClock, RuleClock, RuleClock}, answered: 10,
		},
		{
			name: "ticks bracket a change more closely than the fallback",
			// b's key was committed after the tick sent at 4.99 s: its
			// announcement at 4.98 s came before it held the key, which
			// the fallback alone (100 ms before the watch saw it) would
			// have let pass.
			frames: join(probes(0, 0, 100, macA), []Frame{{At: at(4980), Addr: v4, MAC: macB, Kind: Announcement}}, probes(250, 5020, 100, macB)),
			claims: []Claim{{Seen: at(0), Rev: 2, Addr: v4, Node: "a"}, {Seen: at(5000), Rev: 5, Addr: v4}, {Seen: at(5050), Rev: 7, Addr: v4, Node: "b"}},
			ticks:  []Tick{{Sent: at(-100), Done: at(-95), Rev: 1}, {Sent: at(4900), Done: at(4905), Rev: 4}, {Sent: at(4990), Done: at(4995), Rev: 6}, {Sent: at(5025), Done: at(5030), Rev: 8}},
			end:    7000, want: []Rule{RuleNotHolder}, answered: 200, longestGap: 2999 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := History{Addrs: []netip.Addr{v4}, Nodes: nodes, Frames: tt.frames, Claims: tt.claims,
				Injections: freeze, Excluded: tt.excluded, Ticks: tt.ticks, Start: at(0), End: at(tt.end)}
			rep := Check(h, bounds)
			var got []Rule
			for _, v := range rep.Violations {
				got = append(got, v.Rule)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got violations %v, want %v:\n%v", got, tt.want, rep.Violations)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("violation %d: got %q, want %q (%v)", i, got[i], tt.want[i], rep.Violations[i])
				}
			}
			if rep.Overlaps != tt.overlaps || rep.Answered != tt.answered {
				t.Errorf("got %d overlaps, %d answered; want %d, %d", rep.Overlaps, rep.Answered, tt.overlaps, tt.answered)
			}
			if tt.longestGap != 0 {
				var got time.Duration
				for _, k := range rep.Kinds {
					if k.Kind == FreezeLong {
						got = k.LongestGap
					}
				}
				if got != tt.longestGap {
					t.Errorf("longest gap during the freeze: got %v, want %v", got, tt.longestGap)
				}
			}
			if md := rep.Markdown(); !strings.Contains(md, "| SIGSTOP > TTL | 1 |") {
				t.Errorf("the table lacks the freeze's row:\n%s", md)
			}
		})
	}
}

// TestCheckKindGap: a silence that only a fault with a bound of its own
// overlapped is held to that bound; one that another fault overlapped too
// gets the larger.
func TestCheckKindGap(t *testing.T) {
	nodes := map[string]string{macA: "a"}
	claims := []Claim{{Seen: at(0), Rev: 2, Addr: v4, Node: "a"}}
	// a answers to 2 s, then from 3.5 s: 1.5 s of silence.
	frames := join(probes(0, 0, 100, macA), probes(100, 2000, 75), probes(175, 3500, 100, macA))
	slow := Injection{Kind: SlowStore, Target: "etcd", Start: at(1000), Healed: at(4000), Settled: at(4500)}
	move := Injection{Kind: Move, Target: "a", Start: at(2500), Healed: at(3000), Settled: at(3200)}
	bounds := Bounds{MaxGap: 4 * time.Second, KindGap: map[Kind]time.Duration{SlowStore: time.Second}}
	for _, tc := range []struct {
		name string
		in   []Injection
		want int
	}{
		{"a slow store alone: bound 1 s", []Injection{slow}, 1},
		{"a move during the slow store: bound 4 s", []Injection{slow, move}, 0},
		{"no bound of its own: 4 s", []Injection{{Kind: CutAll, Target: "a", Start: at(1000), Healed: at(4000), Settled: at(4500)}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(History{Addrs: []netip.Addr{v4}, Nodes: nodes, Frames: frames, Claims: claims, Injections: tc.in, Start: at(0), End: at(5500)}, bounds)
			if len(rep.Violations) != tc.want {
				t.Errorf("got violations %v, want %d", rep.Violations, tc.want)
			}
			for _, v := range rep.Violations {
				if v.Rule != RuleGap || !strings.Contains(v.Detail, "bound 1s") {
					t.Errorf("violation %v, want a gap over the bound of 1s", v)
				}
			}
		})
	}
}

func TestUncovered(t *testing.T) {
	tests := []struct {
		name      string
		excl      []Exclusion
		want      time.Duration
		wantStart int
	}{
		{"none", nil, 10 * time.Second, 0},
		{"all", []Exclusion{{Start: at(-1000), End: at(11000)}}, 0, 0},
		{"middle", []Exclusion{{Start: at(2000), End: at(5000)}}, 5 * time.Second, 5000},
		{"overlapping", []Exclusion{{Start: at(1000), End: at(4000)}, {Start: at(3000), End: at(8000)}}, 2 * time.Second, 8000},
		{"outside", []Exclusion{{Start: at(11000), End: at(12000)}}, 10 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, start := uncovered(at(0), at(10000), tt.excl)
			if got != tt.want || (got > 0 && !start.Equal(at(tt.wantStart))) {
				t.Errorf("got %v from %v, want %v from %v", got, start, tt.want, at(tt.wantStart))
			}
		})
	}
}

// TestCheckSilent: a node that answers inside a window it must be silent
// in breaks RuleSilent once per address, however many frames it sent,
// even while it holds the key; frames before the window, and another
// node's in it, do not.
func TestCheckSilent(t *testing.T) {
	nodes := map[string]string{macA: "a", macB: "b"}
	claims := []Claim{{Seen: at(0), Rev: 2, Addr: v4, Node: "a"}}
	silent := []Silence{{Node: "a", Start: at(2000), End: at(4000), Why: "its acknowledger was cut off"}}
	for _, tc := range []struct {
		name   string
		frames []Frame
		want   int
	}{
		{"a falls silent at 2 s", join(probes(0, 0, 100, macA), probes(100, 2000, 100)), 0},
		{"a answers until 3 s", join(probes(0, 0, 150, macA), probes(150, 3000, 50)), 1},
		{"b answers in a's window", join(probes(0, 0, 100, macA), probes(100, 2000, 100, macB)), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(History{Addrs: []netip.Addr{v4}, Nodes: nodes, Frames: tc.frames, Claims: claims, Silent: silent, Start: at(0), End: at(4000)},
				Bounds{MaxGap: 10 * time.Second, ClockError: time.Second})
			var got []Violation
			for _, v := range rep.Violations {
				if v.Rule == RuleSilent {
					got = append(got, v)
				}
			}
			if len(got) != tc.want {
				t.Fatalf("got silence violations %v, want %d", got, tc.want)
			}
			if tc.want > 0 && (!got[0].At.Equal(at(2001)) || !strings.Contains(got[0].Detail, "50 frames")) {
				t.Errorf("violation %v, want the first frame at 2.001 s and 50 frames in all", got[0])
			}
		})
	}
}

// TestCheckFailsafeLinger: an owner on failsafe may answer for a while
// after its key went with its lease, as long as nobody else holds it; not
// past the linger, and not once another node holds the key.
func TestCheckFailsafeLinger(t *testing.T) {
	nodes := map[string]string{macA: "a", macB: "b"}
	// a's key deleted at 2 s (seen at 2 s, ticks bracketing it closely).
	gone := []Claim{{Seen: at(0), Rev: 2, Addr: v4, Node: "a"}, {Seen: at(2000), Rev: 4, Addr: v4}}
	ticks := []Tick{{Sent: at(-100), Done: at(-95), Rev: 1}, {Sent: at(1990), Done: at(1995), Rev: 3}, {Sent: at(2010), Done: at(2015), Rev: 5}}
	taken := append(slices.Clone(gone), Claim{Seen: at(2400), Rev: 7, Addr: v4, Node: "b"})
	takenTicks := append(slices.Clone(ticks), Tick{Sent: at(2390), Done: at(2395), Rev: 6}, Tick{Sent: at(2410), Done: at(2415), Rev: 8})
	// b's record written at 2.59 s, seen at 2.6 s, with no tick since
	// the one sent at 2.01 s (the ticks sparse, as right after a thaw):
	// its commit is no earlier than its record's own time.
	late := append(slices.Clone(gone), Claim{Seen: at(2600), Rev: 7, Addr: v4, Node: "b", Written: at(2590)})
	lateTicks := append(slices.Clone(ticks), Tick{Sent: at(2610), Done: at(2615), Rev: 8})
	unwritten := slices.Clone(late)
	unwritten[len(unwritten)-1].Written = time.Time{}
	for _, tc := range []struct {
		name   string
		frames []Frame
		claims []Claim
		ticks  []Tick
		linger time.Duration
		want   int
	}{
		{"a answers 1 s past the deletion, linger 1.5 s", probes(0, 0, 150, macA), gone, ticks, 1500 * time.Millisecond, 0},
		{"the same without a linger", probes(0, 0, 150, macA), gone, ticks, 0, 50},
		{"a answers 2 s past it, linger 1.5 s", probes(0, 0, 200, macA), gone, ticks, 1500 * time.Millisecond, 25},
		{"b took the key at 2.4 s: a passes to 2.39 s only", probes(0, 0, 130, macA), taken, takenTicks, 1500 * time.Millisecond, 10},
		{"b's record written at 2.59 s: a passes to 2.58 s", probes(0, 0, 130, macA), late, lateTicks, 1500 * time.Millisecond, 0},
		{"the same with no time in b's record: from the tick at 2.01 s", probes(0, 0, 130, macA), unwritten, lateTicks, 1500 * time.Millisecond, 29},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(History{Addrs: []netip.Addr{v4}, Nodes: nodes, Frames: tc.frames, Claims: tc.claims, Ticks: tc.ticks, Start: at(0), End: at(4000)},
				Bounds{MaxGap: 10 * time.Second, ClockError: 100 * time.Millisecond, FailsafeLinger: tc.linger})
			n := 0
			for _, v := range rep.Violations {
				if v.Rule == RuleNotHolder {
					n++
				}
			}
			if n != tc.want {
				t.Errorf("got %d answers from a node not holding the key, want %d: %v", n, tc.want, rep.Violations)
			}
		})
	}
}

// TestBracketQuiet: a change committed right after the store woke from a
// freeze is bracketed from the thaw, not from a tick sent during the
// freeze and committed after it.
func TestBracketQuiet(t *testing.T) {
	claims := []Claim{{Seen: at(10100), Rev: 5, Addr: v4, Node: "b"}}
	// A tick sent at 2 s, before the freeze from 2.05 s to 10 s, is
	// committed at revision 4 after the thaw.
	ticks := []Tick{{Sent: at(2000), Done: at(10050), Rev: 4}, {Sent: at(10080), Done: at(10090), Rev: 6}}
	if got := bracket(claims, ticks, time.Second, nil)[0]; !got.lo.Equal(at(2000)) {
		t.Fatalf("without the quiet window the bracket starts at %v, want the tick's send at 2 s", got.lo.Sub(t0))
	}
	// A tick sent during the freeze.
	ticks[0].Sent = at(5000)
	got := bracket(claims, ticks, time.Second, []Window{{Start: at(2050), End: at(10000)}})[0]
	if !got.lo.Equal(at(10000)) || !got.hi.Equal(at(10090)) {
		t.Errorf("bracket %v to %v, want from the thaw at 10 s to the next tick's acknowledgement at 10.09 s", got.lo.Sub(t0), got.hi.Sub(t0))
	}
}

// TestEarliest: a change seen twice, by a read and by the watch, counts
// once, at the earlier sighting.
func TestEarliest(t *testing.T) {
	got := earliest([]Claim{{Seen: at(900), Rev: 2, Addr: v4, Node: "a"}, {Seen: at(300), Rev: 2, Addr: v4, Node: "a"}, {Seen: at(1000), Rev: 3, Addr: v4}})
	if len(got) != 2 || !got[0].Seen.Equal(at(300)) || got[1].Rev != 3 {
		t.Errorf("got %+v, want revision 2 seen at 0.3 s, then revision 3", got)
	}
}
