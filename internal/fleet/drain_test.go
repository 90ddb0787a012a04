package fleet_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

func drainView(now time.Time) store.View {
	a10, a20, a30 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("2001:db8::30")
	return store.View{
		Nodes: []store.Node{{Node: "a"}, {Node: "b"}, {Node: "c"}},
		Claims: []store.ClaimView{
			// c is cordoned, d is dead: b is the one to take it.
			{Claim: store.Claim{Addr: a10, Node: "a"}, Standbys: []store.Standby{{Node: "d"}, {Node: "c"}, {Node: "b"}}},
			// Only a cordoned standby: nowhere to go.
			{Claim: store.Claim{Addr: a20, Node: "a"}, Standbys: []store.Standby{{Node: "c"}}},
			{Claim: store.Claim{Addr: a30, Node: "b"}, Standbys: []store.Standby{{Node: "a"}}},
		},
		Cordons: []store.Cordon{{Node: "c", Reason: "disk", Since: now.Add(-time.Minute)}},
	}
}

// TestPlanDrain: each address goes to its first standby that is live and
// not cordoned; one with none has nowhere to go; --to takes them all, and
// a --to that cannot take them is refused with a sentence.
func TestPlanDrain(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	v := drainView(now)
	p, err := fleet.PlanDrain(v, "a", "", false, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.To) != 1 || p.To[netip.MustParseAddr("192.0.2.10")] != "b" {
		t.Errorf("plan: %v, want 192.0.2.10 to b alone", p.To)
	}
	if len(p.Nowhere) != 1 || p.Nowhere[0] != netip.MustParseAddr("192.0.2.20") {
		t.Errorf("nowhere: %v, want 192.0.2.20", p.Nowhere)
	}
	p, err = fleet.PlanDrain(v, "a", "b", false, now)
	if err != nil || len(p.To) != 2 || len(p.Nowhere) != 0 {
		t.Errorf("--to b: %+v, %v; want both to b", p, err)
	}
	targets, by := p.Targets()
	if len(targets) != 1 || targets[0] != "b" || len(by["b"]) != 2 || by["b"][0] != netip.MustParseAddr("192.0.2.10") {
		t.Errorf("targets: %v %v", targets, by)
	}
	for _, tt := range []struct {
		to    string
		force bool
		want  string
	}{
		{"a", false, "--to a is the node drained"},
		{"d", false, "--to d is not alive in the store (live nodes: a, b, c)"},
		{"c", false, `node c is cordoned`},
	} {
		if _, err := fleet.PlanDrain(v, "a", tt.to, tt.force, now); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("--to %s: got %v, want %q", tt.to, err, tt.want)
		}
	}
	if p, err := fleet.PlanDrain(v, "a", "c", true, now); err != nil || len(p.To) != 2 {
		t.Errorf("--to c --force: %+v, %v; want both to c", p, err)
	}
	// A cordon whose end has passed keeps nobody out.
	v.Cordons[0].Until = now.Add(-time.Second)
	if p, _ := fleet.PlanDrain(v, "a", "", false, now); len(p.Nowhere) != 0 || p.To[netip.MustParseAddr("192.0.2.20")] != "c" {
		t.Errorf("after c's cordon ended: %+v, want 192.0.2.20 to c", p)
	}
}

