package announce

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

// TestTotalsOutliveReleases checks that the engine's totals only grow: the
// answers of a released claim stay counted, and a claim made anew adds its
// own to them.
func TestTotalsOutliveReleases(t *testing.T) {
	h := newEngineHarness(t, nil)
	st, err := h.claim(t, Request{a4, "eth0"}, Request{a6, "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	var frames uint64
	for _, s := range st {
		frames += s.GratuitousFrames
	}
	got := h.e.Totals()
	// fakePort answers 7 requests for every address it holds.
	if got.Answered != 14 || got.GratuitousFrames != frames || frames == 0 {
		t.Fatalf("after claiming two addresses: got %+v, want 14 answered and the first rounds' %d frames", got, frames)
	}
	events, stop := h.e.Subscribe(16)
	if _, _, err := h.e.Release(context.Background(), []netip.Addr{a4}); err != nil {
		t.Fatal(err)
	}
	stop()
	for ev := range events {
		if ev.Kind == EventRelease && !strings.Contains(ev.Message, "answered 7 requests") {
			t.Errorf("release event %q: want the 7 answers the port counted before it dropped the address", ev.Message)
		}
	}
	if got := h.e.Totals().Answered; got != 14 {
		t.Errorf("after releasing one: got %d answered, want still 14", got)
	}
	if _, err := h.claim(t, Request{a4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	if got := h.e.Totals(); got.Answered != 21 || got.GratuitousFrames <= frames {
		t.Errorf("after claiming it anew: got %+v, want 21 answered and more than %d frames", got, frames)
	}
}

func TestTotalsCountProbesAndConflicts(t *testing.T) {
	h := newEngineHarness(t, nil)
	if _, err := h.claim(t, Request{a4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	h.fc.Advance(FirstProbeDelay)
	waitFor(t, func() bool { return h.e.Totals().ProbeFrames == 1 }, "the first probe counted")

	h.e.Conflict(a4, claimer(h.fc.Now(), 1))
	h.e.Conflict(a4, claimer(h.fc.Now(), 4)) // the detector's running count
	h.e.Conflict(netip.MustParseAddr("192.0.2.99"), claimer(h.fc.Now(), 9))
	h.e.Conflict(a4, Claimer{MAC: h.ports["eth0"].MAC(), LastSeen: h.fc.Now(), Count: 9})
	if got := h.e.Totals(); got.Conflicts != 2 || got.ClaimerFrames != 4 {
		t.Errorf("got %d conflicts and %d claimer frames, want 2 and 4: reports for an address not held or of our own MAC are not conflicts",
			got.Conflicts, got.ClaimerFrames)
	}
}
