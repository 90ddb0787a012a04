package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

// TestFleetFailsafeStoreFrozen freezes the store (SIGSTOP of etcd) for 20 s
// under two agents with --failsafe, a owning both addresses and b standing
// by: a's renewals go unanswered, but b, asked over the signed channel,
// does not reach the store either and promises to take none of a's
// addresses, so a answers through the outage: no address goes unanswered
// for over a second, and b never answers. Without the failsafe a fenced
// 4.5 s after its last renewal and every address went dark until the
// store was back (16.6 s of 20). At a 6 s TTL, whose rounds of questions
// leave the most room on a loaded machine (at the default 2 s it passed
// too, on an idle one: requests waited 44-50 ms at most).
func TestFleetFailsafeStoreFrozen(t *testing.T) {
	skipRaced(t)
	// Not in parallel: its probe is steady (a request every 100 ms), and
	// the other lab tests' timing bounds are kept for a machine whose
	// two cores they share with fewer labs.
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	f := newFleetLabWith(t, failsafeDefault, "--lease-ttl", "6s")
	v4, v6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	mustVip(t, f.a, f.sa, "claim", v4.String(), v6.String())
	mustVip(t, f.b, f.sb, "claim", v4.String(), v6.String(), "--standby")
	capture := labtest.Capture(t, f.client, "eth0", "arp or icmp6")
	probeSteady(t, f.client, v4, v6)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		pkts := capture.Snapshot(t)
		return len(answersFor(pkts, v4)) > 0 && len(answersFor(pkts, v6)) > 0, "no answers from a before the store freezes"
	})
	macA, macB := mac(f.a, "eth0"), mac(f.b, "eth0")

	frozen := time.Now()
	thaw := f.etcd.Freeze(t)
	labtest.Eventually(t, 40*time.Second, func() (bool, string) {
		if st := status(t, f.a, f.sa).Agent.Store; st == nil || !st.Fenced.IsZero() {
			t.Fatalf("a fenced while the store was frozen: %+v\n%s", st, f.agentA.Output())
		}
		return time.Since(frozen) > 20*time.Second, "20 s of a frozen store"
	})
	thaw()
	thawed := time.Now()
	pkts := probedPast(t, capture, v4, thawed.Add(2*time.Second), 100, "the store is back")
	for _, vip := range []netip.Addr{v4, v6} {
		for _, an := range answersFor(pkts, vip) {
			if an.mac == macB {
				t.Errorf("%s answered by the standby b at %s while a held it", vip, an.at.Format("15:04:05.000"))
			}
		}
		longest, from := unanswered(pkts, vip, macA, frozen, thawed.Add(2*time.Second))
		t.Logf("%s: the longest a request waited for a's answer, from the freeze to 2 s after the thaw: %v, from %s", vip, longest.Round(time.Millisecond), from.Format("15:04:05.000"))
		if longest > time.Second {
			t.Errorf("%s went unanswered for %v from %s (store frozen %s-%s), want at most 1 s", vip, longest,
				from.Format("15:04:05.000"), frozen.Format("15:04:05.000"), thawed.Format("15:04:05.000"))
		}
		if longest > 500*time.Millisecond {
			t.Logf("store frozen %s, thawed %s; a's log:\n%s", frozen.Format("15:04:05.000"), thawed.Format("15:04:05.000"), f.agentA.Output())
		}
	}
	// a's status said it was not fenced all through the freeze (above).
	// etcd, woken, may expire a lease it did not hear renewed for its
	// TTL: a fences then and claims again at once, within the second
	// the gaps allow.
	out := f.agentA.Output()
	if !strings.Contains(out, "answering past the lease's deadline") {
		t.Errorf("a never said it answered on failsafe:\n%s", out)
	}
	if strings.Contains(f.agentB.Output(), "standby took over") {
		t.Errorf("b took over:\n%s", f.agentB.Output())
	}
	// Once the store is back, its history says, from any host, who
	// answered on failsafe, from when to when, on whose promises.
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		var got []string
		for _, c := range historyOf(t, f).Changes {
			got = append(got, changeLine(c))
			if c.Kind == "failsafe" && c.Node == "a" && strings.Contains(c.Reason+c.Message, "answered on the promises of b") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("vip history says nothing of a on failsafe: %q", got)
	})
}

