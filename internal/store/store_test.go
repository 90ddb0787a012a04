package store

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   []string
		secure bool
		err    string
	}{
		{in: "etcd://192.0.2.5:2379", want: []string{"http://192.0.2.5:2379"}},
		{in: "etcd://192.0.2.5:2379,192.0.2.6:2379/", want: []string{"http://192.0.2.5:2379", "http://192.0.2.6:2379"}},
		{in: "etcds://[2001:db8::5]:2379", want: []string{"https://[2001:db8::5]:2379"}, secure: true},
		{in: "etcd://store.example:2379", want: []string{"http://store.example:2379"}},
		{in: "http://192.0.2.5:2379", err: "is not etcd://"},
		{in: "etcd://", err: "is not etcd://"},
		{in: "etcd://192.0.2.5", err: "is not HOST:PORT"},
		{in: "etcd://192.0.2.5:2379,", err: "is not HOST:PORT"},
		{in: "192.0.2.5:2379", err: "is not etcd://"},
	} {
		got, secure, err := ParseURL(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseURL(%q): got %v, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
		case err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") || secure != tc.secure:
			t.Errorf("ParseURL(%q) = %v, %v, %v; want %v, %v", tc.in, got, secure, err, tc.want, tc.secure)
		}
	}
}

func TestKeysParse(t *testing.T) {
	k := NewKeys(DefaultPrefix)
	a := netip.MustParseAddr("198.51.100.10")
	for _, tc := range []struct {
		key  string
		want Parsed
		bad  bool
	}{
		{key: k.Node("a"), want: Parsed{Kind: KindNode, Node: "a"}},
		{key: k.Claim(a), want: Parsed{Kind: KindClaim, Addr: a}},
		{key: k.Move(a), want: Parsed{Kind: KindMove, Addr: a}},
		{key: k.Standby(a, "b"), want: Parsed{Kind: KindStandby, Addr: a, Node: "b"}},
		{key: k.Claim(netip.MustParseAddr("2001:db8::10")), want: Parsed{Kind: KindClaim, Addr: netip.MustParseAddr("2001:db8::10")}},
		{key: "/vip/claims/not-an-address", bad: true},
		{key: "/vip/claims/fe80::1%eth0", bad: true},
		{key: "/vip/nodes/bad name", bad: true},
		{key: "/vip/nodes/", bad: true},
		{key: "/vip/standby/198.51.100.10", bad: true},
		{key: "/vip/other", bad: true},
		{key: "/elsewhere/claims/198.51.100.10", bad: true},
	} {
		got, err := k.Parse(tc.key)
		if tc.bad {
			if err == nil {
				t.Errorf("Parse(%q) = %+v, want an error", tc.key, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.key, got, err, tc.want)
		}
	}
}

func TestCheckPrefixAndNode(t *testing.T) {
	for p, ok := range map[string]bool{"/vip/": true, "/a/b/": true, "vip/": false, "/vip": false, "": false} {
		if err := CheckPrefix(p); (err == nil) != ok {
			t.Errorf("CheckPrefix(%q) = %v, want ok=%v", p, err, ok)
		}
	}
	for n, ok := range map[string]bool{"a": true, "node-1.example_x": true, "": false, "a b": false, "a/b": false, strings.Repeat("x", 254): false} {
		if err := CheckNode(n); (err == nil) != ok {
			t.Errorf("CheckNode(%q) = %v, want ok=%v", n, err, ok)
		}
	}
}

func fleetOf(nodes []Node, claims ...ClaimView) View {
	return View{Nodes: nodes, Claims: claims, k: NewKeys(DefaultPrefix)}
}

func TestPlanMoves(t *testing.T) {
	a, b := netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("198.51.100.11")
	nodes := []Node{
		{Node: "a", Interfaces: []Interface{{Name: "eth0", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24")}}}},
		{Node: "b", Interfaces: []Interface{{Name: "eth1", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.2/24")}}, {Name: "eth0"}}},
	}
	v := fleetOf(nodes,
		// A claim of a's own address, made before vip refused them: its
		// key names a. (Claims are in address order, as Fleet reads them.)
		ClaimView{Claim: Claim{Addr: netip.MustParseAddr("198.51.100.1"), Node: "a", Interface: "eth0"}, createRev: 5},
		ClaimView{Claim: Claim{Addr: a, Node: "a", Interface: "eth0"}, createRev: 7},
		ClaimView{Claim: Claim{Addr: b, Node: "b", Interface: "eth1"}, createRev: 9},
	)
	t.Run("the interface whose prefix holds the address", func(t *testing.T) {
		ms, err := planMoves(v, MoveRequest{Addrs: []netip.Addr{a}, To: "b"})
		if err != nil || len(ms) != 1 || ms[0].res.Interface != "eth1" || ms[0].res.From != "a" || ms[0].createRev != 7 {
			t.Fatalf("got %+v, %v", ms, err)
		}
	})
	t.Run("already there", func(t *testing.T) {
		ms, err := planMoves(v, MoveRequest{Addrs: []netip.Addr{b}, To: "b"})
		if err != nil || !ms[0].res.Already {
			t.Fatalf("got %+v, %v", ms, err)
		}
	})
	t.Run("nobody holds it", func(t *testing.T) {
		ms, err := planMoves(v, MoveRequest{Addrs: []netip.Addr{netip.MustParseAddr("198.51.100.50")}, To: "a"})
		if err != nil || !ms[0].res.Unheld || ms[0].res.Interface != "eth0" {
			t.Fatalf("got %+v, %v", ms, err)
		}
	})
	t.Run("drain", func(t *testing.T) {
		ms, err := planMoves(fleetOf(nodes, v.Claims[1:]...), MoveRequest{All: true, From: "a", To: "b"})
		if err != nil || len(ms) != 1 || ms[0].res.Addr != a {
			t.Fatalf("got %+v, %v", ms, err)
		}
	})
	t.Run("a drain of a node with a claim of its own address", func(t *testing.T) {
		if _, err := planMoves(v, MoveRequest{All: true, From: "a", To: "b"}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not vip's to hand over") {
			t.Errorf("got %v, want the whole drain refused", err)
		}
	})
	for _, tc := range []struct {
		name string
		req  MoveRequest
		want string
	}{
		{"a node not alive", MoveRequest{Addrs: []netip.Addr{a}, To: "c"}, "node c is not alive in the store (live nodes: a, b)"},
		{"an interface the node lacks", MoveRequest{Addrs: []netip.Addr{a}, To: "b", Interface: "eth9"}, "node b has no interface eth9 (it has eth1, eth0)"},
		{"no interface on its subnet", MoveRequest{Addrs: []netip.Addr{netip.MustParseAddr("203.0.113.5")}, To: "a"}, "name one with -i"},
		{"the wrong owner", MoveRequest{Addrs: []netip.Addr{b}, From: "a", To: "a"}, "held by b, not a"},
		{"a drain of a node holding nothing", MoveRequest{All: true, From: "c", To: "a"}, "not alive and holds nothing"},
		{"to the node whose own address it is", MoveRequest{Addrs: []netip.Addr{netip.MustParseAddr("198.51.100.2")}, To: "b"}, "198.51.100.2 is node b's own address on eth1"},
		{"from the node whose own address it is", MoveRequest{Addrs: []netip.Addr{netip.MustParseAddr("198.51.100.1")}, To: "b"}, "198.51.100.1 is node a's own address on eth0, which its kernel answers for: it is not vip's to hand over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planMoves(v, tc.req)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
	t.Run("a move under way", func(t *testing.T) {
		busy := fleetOf(nodes, ClaimView{Claim: Claim{Addr: a, Node: "a"}, Move: &Move{To: "b"}})
		if _, err := planMoves(busy, MoveRequest{Addrs: []netip.Addr{a}, To: "b"}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "already under way") {
			t.Errorf("got %v", err)
		}
	})
}

// TestMoveTimelineWhateverTheOrder: the claim's deletion and the move
// record come on two watches; a deletion seen after the target's live
// must not make the release later than the live.
func TestMoveTimelineWhateverTheOrder(t *testing.T) {
	k := NewKeys(DefaultPrefix)
	a := netip.MustParseAddr("198.51.100.10")
	put := func(m Move) *clientv3.Event {
		v, err := encode(m)
		if err != nil {
			t.Fatal(err)
		}
		return &clientv3.Event{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{Key: []byte(k.Move(a)), Value: []byte(v)}}
	}
	gone := &clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(k.Claim(a))}}
	now := time.Now()
	released := Move{To: "b", From: "a", Released: now}
	live := released
	live.Live = now
	counted := live
	counted.Traffic = &Traffic{Counted: true, Packets: 3}
	for _, tc := range []struct {
		name  string
		order []*clientv3.Event
	}{
		{"deletion first", []*clientv3.Event{gone, put(released), put(live), put(counted)}},
		{"deletion after live", []*clientv3.Event{put(released), put(live), gone, put(counted)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tick := now
			m := &pendingMove{res: MoveResult{Addr: a, From: "a", To: "b"}, key: k.Move(a), claimKey: k.Claim(a), window: time.Second,
				clock: func() time.Time { tick = tick.Add(time.Millisecond); return tick }}
			ended := false
			for _, ev := range tc.order {
				ended = m.step(ev, k)
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
