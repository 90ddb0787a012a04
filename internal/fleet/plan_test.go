package fleet

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/store"
)

// planNow is when the plans of the tests are made.
var planNow = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func fleetOf(nodes []store.Node, claims ...store.ClaimView) store.View {
	return store.View{Nodes: nodes, Claims: claims}
}

func TestPlanMoves(t *testing.T) {
	a, b := netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("198.51.100.11")
	nodes := []store.Node{
		{Node: "a", Interfaces: []store.Interface{{Name: "eth0", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24")}}}},
		{Node: "b", Interfaces: []store.Interface{{Name: "eth1", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.2/24")}}, {Name: "eth0"}}},
	}
	v := fleetOf(nodes,
		// A claim of a's own address, made before vip refused them: its
		// key names a. (Claims are in address order, as Fleet reads them.)
		store.ClaimView{Claim: store.Claim{Addr: netip.MustParseAddr("198.51.100.1"), Node: "a", Interface: "eth0"}, CreateRev: 5},
		store.ClaimView{Claim: store.Claim{Addr: a, Node: "a", Interface: "eth0"}, CreateRev: 7},
		store.ClaimView{Claim: store.Claim{Addr: b, Node: "b", Interface: "eth1"}, CreateRev: 9},
	)
	t.Run("the interface whose prefix holds the address", func(t *testing.T) {
		ms, err := planMoves(v, store.MoveRequest{Addrs: []netip.Addr{a}, To: "b"}, planNow)
		if err != nil || len(ms) != 1 || ms[0].res.Interface != "eth1" || ms[0].res.From != "a" || ms[0].claimRev != 7 {
			t.Fatalf("got %+v, %v", ms, err)
		}
	})
	t.Run("already there", func(t *testing.T) {
		ms, err := planMoves(v, store.MoveRequest{Addrs: []netip.Addr{b}, To: "b"}, planNow)
		if err != nil || !ms[0].res.Already {
			t.Fatalf("got %+v, %v", ms, err)
		}
	})
	t.Run("nobody holds it", func(t *testing.T) {
		ms, err := planMoves(v, store.MoveRequest{Addrs: []netip.Addr{netip.MustParseAddr("198.51.100.50")}, To: "a"}, planNow)
		if err != nil || !ms[0].res.Unheld || ms[0].res.Interface != "eth0" {
			t.Fatalf("got %+v, %v", ms, err)
		}
	})
	t.Run("drain", func(t *testing.T) {
		ms, err := planMoves(fleetOf(nodes, v.Claims[1:]...), store.MoveRequest{All: true, From: "a", To: "b"}, planNow)
		if err != nil || len(ms) != 1 || ms[0].res.Addr != a {
			t.Fatalf("got %+v, %v", ms, err)
		}
	})
	t.Run("a drain of a node with a claim of its own address", func(t *testing.T) {
		if _, err := planMoves(v, store.MoveRequest{All: true, From: "a", To: "b"}, planNow); !errors.Is(err, store.ErrRefused) || !strings.Contains(err.Error(), "not vip's to hand over") {
			t.Errorf("got %v, want the whole drain refused", err)
		}
	})
	for _, tc := range []struct {
		name string
		req  store.MoveRequest
		want string
	}{
		{"a node not alive", store.MoveRequest{Addrs: []netip.Addr{a}, To: "c"}, "node c is not alive in the store (live nodes: a, b)"},
		{"an interface the node lacks", store.MoveRequest{Addrs: []netip.Addr{a}, To: "b", Interface: "eth9"}, "node b has no interface eth9 (it has eth1, eth0)"},
		{"no interface on its subnet", store.MoveRequest{Addrs: []netip.Addr{netip.MustParseAddr("203.0.113.5")}, To: "a"}, "name one with -i"},
		{"the wrong owner", store.MoveRequest{Addrs: []netip.Addr{b}, From: "a", To: "a"}, "held by b, not a"},
		{"a drain of a node holding nothing", store.MoveRequest{All: true, From: "c", To: "a"}, "not alive and holds nothing"},
		{"to the node whose own address it is", store.MoveRequest{Addrs: []netip.Addr{netip.MustParseAddr("198.51.100.2")}, To: "b"}, "198.51.100.2 is node b's own address on eth1"},
		{"from the node whose own address it is", store.MoveRequest{Addrs: []netip.Addr{netip.MustParseAddr("198.51.100.1")}, To: "b"}, "198.51.100.1 is node a's own address on eth0, which its kernel answers for: it is not vip's to hand over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planMoves(v, tc.req, planNow)
			if !errors.Is(err, store.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
	t.Run("to a cordoned node", func(t *testing.T) {
		cordoned := v
		cordoned.Cordons = []store.Cordon{{Node: "b", Reason: "kernel upgrade", Since: planNow.Add(-time.Minute), Until: planNow.Add(time.Hour), Rev: 31}}
		_, err := planMoves(cordoned, store.MoveRequest{Addrs: []netip.Addr{a}, To: "b"}, planNow)
		if !errors.Is(err, store.ErrRefused) || !strings.Contains(err.Error(), `node b is cordoned`) || !strings.Contains(err.Error(), `"kernel upgrade"`) ||
			!strings.Contains(err.Error(), "1h0m0s left") || !strings.Contains(err.Error(), "--force") {
			t.Errorf("got %v, want a refusal naming the cordon, its reason, the time left and --force", err)
		}
		ms, err := planMoves(cordoned, store.MoveRequest{Addrs: []netip.Addr{a}, To: "b", Force: true}, planNow)
		if err != nil || len(ms) != 1 || ms[0].cordonRev != 31 {
			t.Errorf("forced: got %+v, %v; want the move planned on the cordon's revision", ms, err)
		}
		// One whose end has passed, its key not yet gone, holds no more.
		ms, err = planMoves(cordoned, store.MoveRequest{Addrs: []netip.Addr{a}, To: "b"}, planNow.Add(2*time.Hour))
		if err != nil || len(ms) != 1 || ms[0].cordonRev != 31 {
			t.Errorf("after its end: got %+v, %v; want the move planned", ms, err)
		}
		// A cordon of another node is none of this move's business.
		if _, err := planMoves(cordoned, store.MoveRequest{Addrs: []netip.Addr{b}, To: "a"}, planNow); err != nil {
			t.Errorf("from the cordoned node: %v", err)
		}
	})
	t.Run("homes", func(t *testing.T) {
		away := store.ClaimView{Claim: store.Claim{Addr: a, Node: "b", Home: "a"}}
		for _, tc := range []struct {
			name string
			cur  store.ClaimView
			held bool
			req  store.MoveRequest
			want string
		}{
			{"first move: the node it leaves", v.Claims[1], true, store.MoveRequest{To: "b"}, "a"},
			{"moved on: it keeps its home", away, true, store.MoveRequest{To: "c"}, "a"},
			{"back home: none", away, true, store.MoveRequest{To: "a"}, ""},
			{"asked for", v.Claims[1], true, store.MoveRequest{To: "b", Home: "c"}, "c"},
			{"nobody held it: none", store.ClaimView{}, false, store.MoveRequest{To: "b"}, ""},
		} {
			if got := homeAfter(tc.cur, tc.held, tc.req); got != tc.want {
				t.Errorf("%s: home %q, want %q", tc.name, got, tc.want)
			}
		}
		ms, err := planMoves(v, store.MoveRequest{Addrs: []netip.Addr{a}, To: "b"}, planNow)
		if err != nil || ms[0].home != "a" {
			t.Errorf("planned: %+v, %v; want home a", ms, err)
		}
	})
	t.Run("a move under way", func(t *testing.T) {
		busy := fleetOf(nodes, store.ClaimView{Claim: store.Claim{Addr: a, Node: "a"}, Move: &store.Move{To: "b"}})
		if _, err := planMoves(busy, store.MoveRequest{Addrs: []netip.Addr{a}, To: "b"}, planNow); !errors.Is(err, store.ErrRefused) || !strings.Contains(err.Error(), "already under way") {
			t.Errorf("got %v", err)
		}
	})
}

// TestMoveTimelineWhateverTheOrder: the claim's deletion and the move
// record come on two watches; a deletion seen after the target's live
// must not make the release later than the live.
func TestMoveTimelineWhateverTheOrder(t *testing.T) {
	a := netip.MustParseAddr("198.51.100.10")
	put := func(m store.Move) MoveChange { return MoveChange{Kind: MoveWritten, Addr: a, Move: m} }
	gone := MoveChange{Kind: ClaimDeleted, Addr: a}
	now := time.Now()
	released := store.Move{To: "b", From: "a", Released: now}
	live := released
	live.Live = now
	counted := live
	counted.Traffic = &store.Traffic{Counted: true, Packets: 3}
	for _, tc := range []struct {
		name  string
		order []MoveChange
	}{
		{"deletion first", []MoveChange{gone, put(released), put(live), put(counted)}},
		{"deletion after live", []MoveChange{put(released), put(live), gone, put(counted)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tick := now
			m := &pendingMove{res: store.MoveResult{Addr: a, From: "a", To: "b"}, window: time.Second}
			ended := false
			for _, ev := range tc.order {
				tick = tick.Add(time.Millisecond)
				ended = m.step(ev, tick)
			}
			if !ended || m.res.Error != "" || m.res.Traffic == nil || m.res.Waited {
				t.Fatalf("got %+v (ended %v), want a move ended with its traffic, not waited", m.res, ended)
			}
			if m.res.Released.After(m.res.Live) {
				t.Errorf("released %v after live %v", m.res.Released, m.res.Live)
			}
		})
	}
}