// probeSteady asks for the VIPs from h every 100 ms, whether or not the
// last request was answered: probe's loop waits up to a second for an
// answer (arping takes whole seconds), so one request missed in a 100 ms
// fence would count as a second unanswered.
func probeSteady(t *testing.T, h *lab.Host, v4, v6 netip.Addr) {
	t.Helper()
	labtest.Start(t, h, "sh", "-c", fmt.Sprintf("while :; do arping -q -b -c 1 -w 1 -I eth0 %s & sleep 0.1; done", v4))
	labtest.Start(t, h, "sh", "-c", fmt.Sprintf("while :; do ndisc6 -q -n -r 1 -w 50 %s eth0; sleep 0.05; done", v6))
}

// unanswered is the longest a request for addr sent from from to to
// waited for mac's answer (or that of any of more: to the next answer, or
// to to), and when that request went: how long the address was dark for
// a client that asked, whatever the probe's own pace.
func unanswered(pkts []gopacket.Packet, addr netip.Addr, mac string, from, to time.Time, more ...string) (time.Duration, time.Time) {
	var answers []time.Time
	for _, an := range answersFor(pkts, addr) {
		if an.mac == mac || slices.Contains(more, an.mac) {
			answers = append(answers, an.at)
		}
	}
	var longest time.Duration
	var at time.Time
	for _, pk := range pkts {
		ts := pk.Metadata().Timestamp
		if ts.Before(from) || ts.After(to) || !isRequestFor(pk, addr) {
			continue
		}
		end := to
		if i, _ := slices.BinarySearchFunc(answers, ts, time.Time.Compare); i < len(answers) {
			end = answers[i]
		}
		if d := end.Sub(ts); d > longest {
			longest, at = d, ts
		}
	}
	return longest, at
}

// isRequestFor says whether pk asks who has addr: an ARP request or a
// neighbor solicitation for it, not from it.
func isRequestFor(pk gopacket.Packet, addr netip.Addr) bool {
	if arp, ok := pk.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
		return arp.Operation == layers.ARPRequest && addrOf(arp.DstProtAddress) == addr && addrOf(arp.SourceProtAddress) != addr
	}
	if ns, ok := pk.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation); ok {
		return addrOf(ns.TargetAddress) == addr
	}
	return false
}

