package announce

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// drain returns what ch holds now.
func drain(ch <-chan Event) []Event {
	var out []Event
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// TestSubscribeSinceReplaysKept: a subscription since a time starts with
// the kept events after it, in order, then the live ones, none twice and
// none left out; a zero since starts with nothing kept.
func TestSubscribeSinceReplaysKept(t *testing.T) {
	h := newHub()
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		h.publish(Event{Time: t0.Add(time.Duration(i) * time.Second), Kind: EventClaim, Count: i})
	}
	live, stopLive := h.subscribe(16)
	defer stopLive()
	since, stop := h.subscribeSince(16, t0.Add(2*time.Second))
	defer stop()
	h.publish(Event{Time: t0.Add(5 * time.Second), Kind: EventRelease, Count: 5})

	var got []int
	for _, ev := range drain(since) {
		got = append(got, ev.Count)
	}
	if want := []int{3, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("since 10:00:02: got events %v, want %v (the kept after it, then the live)", got, want)
	}
	if evs := drain(live); len(evs) != 1 || evs[0].Count != 5 {
		t.Errorf("a subscription from now on: got %+v, want the live event alone", evs)
	}
}

// TestSubscribeSinceSaysWhatIsNoLongerKept: past keptEvents, the oldest
// go, and a subscription since a time before them starts with a missed
// event that says which; one since a time after them does not.
func TestSubscribeSinceSaysWhatIsNoLongerKept(t *testing.T) {
	h := newHub()
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for i := range keptEvents + 10 {
		h.publish(Event{Time: t0.Add(time.Duration(i) * time.Millisecond), Kind: EventClaim, Count: i})
	}
	ch, stop := h.subscribeSince(1, t0.Add(-time.Second))
	defer stop()
	evs := drain(ch)
	if len(evs) != keptEvents+1 {
		t.Fatalf("got %d events, want the missed one and the %d kept", len(evs), keptEvents)
	}
	if evs[0].Kind != EventMissed || !strings.Contains(evs[0].Message, "no longer kept") || !strings.Contains(evs[0].Message, "10:00:00.009") {
		t.Errorf("first event %+v, want a missed one saying events up to 10:00:00.009 are no longer kept", evs[0])
	}
	if evs[1].Count != 10 || evs[len(evs)-1].Count != keptEvents+9 {
		t.Errorf("kept events from %d to %d, want 10 to %d, in order", evs[1].Count, evs[len(evs)-1].Count, keptEvents+9)
	}
	later, stopLater := h.subscribeSince(1, t0.Add(20*time.Millisecond))
	defer stopLater()
	if evs := drain(later); len(evs) == 0 || evs[0].Kind == EventMissed || evs[0].Count != 21 {
		t.Errorf("since after the oldest kept: first %+v, want the event 21 and no missed one", evs[:min(1, len(evs))])
	}
}
