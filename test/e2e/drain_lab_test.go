package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/test/labtest"
)

// TestDrain, against a real etcd and real agents with the in-kernel
// responder, a client pinging both addresses: vip drain from a host with
// no agent refuses, before anything changes, to drain a node holding an
// address with nowhere to go; then cordons a, moves each address to its
// standby b and waits until a counted no packet for them for --quiet. A
// client whose cache is pinned to b's MAC (a permanent neighbour entry, as
// a host that ignores gratuitous ARP) keeps sending to b after b is
// drained: the drain exits 3 at --timeout naming the client by MAC and
// address, with the packets b counted after the move.
func TestDrain(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "etcdctl")
	labtest.RequireRoot(t, "the eBPF responder counts after a release")
	f := newFleetLab(t)
	st := f.storeURL
	drain := func(args ...string) (api.DrainResponse, string, int) {
		t.Helper()
		out, code := vipOn(t, f.client, f.sc, append([]string{"drain", "--json", "--store", st}, args...)...)
		var r api.DrainResponse
		if code == 0 || code == 3 {
			if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &r); err != nil {
				t.Fatalf("vip drain %v --json: exit %d, %v:\n%s", args, code, err, out)
			}
		}
		return r, out, code
	}
	mustVip(t, f.a, f.sa, "claim", "192.0.2.10", "2001:db8::10", "192.0.2.60")
	mustVip(t, f.b, f.sb, "claim", "192.0.2.10", "2001:db8::10", "--standby")
	labtest.Start(t, f.client, "ping", "-i", "0.1", "192.0.2.10")
	labtest.Start(t, f.client, "ping", "-6", "-i", "0.1", "2001:db8::10")

	out, code := vipOn(t, f.client, f.sc, "drain", "a", "--store", st)
	if code != 2 || !strings.Contains(out, "192.0.2.60 has no standby that is live and not cordoned") || !strings.Contains(out, "nothing changed") {
		t.Fatalf("drain with an address that has nowhere to go: exit %d, want 2 naming it:\n%s", code, out)
	}
	fl := fleetOf(t, f)
	if len(fl.Cordons) != 0 {
		t.Errorf("a refused drain cordoned: %+v", fl.Cordons)
	}
	mustVip(t, f.a, f.sa, "release", "192.0.2.60")

	macB, macC := mac(f.b, "eth0"), mac(f.client, "eth0")
	r, out, code := drain("a", "--reason", "kernel upgrade", "--quiet", "3s", "--timeout", "25s")
	if code != 0 || !r.Done || r.Cordon == nil || r.Cordon.Reason != "drain: kernel upgrade" {
		t.Fatalf("drain a: exit %d, want 0, done, cordoned for the drain:\n%s", code, out)
	}
	if len(r.Moves) != 2 || len(r.Addrs) != 2 {
		t.Fatalf("drain a: %d moves and %d addresses, want 2 and 2:\n%s", len(r.Moves), len(r.Addrs), out)
	}
	for _, m := range r.Moves {
		if !m.OK || m.To != "b" || m.From != "a" {
			t.Errorf("drain a moved %s from %s to %s (ok %v), want a to b", m.Addr, m.From, m.To, m.OK)
		}
	}
	for _, a := range r.Addrs {
		if !a.Counted || !a.Quiet {
			t.Errorf("drain a: %s counted %v, quiet %v, want both", a.Addr, a.Counted, a.Quiet)
		}
		for _, s := range a.Senders {
			if s.MAC != macC {
				t.Errorf("drain a: %s got traffic from %s (%s), want the client's %s alone", a.Addr, s.MAC, s.From, macC)
			}
		}
	}
	fl = fleetOf(t, f)
	for _, c := range fl.Claims {
		if c.Node != "b" {
			t.Errorf("after the drain %s is on %s, want b", c.Addr, c.Node)
		}
	}
	if len(fl.Cordons) != 1 || fl.Cordons[0].Node != "a" {
		t.Errorf("after the drain the cordons are %+v, want a's", fl.Cordons)
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		out, _ := arping(t, f.client, "-c", "1", "-w", "1", "192.0.2.10")
		macs := replyMACs(out)
		return len(macs) == 1 && macs[0] == macB, "192.0.2.10 is answered by " + strings.Join(macs, ",") + ", want b alone"
	})

	// Back: a takes the address from b, but the client's cache is
	// pinned to b, which counts what it still sends.
	mustVip(t, f.client, f.sc, "uncordon", "a", "--store", st)
	mustVip(t, f.a, f.sa, "claim", "192.0.2.10", "2001:db8::10", "--standby")
	if _, err := f.client.Run(ctxFor(t, 5*time.Second), "ip", "neigh", "replace", "192.0.2.10", "lladdr", macB, "dev", "eth0", "nud", "permanent"); err != nil {
		t.Fatal(err)
	}
	r, out, code = drain("b", "--quiet", "2s", "--timeout", "6s")
	if code != 3 || r.Done {
		t.Fatalf("drain b with a client pinned to it: exit %d, want 3:\n%s", code, out)
	}
	if len(r.Addrs) != 2 || r.Addrs[0].Addr != "192.0.2.10" || r.Addrs[0].To != "a" || r.Addrs[1].To != "a" {
		t.Fatalf("drain b: addresses %+v, want both moved to a", r.Addrs)
	}
	if v6 := r.Addrs[1]; !v6.Counted || !v6.Quiet {
		t.Errorf("drain b: %+v, want 2001:db8::10 counted and quiet: the client's IPv6 cache moved", v6)
	}
	a := r.Addrs[0]
	if !a.Counted || a.Quiet || a.Packets < 10 || a.Last.IsZero() || len(a.Senders) != 1 || a.Senders[0].MAC != macC || a.Senders[0].From != "192.0.2.13" {
		t.Errorf("drain b: %+v, want counted, not quiet, the client's pings (10 or more) from %s 192.0.2.13", a, macC)
	}
	if !strings.Contains(out, "node b still gets traffic for 192.0.2.10 (from 192.0.2.13 "+macC+")") {
		t.Errorf("drain b's error does not name the stale client:\n%s", out)
	} else if why := labtest.CheckLastLine(out); why != "" {
		t.Errorf("drain b's error %s:\n%s", why, out)
	}
}