// TestFleetFailsafeJoinerWaits cuts a and b off from the store, but not
// from each other: a answers on failsafe, b's promise covering it. Then c
// joins the fleet, reaching the store, which a cannot see: a never asks
// it. Once a's lease is gone, c's claim of a's address is refused, since a
// may still answer, and c answers nothing. When b reaches the store again,
// it says so to a, which fences when b's last promise ends (it binds b
// whatever b answers now); then b clears a's
// failsafe set and takes the address as its standby, with no frame of a
// after its first.
func TestFleetFailsafeJoinerWaits(t *testing.T) {
	skipRaced(t)
	// Not in parallel: its probe is steady (a request every 100 ms), and
	// the other lab tests' timing bounds are kept for a machine whose
	// two cores they share with fewer labs.
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	f := newFleetLabWith(t, "--failsafe", "--lease-ttl", "6s")
	v4, v6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	capture, macA, _ := probeOwned(t, f, v4, v6, "the cut")
	storeIP := netip.MustParseAddr("192.0.2.1")
	labtest.CutFrom(t, f.a, "eth0", storeIP)
	cutB := labtest.CutFrom(t, f.b, "eth0", storeIP)
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		st := status(t, f.a, f.sa).Agent.Store
		if st != nil && !st.Fenced.IsZero() {
			t.Fatalf("a fenced although b, cut off too, could promise:\n%s", f.agentA.Output())
		}
		return st != nil && st.Failsafe != nil, "a is not on failsafe"
	})
	agentC := startAgent(t, f.client, f.sc, "--store", f.storeURL, "--node", "c", "--lease-ttl", "6s", "--log-format", "json", "--failsafe")
	macC := mac(f.client, "eth0")
	cli := etcdlab.Client(t, f.client, f.etcd.Endpoint())
	keys := store.NewKeys(store.DefaultPrefix)
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		resp, err := cli.Get(ctxFor(t, 5*time.Second), keys.Node("a"))
		return err == nil && resp.Count == 0, "a's lease is not gone from the store"
	})
	// c's claim is refused at once, saying why, and leaves nothing
	// behind; again two seconds on.
	for range 2 {
		out, code := vipOn(t, f.client, f.sc, "claim", v4.String(), v6.String())
		if code == 0 || !strings.Contains(out, "may still answer on failsafe") {
			t.Fatalf("c's claim while a answered on failsafe: exit %d, want a refusal that says why:\n%s\n%s", code, out, agentC.Output())
		}
		refused := time.Now()
		labtest.Eventually(t, 10*time.Second, func() (bool, string) {
			return time.Since(refused) > 2*time.Second, "two seconds more of a on failsafe"
		})
	}
	if st := status(t, f.a, f.sa).Agent.Store; st == nil || st.Failsafe == nil || !st.Fenced.IsZero() {
		t.Fatalf("a stopped answering on failsafe while b could still promise: %+v", st)
	}
	pkts := capture.Snapshot(t)
	for _, vip := range []netip.Addr{v4, v6} {
		if n := len(fromMAC(pkts, macC, time.Time{}, vip)); n > 0 {
			t.Errorf("%s: c sent %d frames for it while a answered on failsafe", vip, n)
		}
	}

	// b reaches the store again: a fences, and the address goes on.
	cutB.Heal(t)
	labtest.Eventually(t, 30*time.Second, func() (bool, string) {
		resp, err := cli.Get(ctxFor(t, 5*time.Second), keys.Claim(v4))
		return err == nil && resp.Count == 1, "nobody took 192.0.2.10 after b reached the store"
	})
	pkts = probedPast(t, capture, v4, time.Now(), 50, "the take-over")
	for _, vip := range []netip.Addr{v4, v6} {
		var lastA, firstNew time.Time
		for _, an := range answersFor(pkts, vip) {
			switch {
			case an.mac == macA:
				lastA = an.at
			case firstNew.IsZero():
				firstNew = an.at
			}
		}
		t.Logf("%s: a's last answer %s, the new owner's first %s", vip, lastA.Format("15:04:05.000"), firstNew.Format("15:04:05.000"))
		if firstNew.IsZero() || !lastA.Before(firstNew) {
			t.Errorf("%s: a's last answer at %s, the new owner's first at %s: want a silent before", vip, lastA, firstNew)
		}
	}
	if out := f.agentB.Output() + agentC.Output(); !strings.Contains(out, "cleared a lapsed owner's failsafe set") {
		t.Errorf("nobody cleared a's failsafe set:\n%s", out)
	}
}

