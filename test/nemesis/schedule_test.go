package nemesis

import (
	"slices"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	ttl := 3 * time.Second
	p := Plan{Seed: 42, Steps: 2 * len(All()), Kinds: All(), TTL: ttl, DuringOdds: 0.5}
	a, err := Schedule(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Schedule(p)
	if !slices.Equal(a, b) {
		t.Fatal("the same plan gave two schedules")
	}
	p.Seed = 43
	if c, _ := Schedule(p); slices.Equal(a, c) {
		t.Error("seeds 42 and 43 gave the same schedule")
	}
	// Every kind once in each round.
	for round := range 2 {
		var ks []Kind
		for _, s := range a[round*len(All()) : (round+1)*len(All())] {
			ks = append(ks, s.Kind)
		}
		slices.Sort(ks)
		if !slices.Equal(ks, slices.Sorted(slices.Values(All()))) {
			t.Errorf("round %d has kinds %v, want each of %v once", round, ks, All())
		}
	}
	for _, s := range a {
		switch s.Kind {
		case FreezeShort:
			if s.Hold >= ttl*3/4 {
				t.Errorf("a short freeze of %v, want under 3/4 of the TTL", s.Hold)
			}
		case FreezeLong, CutStore, CutAll, StoreDown, StoreFrozen, QuorumLost:
			if s.Hold <= ttl {
				t.Errorf("%s held %v, want past the TTL", s.Kind, s.Hold)
			}
		case OutageAckCut:
			if s.Hold <= 2*ttl {
				t.Errorf("%s held %v, want past twice the TTL: one before the cut, one for the silence", s.Kind, s.Hold)
			}
		}
		if s.Kind.StoreWide() && s.During != 0 {
			t.Errorf("step %+v: an action during a store-wide outage", s)
		}
		if s.During != 0 && (!s.During.IsAction() || s.After >= s.Hold) {
			t.Errorf("step %+v: an action during it must be an action within the hold", s)
		}
	}
}

func TestScheduleRefusesBadPlans(t *testing.T) {
	for _, p := range []Plan{{Steps: 1, TTL: time.Second}, {Steps: 0, Kinds: All(), TTL: time.Second}, {Steps: 1, Kinds: All(), TTL: time.Second, DuringOdds: 2}} {
		if _, err := Schedule(p); err == nil {
			t.Errorf("plan %+v: want an error", p)
		}
	}
}

func TestParseKinds(t *testing.T) {
	got, err := ParseKinds("freeze-long, kill")
	if err != nil || !slices.Equal(got, []Kind{FreezeLong, Kill}) {
		t.Errorf("got %v, %v; want freeze-long and kill", got, err)
	}
	if _, err := ParseKinds("freeze"); err == nil {
		t.Error("an unknown name: want an error")
	}
}
