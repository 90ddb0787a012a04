package agent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/netcheck"
)

// fuzzSys is a host with an interface of every kind validation refuses,
// beside eth0 on 192.0.2.0/24 and 2001:db8::/64, and eth5, which is on
// 192.0.2.0/24 too (so that picking by route can be ambiguous).
type fuzzSys struct{}

var fuzzLinks = []netcheck.Interface{
	{Name: "lo", Index: 1, Up: true, Carrier: true, Loopback: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
	{Name: "eth0", Index: 2, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Up: true, Carrier: true,
		Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.2/24"), netip.MustParsePrefix("2001:db8::2/64")}},
	{Name: "eth1", Index: 3, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 3}, Up: false, Carrier: true},
	{Name: "eth2", Index: 4, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 4}, Up: true, Carrier: true, NoARP: true},
	{Name: "eth3", Index: 5, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 5}, Up: true, Carrier: true, IPv6Disabled: true,
		Prefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.2/24")}},
	{Name: "eth4", Index: 6, Up: true, Carrier: true},
	{Name: "eth5", Index: 7, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 7}, Up: true, Carrier: false},
}

func (fuzzSys) Interface(name string) (netcheck.Interface, error) {
	for _, l := range fuzzLinks {
		if l.Name == name {
			return l, nil
		}
	}
	return netcheck.Interface{}, fmt.Errorf("%s: %w", name, netcheck.ErrNoInterface)
}

func (fuzzSys) InterfaceByIndex(i int) (netcheck.Interface, error) {
	for _, l := range fuzzLinks {
		if l.Index == i {
			return l, nil
		}
	}
	return netcheck.Interface{}, errors.New("no such index")
}

func (fuzzSys) ConnectedRoutes() ([]netcheck.Route, error) {
	return []netcheck.Route{
		{Dst: netip.MustParsePrefix("127.0.0.0/8"), LinkIndex: 1},
		{Dst: netip.MustParsePrefix("192.0.2.0/24"), LinkIndex: 2},
		{Dst: netip.MustParsePrefix("2001:db8::/64"), LinkIndex: 2},
		{Dst: netip.MustParsePrefix("198.51.100.0/24"), LinkIndex: 5},
		{Dst: netip.MustParsePrefix("203.0.113.0/24"), LinkIndex: 2},
		{Dst: netip.MustParsePrefix("203.0.113.0/25"), LinkIndex: 7},
	}, nil
}

// FuzzClaimRequestValidate validates decoded claim requests built from
// arbitrary fields. Validate must not panic; every refusal must be bad
// input (errors.Is netcheck.ErrInvalid), since the server answers anything
// else with a 500; and an accepted plan must hold only what the command
// line would accept: claimable addresses, each once, on an interface that
// passes the checks, with burst options inside their bounds. A request
// that went through JSON must validate as the one that was sent.
//
// The seeds in testdata/fuzz/FuzzClaimRequestValidate cover each refusal
// and the accepted shapes.
func FuzzClaimRequestValidate(f *testing.F) {
	f.Add("192.0.2.10", "", true, int64(5*time.Second), int64(1100*time.Millisecond), "", int64(0), false, "", true, int64(10*time.Second))
	f.Add("192.0.2.10,2001:db8::10", "eth0", false, int64(0), int64(0), "arp-reply,na", int64(30*time.Second), true, "yield", false, int64(0))
	f.Add("203.0.113.7", "", false, int64(0), int64(0), "", int64(0), false, "", false, int64(0))
	f.Add("198.51.100.9,2001:db8::9", "eth3", true, int64(0), int64(time.Millisecond), "na", int64(-1), false, "steal", true, int64(-1))
	f.Fuzz(func(t *testing.T, addrs, iface string, hasWindow bool, window, interval int64, frames string,
		refreshEvery int64, assign bool, onConflict string, hasProbe bool, probeEvery int64) {
		r := api.ClaimRequest{
			Interface:  iface,
			Frames:     frames,
			Assign:     assign,
			OnConflict: onConflict,
		}
		// Zero stands for absent here, so that the corpus keeps its shape;
		// a given zero is the unit tests'.
		if interval != 0 {
			i := api.Duration(interval)
			r.Interval = &i
		}
		if refreshEvery != 0 {
			e := api.Duration(refreshEvery)
			r.RefreshEvery = &e
		}
		if addrs != "" {
			r.Addrs = strings.Split(addrs, ",")
		}
		if hasWindow {
			w := api.Duration(window)
			r.Window = &w
		}
		if hasProbe {
			p := api.Duration(probeEvery)
			r.ProbeEvery = &p
		}
		plan, err := agent.PlanClaim(r, fuzzSys{})
		if err != nil {
			if !errors.Is(err, netcheck.ErrInvalid) {
				t.Fatalf("Validate(%+v): got %v, which is not bad input: the server would answer 500 for input alone", r, err)
			}
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("Validate(%+v): got error %q, want one sentence", r, msg)
			}
		} else {
			checkPlan(t, r, plan)
		}
		again, err2 := agent.PlanClaim(r, fuzzSys{})
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(plan, again) {
			t.Fatalf("Validate(%+v) is not deterministic: %+v, %v then %+v, %v", r, plan, err, again, err2)
		}

		// What a client sends, the agent decodes to the same request.
		b, merr := json.Marshal(r)
		if merr != nil {
			t.Fatalf("marshal %+v: %v", r, merr)
		}
		var decoded api.ClaimRequest
		if uerr := json.Unmarshal(b, &decoded); uerr != nil {
			t.Fatalf("decode %s (marshalled from %+v): %v", b, r, uerr)
		}
		viaJSON, err3 := agent.PlanClaim(decoded, fuzzSys{})
		if (err == nil) != (err3 == nil) || (err == nil && !reflect.DeepEqual(plan, viaJSON)) {
			t.Fatalf("through JSON %s: got %+v, %v; sent %+v, %v", b, viaJSON, err3, plan, err)
		}
	})
}