// TestFleetFailsafeThreeAgents freezes the store under three agents with
// --failsafe, a owning both addresses and b and c standing by. For 20 s a
// answers on both their promises: no request waits over a second, and
// neither standby answers. Then, the store still frozen, c's agent is
// killed: a's next round goes unanswered by c, so a falls silent within
// c's last promise (TTL/2) and a second, before anyone could take over.
// Once the store is back, whoever holds the addresses answers alone: a
// never answers after another MAC did.
func TestFleetFailsafeThreeAgents(t *testing.T) {
	skipRaced(t)
	// Not in parallel: its probe is steady (a request every 100 ms), and
	// the other lab tests' timing bounds are kept for a machine whose
	// two cores they share with fewer labs.
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	const ttl = 6 * time.Second
	f := newFleetLabWith(t, "--failsafe", "--lease-ttl", ttl.String())
	agentC := startAgent(t, f.client, f.sc, "--store", f.storeURL, "--node", "c", "--lease-ttl", ttl.String(), "--log-format", "json", "--failsafe")
	v4, v6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	vips := []netip.Addr{v4, v6}
	mustVip(t, f.a, f.sa, "claim", v4.String(), v6.String())
	mustVip(t, f.b, f.sb, "claim", v4.String(), v6.String(), "--standby")
	mustVip(t, f.client, f.sc, "claim", v4.String(), v6.String(), "--standby")
	macA, macB, macC := mac(f.a, "eth0"), mac(f.b, "eth0"), mac(f.client, "eth0")
	// a asks only the set the store has: wait until it names both.
	cli := etcdlab.Client(t, f.client, f.etcd.Endpoint())
	keys := store.NewKeys(store.DefaultPrefix)
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		named, why := setNames(t, cli, keys, "a")
		return slices.Equal(named, []string{"b", "c"}), fmt.Sprintf("a's failsafe set does not name b and c: %v %s", named, why)
	})
	capture := labtest.Capture(t, f.client, "eth0", "arp or icmp6")
	probeSteady(t, f.client, v4, v6)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		pkts := capture.Snapshot(t)
		return len(answersFor(pkts, v4)) > 0 && len(answersFor(pkts, v6)) > 0, "no answers from a before the store freezes"
	})

	frozen := time.Now()
	thaw := f.etcd.Freeze(t)
	labtest.Eventually(t, 40*time.Second, func() (bool, string) {
		st := status(t, f.a, f.sa).Agent.Store
		if st == nil || !st.Fenced.IsZero() {
			t.Fatalf("a fenced while the store was frozen and b and c could promise: %+v\n%s", st, f.agentA.Output())
		}
		return time.Since(frozen) > 20*time.Second && st.Failsafe != nil && len(st.Failsafe.AckedBy) == 2,
			fmt.Sprintf("20 s of a frozen store, with a on failsafe acknowledged by b and c (%+v)", st.Failsafe)
	})
	killed := time.Now()
	agentC.Kill(t)
	labtest.Eventually(t, 15*time.Second, func() (bool, string) {
		st := status(t, f.a, f.sa).Agent.Store
		return st != nil && !st.Fenced.IsZero(), "a has not fenced since c was killed"
	})
	// Two seconds past the bound, so that a late answer would be seen.
	promise := ttl / 2
	bound := killed.Add(promise + time.Second)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		return time.Now().After(bound.Add(2 * time.Second)), "two seconds past the bound"
	})
	pkts := capture.Snapshot(t)
	for _, vip := range vips {
		for _, an := range answersFor(pkts, vip) {
			if an.mac == macB || an.mac == macC {
				t.Errorf("%s answered by a standby (%s) at %s while the store was frozen", vip, an.mac, an.at.Format("15:04:05.000"))
			}
		}
		longest, from := unanswered(pkts, vip, macA, frozen, killed)
		t.Logf("%s: the longest a request waited for a's answer in the frozen store's 20 s: %v, from %s", vip, longest.Round(time.Millisecond), from.Format("15:04:05.000"))
		if longest > time.Second {
			t.Errorf("%s went unanswered for %v from %s while b and c promised, want at most 1 s", vip, longest, from.Format("15:04:05.000"))
		}
		var last time.Time
		for _, an := range answersFor(pkts, vip) {
			if an.mac == macA {
				last = an.at
			}
		}
		t.Logf("%s: c killed %s, a's last answer %s (%v after)", vip, killed.Format("15:04:05.000"), last.Format("15:04:05.000"), last.Sub(killed).Round(time.Millisecond))
		if last.After(bound) {
			t.Errorf("%s: a answered at %s, %v after c was killed: want silent within c's last promise (%v) and a second", vip,
				last.Format("15:04:05.000"), last.Sub(killed).Round(time.Millisecond), promise)
		}
	}

	// The store back: one owner answers, and a never after another.
	thaw()
	thawed := time.Now()
	labtest.Eventually(t, 30*time.Second, func() (bool, string) {
		pkts := capture.Snapshot(t)
		for _, vip := range vips {
			ans := answersFor(pkts, vip)
			if len(ans) == 0 || !ans[len(ans)-1].at.After(thawed.Add(time.Second)) {
				return false, fmt.Sprintf("%s is not answered a second after the store is back", vip)
			}
		}
		return true, ""
	})
	pkts = capture.Packets(t)
	for _, vip := range vips {
		var other string
		for _, an := range answersFor(pkts, vip) {
			switch {
			case an.mac != macA && other == "":
				other = an.mac
			case an.mac == macA && other != "":
				t.Errorf("%s: a answered at %s after %s had", vip, an.at.Format("15:04:05.000"), other)
			case an.mac != macA && an.mac != other:
				t.Errorf("%s: %s answered at %s after %s had", vip, an.mac, an.at.Format("15:04:05.000"), other)
			}
		}
	}
	if !strings.Contains(f.agentA.Output(), "answering past the lease's deadline") {
		t.Errorf("a never said it answered on failsafe:\n%s", f.agentA.Output())
	}
}

