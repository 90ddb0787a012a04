package store

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
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
		{key: k.Cordon("b"), want: Parsed{Kind: KindCordon, Node: "b"}},
		{key: "/vip/cordons/bad name", bad: true},
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

// TestParseLingering: a node's counts after its releases are one of vip's
// records, not a skipped key.
func TestParseLingering(t *testing.T) {
	k := NewKeys(DefaultPrefix)
	p, err := k.Parse(k.Lingering("a"))
	if err != nil || p.Kind != KindLingering || p.Node != "a" {
		t.Errorf("Parse(%s): %+v, %v", k.Lingering("a"), p, err)
	}
	if _, err := k.Parse(k.Prefix + "lingering/a/b"); err == nil {
		t.Error("a lingering key with a slash in its node parsed")
	}
}

// TestViewStates: an address's state as vip fleet lists it, from what the
// store holds: held, moving, taking-over (a take-over's move), free, and
// unknown for an address nobody holds whose standbys are not registered:
// when the agents could not reach the store for longer than their leases,
// every registration and claim went with them, while they run and take
// their addresses back once they reach it (issue 31: "no live node" and
// every address free, 0.6 s before they did). The standbys that are not
// registered are listed.
func TestViewStates(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	claims := []ClaimView{
		{Claim: Claim{Addr: a("192.0.2.10"), Node: "a"}, Standbys: []Standby{{Node: "c"}}},
		{Claim: Claim{Addr: a("192.0.2.11"), Node: "a"}, Move: &Move{To: "b"}},
		{Claim: Claim{Addr: a("192.0.2.12"), Node: "a"}, Move: &Move{To: "b", TakeOver: true}},
	}
	for _, tc := range []struct {
		name             string
		v                View
		want             []string
		wantUnregistered []string
	}{
		{name: "a registered standby: free",
			v: View{Nodes: []Node{{Node: "a"}, {Node: "b"}, {Node: "c"}}, Claims: claims,
				Free: []ClaimView{{Claim: Claim{Addr: a("192.0.2.13")}, Standbys: []Standby{{Node: "b"}, {Node: "d"}}}}},
			want:             []string{"192.0.2.10 held", "192.0.2.11 moving", "192.0.2.12 taking-over", "192.0.2.13 free"},
			wantUnregistered: []string{"d"}},
		{name: "no registered standby: unknown",
			v: View{Nodes: []Node{{Node: "a"}, {Node: "c"}}, Claims: claims,
				Free: []ClaimView{{Claim: Claim{Addr: a("192.0.2.13")}, Standbys: []Standby{{Node: "d"}, {Node: "b"}}}}},
			want:             []string{"192.0.2.10 held", "192.0.2.11 moving", "192.0.2.12 taking-over", "192.0.2.13 unknown"},
			wantUnregistered: []string{"b", "d"}},
		{name: "every lease expired: no node, every address unknown",
			v: View{Free: []ClaimView{
				{Claim: Claim{Addr: a("192.0.2.10")}, Standbys: []Standby{{Node: "b"}}},
				{Claim: Claim{Addr: a("192.0.2.20")}, Standbys: []Standby{{Node: "a"}}},
			}},
			want:             []string{"192.0.2.10 unknown", "192.0.2.20 unknown"},
			wantUnregistered: []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.v.API(time.Now())
			var got []string
			for _, c := range f.Claims {
				got = append(got, c.Addr+" "+c.State)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("states %v, want %v", got, tc.want)
			}
			if !slices.Equal(f.Unregistered, tc.wantUnregistered) {
				t.Errorf("unregistered %v, want %v", f.Unregistered, tc.wantUnregistered)
			}
		})
	}
}
