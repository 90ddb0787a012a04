package fleet_test

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
)

// TestFakeWithheldNamesTheDeadline: the event that counts frames withheld
// names the deadline they were withheld for, as the wall-clock time it
// passed at, or says it was closed, which has no time: never the deadline
// a renewal moved it to since (a time still to come), nor a closed
// deadline's reading shown as a time (the host's boot).
func TestFakeWithheldNamesTheDeadline(t *testing.T) {
	none := time.Duration(-1)
	for _, tc := range []struct {
		name string
		// cutAt cuts a off from the store, backAt joins it again (none:
		// never); stallAt has the boot clock run stall ahead of the
		// member's, which did not run meanwhile.
		cutAt, backAt  time.Duration
		stallAt, stall time.Duration
		withholdAt     time.Duration
		reportAt       time.Duration
		want, wantNot  string
	}{
		{name: "closed by the fence, the store still away", cutAt: 1500 * time.Millisecond, backAt: none, stallAt: none,
			withholdAt: 5500 * time.Millisecond, reportAt: 6 * time.Second,
			want: "the answer deadline was closed", wantNot: "passed at"},
		{name: "closed by the fence, renewed since", cutAt: 1500 * time.Millisecond, backAt: 5500 * time.Millisecond, stallAt: none,
			withholdAt: 5500 * time.Millisecond, reportAt: 6 * time.Second,
			want: "the answer deadline was closed", wantNot: "passed at"},
		// The deadline set at 3 s (3 s + fence-after on the boot clock)
		// has passed 1.5 s before the report at 4 s, on the boot clock
		// that ran 5 s ahead: the member's clock then read 2.5 s.
		{name: "passed in a stall, renewed since", cutAt: none, backAt: none, stallAt: 3 * time.Second, stall: 5 * time.Second,
			withholdAt: 3 * time.Second, reportAt: 4 * time.Second,
			want: "passed at " + time.Date(2026, 1, 1, 0, 0, 2, 500e6, time.UTC).Local().Format("15:04:05.000")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet(t)
			a, aEng := f.join("a")
			var withheld atomic.Uint64
			stop, err := aEng.deadline.Watch(func(time.Duration) error { return nil }, withheld.Load)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(stop)
			f.claim(a, vip)
			steps := []struct {
				at time.Duration
				do func()
			}{
				{tc.cutAt, func() { f.s.setCut("a", true) }},
				{tc.stallAt, func() { f.bootAhead.Store(int64(tc.stall)) }},
				{tc.withholdAt, func() { withheld.Store(3) }},
				{tc.backAt, func() { f.s.setCut("a", false) }},
			}
			for _, step := range steps {
				if step.at != none {
					f.advanceTo(step.at)
					step.do()
				}
			}
			f.advanceTo(tc.reportAt)
			eventually(t, func() bool { return aEng.sawEvent(event.Withheld, "") }, "no event told of the frames withheld")
			aEng.mu.Lock()
			i := slices.IndexFunc(aEng.events, func(ev announce.Event) bool { return ev.Kind == event.Withheld })
			got := aEng.events[i]
			aEng.mu.Unlock()
			if got.Count != 3 {
				t.Errorf("the event counts %d frames, want 3", got.Count)
			}
			if !strings.Contains(got.Message, tc.want) || (tc.wantNot != "" && strings.Contains(got.Message, tc.wantNot)) {
				t.Errorf("the event says %q, want it to say %q and not %q", got.Message, tc.want, tc.wantNot)
			}
		})
	}
}