// TestFleetFailsafeClear kills a and b, both with --failsafe, and starts
// c only then: the sets a and b wrote leave c out, and once their leases
// are gone nothing tells c that they do not answer on failsafe somewhere,
// so c takes nothing. vip failsafe shows both sets lapsed and holding c;
// vip failsafe clear refuses a live node's set and clears the dead ones,
// each recorded in the history with its reason, and c's claim goes on.
func TestFleetFailsafeClear(t *testing.T) {
	t.Parallel()
	f := newFleetLabWith(t, "--failsafe", "--lease-ttl", "6s")
	v4 := netip.MustParseAddr("192.0.2.10")
	mustVip(t, f.a, f.sa, "claim", v4.String())
	cli := etcdlab.Client(t, f.client, f.etcd.Endpoint())
	keys := store.NewKeys(store.DefaultPrefix)
	for node, other := range map[string]string{"a": "b", "b": "a"} {
		labtest.Eventually(t, 20*time.Second, func() (bool, string) {
			named, why := setNames(t, cli, keys, node)
			return slices.Equal(named, []string{other}), fmt.Sprintf("%s's failsafe set does not name %s: %v %s", node, other, named, why)
		})
	}
	f.agentA.Kill(t)
	f.agentB.Kill(t)
	startAgent(t, f.client, f.sc, "--store", f.storeURL, "--node", "c", "--lease-ttl", "6s", "--log-format", "json", "--failsafe")
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		resp, err := cli.Get(ctxFor(t, 5*time.Second), keys.Nodes(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		return err == nil && resp.Count == 1, "the leases of a and b are not gone from the store"
	})
	if out, code := vipOn(t, f.client, f.sc, "claim", v4.String()); code == 0 || !strings.Contains(out, "may still answer on failsafe") {
		t.Fatalf("c's claim with a's and b's sets lapsed: exit %d, want a refusal that says why:\n%s", code, out)
	}

	var sets api.FailsafeSetsResponse
	out := mustVip(t, f.client, f.sc, "failsafe", "--json", "--store", f.storeURL)
	if err := json.Unmarshal([]byte(out), &sets); err != nil {
		t.Fatalf("vip failsafe --json: %v:\n%s", err, out)
	}
	for _, node := range []string{"a", "b"} {
		i := slices.IndexFunc(sets.Sets, func(s api.FailsafeSet) bool { return s.Node == node })
		if i < 0 || !sets.Sets[i].Lapsed || !slices.Equal(sets.Sets[i].Holds, []string{"c"}) {
			t.Errorf("vip failsafe says of %s's set %+v, want lapsed and holding c:\n%s", node, sets.Sets, out)
		}
	}
	if out := mustVip(t, f.client, f.sc, "failsafe", "--store", f.storeURL); !strings.Contains(out, "c take nothing until a node of its set clears it") {
		t.Errorf("vip failsafe does not say whom the sets hold:\n%s", out)
	}
	if out, code := vipOn(t, f.client, f.sc, "failsafe", "clear", "c", "--store", f.storeURL); code != 2 || !strings.Contains(out, "renews the lease") {
		t.Errorf("vip failsafe clear of live c's set: exit %d, want 2 and why:\n%s", code, out)
	}
	for _, node := range []string{"a", "b"} {
		out := mustVip(t, f.client, f.sc, "failsafe", "clear", node, "--reason", "host "+node+" decommissioned", "--store", f.storeURL)
		if !strings.Contains(out, "cleared node "+node+"'s failsafe set") || !strings.Contains(out, "c take addresses again") {
			t.Errorf("vip failsafe clear %s said:\n%s", node, out)
		}
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		out, code := vipOn(t, f.client, f.sc, "claim", v4.String())
		return code == 0, fmt.Sprintf("c's claim once the sets were cleared: exit %d: %s", code, out)
	})
	var cleared []string
	for _, c := range historyOf(t, f).Changes {
		if c.Kind == "failsafe-clear" {
			cleared = append(cleared, c.Node+" ("+c.Reason+")")
		}
	}
	slices.Sort(cleared)
	if want := []string{"a (host a decommissioned)", "b (host b decommissioned)"}; !slices.Equal(cleared, want) {
		t.Errorf("the history records the sets cleared as %q, want %q", cleared, want)
	}
}