func checkPlan(t *testing.T, r api.ClaimRequest, p agent.Plan) {
	t.Helper()
	if len(p.Requests) != len(r.Addrs) || len(p.Requests) == 0 || len(p.Requests) > api.MaxAddrs {
		t.Fatalf("accepted %+v with %d requests, want one per address (%d)", r, len(p.Requests), len(r.Addrs))
	}
	seen := map[netip.Addr]bool{}
	frames := p.Options.Frames
	if frames == 0 {
		frames = announce.DefaultFrameKinds
	}
	for _, q := range p.Requests {
		if seen[q.Addr] {
			t.Fatalf("accepted %+v naming %s twice", r, q.Addr)
		}
		seen[q.Addr] = true
		if _, err := netcheck.ParseAddr(q.Addr.String()); err != nil {
			t.Fatalf("accepted %+v with address %s, which is not claimable: %v", r, q.Addr, err)
		}
		l, err := netcheck.CheckInterface(fuzzSys{}, q.Interface)
		if err != nil {
			t.Fatalf("accepted %+v on interface %q, which fails its checks: %v", r, q.Interface, err)
		}
		if r.Interface != "" && q.Interface != r.Interface {
			t.Fatalf("accepted %+v on %s, want the asked interface %s", r, q.Interface, r.Interface)
		}
		if err := netcheck.CheckAddrOnLink(q.Addr, l); err != nil {
			t.Fatalf("accepted %+v: %v", r, err)
		}
		if (q.Addr.Is4() && !frames.IPv4()) || (q.Addr.Is6() && !frames.IPv6()) {
			t.Fatalf("accepted %+v: frames %s never announce %s", r, frames, q.Addr)
		}
	}
	o := p.Options
	switch {
	case o.Window < 0:
		t.Fatalf("accepted %+v with window %v", r, o.Window)
	case o.Interval != 0 && o.Interval < api.MinInterval:
		t.Fatalf("accepted %+v with interval %v, under %v", r, o.Interval, api.MinInterval)
	case o.RefreshEvery != 0 && o.RefreshEvery < time.Second:
		t.Fatalf("accepted %+v with refresh-every %v", r, o.RefreshEvery)
	case o.ProbeEvery != 0 && o.ProbeEvery != -1 && o.ProbeEvery < time.Second:
		t.Fatalf("accepted %+v with probe-every %v", r, o.ProbeEvery)
	case o.Assign != r.Assign:
		t.Fatalf("accepted %+v with assign %v", r, o.Assign)
	}
	if _, err := announce.ParseConflictPolicy(string(o.OnConflict)); err != nil {
		t.Fatalf("accepted %+v with policy %q: %v", r, o.OnConflict, err)
	}
}