// fleetOf reads vip fleet --json from the client.
func fleetOf(t *testing.T, f *fleetLab) api.FleetResponse {
	t.Helper()
	out := mustVip(t, f.client, f.sc, "fleet", "--json", "--store", f.storeURL)
	var fl api.FleetResponse
	if err := json.Unmarshal([]byte(out), &fl); err != nil {
		t.Fatalf("vip fleet --json: %v:\n%s", err, out)
	}
	return fl
}

// TestDrainProvesQuietAtFormerOwners: a client whose cache is pinned to a
// former owner's MAC (a moved the address to b earlier, and still counts
// what reaches it, lingering) gets no answer, whatever b does. vip drain b
// finds b quiet, but does not say done: it exits 3 at --timeout naming a,
// the client and its packets (issue 35's tryout: drain said quiet and
// exited 0 while every request of that client failed).
func TestDrainProvesQuietAtFormerOwners(t *testing.T) {
	t.Parallel()
	labtest.RequireRoot(t, "the eBPF responder counts after a release")
	f := newFleetLab(t)
	st := f.storeURL
	// A third node, on the client's host: the drain's target.
	startAgent(t, f.client, f.sc, "--store", st, "--node", "c", "--lease-ttl", fleetTTL, "--log-format", "json")
	mustVip(t, f.a, f.sa, "claim", "192.0.2.10")
	mustVip(t, f.client, f.sc, "claim", "192.0.2.10", "--standby")
	mustVip(t, f.client, f.sc, "move", "192.0.2.10", "--to", "b", "--traffic-window", "0", "--store", st)
	macA, macC := mac(f.a, "eth0"), mac(f.client, "eth0")
	if _, err := f.client.Run(ctxFor(t, 5*time.Second), "ip", "neigh", "replace", "192.0.2.10", "lladdr", macA, "dev", "eth0", "nud", "permanent"); err != nil {
		t.Fatal(err)
	}
	labtest.Start(t, f.client, "ping", "-i", "0.1", "192.0.2.10")
	out, code := vipOn(t, f.client, f.sc, "drain", "b", "--to", "c", "--quiet", "2s", "--timeout", "6s", "--json", "--store", st)
	var r api.DrainResponse
	if code != 3 || json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &r) != nil || r.Done {
		t.Fatalf("drain b with a client pinned to a, its former owner: exit %d, want 3 and not done:\n%s", code, out)
	}
	if len(r.Addrs) != 1 || !r.Addrs[0].Quiet || len(r.Addrs[0].Formers) != 1 {
		t.Fatalf("drain b: %+v, want 192.0.2.10 quiet at b, with one former owner", r.Addrs)
	}
	fa := r.Addrs[0].Formers[0]
	if fa.Node != "a" || fa.Quiet || fa.Packets < 10 || len(fa.Senders) != 1 || fa.Senders[0].MAC != macC {
		t.Errorf("drain b: former owner %+v, want a, not quiet, the client's pings (10 or more) from %s", fa, macC)
	}
	if !strings.Contains(out, "a former owner still gets traffic: node a for 192.0.2.10 (from 192.0.2.13 "+macC+")") {
		t.Errorf("drain b's error does not name a and the client:\n%s", out)
	}
}