// TestFleetFailsafeOwnersThaw has two owners, each the other's standby: a
// holds 192.0.2.10, b 2001:db8::10. The store freezes past the TTL: each
// answers on failsafe on the other's promise. etcd, woken, expires every
// lease at once: both fence and join again under new leases, each still
// bound by its promise to the other for up to half a TTL (3 s at the
// default). A promise to an agent that is back in the store under a new
// lease, the same process, binds no more (it fenced before it joined
// again): each address is answered again at once, by its owner or by the
// other node as its standby (whichever took its key first), never by both.
// Before, each waited out its promise, both addresses dark 2-3 s after the
// thaw.
func TestFleetFailsafeOwnersThaw(t *testing.T) {
	skipRaced(t)
	// Not in parallel, as TestFleetFailsafeStoreFrozen.
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	f := newFleetLabWith(t, "--failsafe", "--lease-ttl", "6s", "--log-level", "debug")
	v4, v6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	mustVip(t, f.a, f.sa, "claim", v4.String())
	mustVip(t, f.b, f.sb, "claim", v6.String())
	mustVip(t, f.a, f.sa, "claim", v6.String(), "--standby")
	mustVip(t, f.b, f.sb, "claim", v4.String(), "--standby")
	capture := labtest.Capture(t, f.client, "eth0", "arp or icmp6")
	probeSteady(t, f.client, v4, v6)
	macA, macB := mac(f.a, "eth0"), mac(f.b, "eth0")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		pkts := capture.Snapshot(t)
		return slices.ContainsFunc(answersFor(pkts, v4), func(a answer) bool { return a.mac == macA }) &&
			slices.ContainsFunc(answersFor(pkts, v6), func(a answer) bool { return a.mac == macB }), "no answers from a and b before the store freezes"
	})

	// Past the TTL (6 s), with room for a loaded machine.
	frozen := time.Now()
	thaw := f.etcd.Freeze(t)
	labtest.Eventually(t, 30*time.Second, func() (bool, string) {
		return time.Since(frozen) > 9*time.Second, "9 s of a frozen store"
	})
	thaw()
	thawed := time.Now()
	end := thawed.Add(5 * time.Second)
	labtest.Eventually(t, 15*time.Second, func() (bool, string) {
		ans := answersFor(capture.Snapshot(t), v6)
		return len(ans) > 0 && ans[len(ans)-1].at.After(end), "no answer for 2001:db8::10 5 s after the thaw"
	})
	pkts := probedPast(t, capture, v4, end, 100, "5 s after the thaw")
	if n := slices.IndexFunc(pkts, func(pk gopacket.Packet) bool { return isRequestFor(pk, v6) }); n < 0 {
		t.Fatalf("the client never asked for %s: the probe did not run", v6)
	}
	for _, c := range []struct {
		vip   netip.Addr
		owner string
	}{{v4, "a"}, {v6, "b"}} {
		if n, runs := overlaps(pkts, c.vip, macA, macB, frozen); n > 0 {
			t.Errorf("%s: %d answers of a node that had handed the address over (a is %s, b %s):\n%s\na:\n%s\nb:\n%s",
				c.vip, n, macA, macB, runs, f.agentA.Output(), f.agentB.Output())
		}
		longest, from := unanswered(pkts, c.vip, macA, frozen, end, macB)
		t.Logf("%s (%s's): the longest a request waited for an answer, from the freeze to 5 s after the thaw: %v, from %s", c.vip, c.owner, longest.Round(time.Millisecond), from.Format("15:04:05.000"))
		if longest > 1500*time.Millisecond {
			t.Errorf("%s went unanswered for %v from %s (store frozen %s-%s), want at most 1.5 s: an owner waited for its promise to the other?\na:\n%s\nb:\n%s",
				c.vip, longest, from.Format("15:04:05.000"), frozen.Format("15:04:05.000"), thawed.Format("15:04:05.000"), f.agentA.Output(), f.agentB.Output())
		}
	}
}

