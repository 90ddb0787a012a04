package main

import (
	"slices"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
)

func TestMaxInWindow(t *testing.T) {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	sends := []schedSend{
		{frames: 2, at: ms(0)}, {frames: 2, at: ms(50)}, {frames: 1, at: ms(99)},
		{frames: 2, at: ms(100)}, {frames: 2, at: ms(300)},
	}
	tests := []struct {
		w    time.Duration
		want int
	}{
		{ms(1), 2},       // one send at a time
		{ms(100), 5},     // (0, 100] holds 50, 99 and 100; the send at 0 is out
		{ms(101), 7},     // [0, 100]
		{time.Second, 9}, // all
	}
	for _, tt := range tests {
		if got := maxInWindow(sends, tt.w); got != tt.want {
			t.Errorf("window %v: got %d frames, want %d", tt.w, got, tt.want)
		}
	}
	if got := maxInWindow(nil, time.Second); got != 0 {
		t.Errorf("no sends: got %d, want 0", got)
	}
}

func TestPctl(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}} {
		if got := pctl(ds, tt.p); got != tt.want {
			t.Errorf("p%v: got %v, want %v", tt.p, got, tt.want)
		}
	}
	if got := pctl(nil, 0.99); got != 0 {
		t.Errorf("empty: got %v, want 0", got)
	}
}

// TestSchedStats checks the definitions on a run small enough to work out
// by hand: a cap of 1,000 frames/s with a 4-frame bucket, rounds of 2
// frames, a window of 2.5 s and rounds 1 s apart.
func TestSchedStats(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	run := &schedRun{
		cfg:  announce.SchedulerConfig{Window: ms(2500), Interval: time.Second, Rate: 1000, Bucket: 4},
		arms: []time.Duration{0, 0, 0, ms(0.5)},
		sends: []schedSend{
			// First rounds: the bucket lets two out at once, then one
			// every 2 ms; key 2 goes out 1 ms later than the cap allows.
			{key: 0, frames: 2, at: 0},
			{key: 1, frames: 2, at: 0},
			{key: 2, frames: 2, at: ms(3)},
			{key: 3, frames: 2, at: ms(5)},
			{key: 3, frames: 1, at: ms(6), probe: true},
			// Later rounds: key 1's second round is 4 ms late, and its
			// third is on time after it; key 3 misses its third.
			{key: 0, frames: 2, at: ms(1000)},
			{key: 1, frames: 2, at: ms(1004)},
			{key: 2, frames: 2, at: ms(1003)},
			{key: 3, frames: 2, at: ms(1005)},
			{key: 0, frames: 2, at: ms(2000)},
			{key: 2, frames: 2, at: ms(2003.5)},
			{key: 1, frames: 2, at: ms(2004)},
		},
	}
	st := run.stats()
	if st.Rounds != 11 || st.Probes != 1 || st.Frames != 23 {
		t.Errorf("got %d rounds, %d probes, %d frames; want 11, 1, 23", st.Rounds, st.Probes, st.Frames)
	}
	if st.WantRounds != 3 || st.MinRounds != 2 || st.MaxRounds != 3 || st.Short != 1 {
		t.Errorf("got want %d, rounds %d–%d, %d short; want 3, 2–3, 1", st.WantRounds, st.MinRounds, st.MaxRounds, st.Short)
	}
	if want := []time.Duration{0, 0, 0, 0, 0, ms(0.5), ms(4)}; !slices.Equal(st.Late, want) {
		t.Errorf("got lateness %v, want %v", st.Late, want)
	}
	if st.Drift != ms(4) || st.MinGap != time.Second {
		t.Errorf("got drift %v, least gap %v; want 4ms, 1s", st.Drift, st.MinGap)
	}
	// The cap allowed the first rounds at 0, 0, 2 and 4 ms.
	if want := []time.Duration{0, 0, ms(1), ms(1)}; !slices.Equal(st.FirstExcess, want) {
		t.Errorf("got first rounds beyond the cap %v, want %v", st.FirstExcess, want)
	}
	if want := []time.Duration{0, 0, ms(3), ms(4.5)}; !slices.Equal(st.FirstDelay, want) {
		t.Errorf("got first-round delays %v, want %v", st.FirstDelay, want)
	}
	if st.FirstSpread != ms(5) || st.CapSpread != ms(4) {
		t.Errorf("got spread %v against the cap's %v, want 5ms against 4ms", st.FirstSpread, st.CapSpread)
	}
	// Key 1's second round was due at 1,000 ms with 2 frames left in the
	// bucket, key 2's at 1,003 ms with 3 frames refilled: an ideal sender
	// would have been late with none.
	if st.CapLate != 0 {
		t.Errorf("got lateness forced by the cap %v, want 0", st.CapLate)
	}
	if st.lateOK(run.cfg.Interval) {
		t.Error("a key short of its rounds: got lateOK")
	}
	if !st.firstOK() || !st.paceOK() {
		t.Errorf("got firstOK %v, paceOK %v; want both", st.firstOK(), st.paceOK())
	}
	// 100 ms holds the first rounds and the probe: 9 frames, against
	// 100 + 4 + 2.
	if p := st.Pace[0]; p.Window != 100*time.Millisecond || p.Max != 9 || p.Limit != 106 {
		t.Errorf("got pace %+v, want 9 frames in 100ms against a limit of 106", p)
	}
}