// TestQuiet, on a fake clock: an address is quiet once its count stayed
// the same for the quiet wanted since its release or its last growth; a
// first look that finds packets counts them as just arrived; an address
// the node never listed is not quiet.
func TestQuiet(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	a10, a20, a30 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("192.0.2.30")
	q := fleet.NewQuiet(10*time.Second, map[netip.Addr]time.Time{a10: t0, a20: t0, a30: t0})
	rec := func(p10, p20 uint64) *store.Lingering {
		return &store.Lingering{Addrs: []store.LingerAddr{{Addr: a10, Since: t0, Packets: p10}, {Addr: a20, Since: t0, Packets: p20}}}
	}
	q.Observe(rec(0, 3), t0.Add(time.Second))
	q.Observe(nil, t0.Add(2*time.Second))
	q.Observe(rec(0, 5), t0.Add(4*time.Second))
	at := func(d time.Duration) map[netip.Addr]bool {
		out := map[netip.Addr]bool{}
		for _, qa := range q.Addrs() {
			out[qa.Addr] = q.IsQuiet(qa, t0.Add(d))
		}
		return out
	}
	if got := at(10 * time.Second); !got[a10] || got[a20] || got[a30] {
		t.Errorf("at 10s: %v, want 192.0.2.10 alone quiet", got)
	}
	if got := at(14 * time.Second); !got[a20] || got[a30] {
		t.Errorf("at 14s: %v, want 192.0.2.20 quiet (10s after its last growth), 192.0.2.30 not (never counted)", got)
	}
	if q.Done(t0.Add(time.Hour)) {
		t.Error("Done while 192.0.2.30 was never counted")
	}
	full := rec(0, 5)
	full.Addrs = append(full.Addrs, store.LingerAddr{Addr: a30, Since: t0})
	q.Observe(full, t0.Add(20*time.Second))
	if !q.Done(t0.Add(20 * time.Second)) {
		t.Error("not Done with every address counted and quiet")
	}

	// The node stops counting one (its record drops it), and starts
	// another anew (its agent restarted: a new Since, counts from zero):
	// neither is quiet, ever, and the drain says they were not counted.
	again := &store.Lingering{Addrs: []store.LingerAddr{{Addr: a10, Since: t0.Add(21 * time.Second)}, {Addr: a30, Since: t0}}}
	q.Observe(again, t0.Add(21*time.Second))
	if got := at(time.Hour); got[a10] || got[a20] || !got[a30] {
		t.Errorf("after the node dropped 192.0.2.20 and restarted 192.0.2.10: %v, want 192.0.2.30 alone quiet", got)
	}
	if !q.Uncounted() || q.Done(t0.Add(time.Hour)) {
		t.Error("addresses the node stopped counting leave the drain done")
	}
}

// TestQuietStale: the record's age, in the drainer's clock, counts from
// the last change of its Updated.
func TestQuietStale(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	q := fleet.NewQuiet(time.Second, nil)
	if q.Stale(t0) != 0 {
		t.Error("stale before any read")
	}
	q.Observe(&store.Lingering{Updated: t0}, t0)
	q.Observe(&store.Lingering{Updated: t0}, t0.Add(10*time.Second))
	if got := q.Stale(t0.Add(10 * time.Second)); got != 10*time.Second {
		t.Errorf("stale %v after 10s of the same record, want 10s", got)
	}
	q.Observe(&store.Lingering{Updated: t0.Add(time.Second)}, t0.Add(11*time.Second))
	if got := q.Stale(t0.Add(12 * time.Second)); got != time.Second {
		t.Errorf("stale %v a second after a new record, want 1s", got)
	}
}

// TestQuietFormers: a former owner (a node that let a drained address go
// before the drain, and still counts it) is part of the proof: the drain is
// not done while its count grows, and is once it has not grown for the
// quiet wanted since the drain first read it. Packets counted before that
// first read are not the drain's. The address's new owner is no former,
// and a node that stops counting it is followed no more.
func TestQuietFormers(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	a10 := netip.MustParseAddr("192.0.2.10")
	q := fleet.NewQuiet(5*time.Second, map[netip.Addr]time.Time{a10: t0})
	q.Observe(&store.Lingering{Node: "b", Addrs: []store.LingerAddr{{Addr: a10, Since: t0}}}, t0)
	holder := func(netip.Addr) string { return "c" }
	former := func(node string, packets uint64) store.Lingering {
		return store.Lingering{Node: node, Addrs: []store.LingerAddr{{Addr: a10, Since: t0.Add(-time.Hour), Packets: packets}}}
	}
	q.ObserveFormer(former("a", 100), holder, t0)
	q.ObserveFormer(former("c", 7), holder, t0) // the new owner: not a former
	if f := q.FormersOf(a10); len(f) != 1 || f[0].Node != "a" || f[0].Packets() != 0 {
		t.Fatalf("formers: %+v, want a alone, with none of its 100 earlier packets", f)
	}
	q.ObserveFormer(former("a", 110), holder, t0.Add(3*time.Second))
	if q.Done(t0.Add(7 * time.Second)) {
		t.Error("done 4s after the former owner last counted a packet, wanting 5s")
	}
	if f := q.FormersOf(a10); f[0].Packets() != 10 || q.FormerQuiet(f[0], t0.Add(7*time.Second)) {
		t.Errorf("former a: %d packets since the drain began, quiet %v; want 10, not quiet", f[0].Packets(), q.FormerQuiet(f[0], t0.Add(7*time.Second)))
	}
	if !q.Done(t0.Add(8 * time.Second)) {
		t.Error("not done 5s after the former owner's last packet, the drained node quiet")
	}
	// Counted no more there: nothing left to prove.
	q.ObserveFormer(store.Lingering{Node: "a"}, holder, t0.Add(9*time.Second))
	if f := q.FormersOf(a10); len(f) != 0 {
		t.Errorf("formers after a stopped counting: %+v, want none", f)
	}
}