// overlaps counts the answers for addr, from from on, of a node that had
// already handed the address over: the answers of macA and macB in the
// order the client heard them, each run of one MAC's a holder, and a run
// of a MAC that held the address before (a, b, a) two nodes answering at
// once. A handover inside one probe's interval (a's last answer, then b's
// first) is none: the requests are not matched to their answers, as the
// ARP probe's arpings overlap and a taker's announcements answer no
// request. It returns the count and, for a failure, the runs with times.
func overlaps(pkts []gopacket.Packet, addr netip.Addr, macA, macB string, from time.Time) (int, string) {
	type run struct {
		mac         string
		first, last time.Time
		n           int
	}
	var runs []run
	for _, an := range answersFor(pkts, addr) {
		if an.at.Before(from) || (an.mac != macA && an.mac != macB) {
			continue
		}
		if k := len(runs) - 1; k >= 0 && runs[k].mac == an.mac {
			runs[k].last = an.at
			runs[k].n++
			continue
		}
		runs = append(runs, run{an.mac, an.at, an.at, 1})
	}
	n := 0
	var b strings.Builder
	for i, r := range runs {
		back := slices.ContainsFunc(runs[:i], func(e run) bool { return e.mac == r.mac })
		if back {
			n += r.n
		}
		fmt.Fprintf(&b, "%s %d answers %s-%s%s\n", r.mac, r.n, r.first.Format("15:04:05.000"), r.last.Format("15:04:05.000"),
			map[bool]string{true: " (answering again after the other)"}[back])
	}
	return n, b.String()
}

// TestFleetFailsafeDefaultFallsBack: the failsafe is on by default, and an
// agent whose failsafe cannot start (here a second agent on a's host, whose
// port the first holds) runs without it after waiting for the port, and
// says so; asked for with --failsafe, it does not start, and says why.
func TestFleetFailsafeDefaultFallsBack(t *testing.T) {
	t.Parallel()
	f := newFleetLabWith(t, failsafeDefault)
	if st := status(t, f.a, f.sa).Agent.Store; st == nil || !st.FailsafeEnabled {
		t.Fatalf("a, started with no --failsafe flag, runs without the failsafe: %+v", st)
	}
	dir := t.TempDir()
	second := filepath.Join(dir, "second.sock")
	p := startAgent(t, f.a, second, "--store", f.storeURL, "--node", "a2", "--log-format", "json", failsafeDefault)
	if st := status(t, f.a, second).Agent.Store; st == nil || st.FailsafeEnabled {
		t.Errorf("a second agent on a's host, its failsafe port taken, says failsafe enabled: %+v", st)
	}
	if out := p.Output(); !strings.Contains(out, "failsafe: off") || !strings.Contains(out, "--failsafe-listen") {
		t.Errorf("the second agent does not warn that it runs without the failsafe, and why:\n%s", out)
	}
	asked := labtest.Start(t, f.a, vipBin, "agent", "--socket", filepath.Join(dir, "third.sock"), "--store", f.storeURL, "--node", "a3", "--failsafe")
	if code := asked.Wait(t, 20*time.Second); code == 0 || !strings.Contains(asked.Output(), "--failsafe-listen") {
		t.Errorf("an agent given --failsafe whose port is taken: exit %d, want a failure naming --failsafe-listen:\n%s", code, asked.Output())
	}
}

// setNames reads owner's failsafe set and the nodes' records at one
// revision, and names the live nodes the set names (by revision: each
// whose record was created at the set's revision or before), or says why
// it cannot.
func setNames(t *testing.T, cli *clientv3.Client, keys store.Keys, owner string) ([]string, string) {
	t.Helper()
	resp, err := cli.Txn(ctxFor(t, 5*time.Second)).Then(clientv3.OpGet(keys.Failsafe(owner)), clientv3.OpGet(keys.Nodes(), clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, err.Error()
	}
	sets := resp.Responses[0].GetResponseRange().Kvs
	if len(sets) == 0 {
		return nil, "(no set in the store)"
	}
	set, err := store.Decode[store.FailsafeSet](string(sets[0].Key), sets[0].Value)
	if err != nil {
		return nil, err.Error()
	}
	var nodes []store.Node
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if p, err := keys.Parse(string(kv.Key)); err == nil && p.Kind == store.KindNode {
			nodes = append(nodes, store.Node{Node: p.Node, Lease: kv.Lease, CreateRev: kv.CreateRevision})
		}
	}
	set.Node = owner
	return set.Named(nodes), string(sets[0].Value)
}
