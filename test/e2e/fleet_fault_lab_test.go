package e2e_test

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

// fleetLab is a store host running etcd, agents a and b guarded by it, and
// a client with no agent.
type fleetLab struct {
	l              *lab.Lab
	a, b, client   *lab.Host
	sa, sb, sc     string
	storeURL       string
	agentA, agentB *labtest.Proc
	etcd           *etcdlab.Etcd
	// relay, if set, is what the agents reach the store through.
	relay *labtest.Relay
}

// fleetTTL is short, so that the faults play out in seconds.
const fleetTTL = "3s"

func newFleetLab(t *testing.T) *fleetLab {
	t.Helper()
	return newFleetLabWith(t)
}

// newFleetLabWith is newFleetLab with agentArgs passed to both agents, such
// as the responder to use.
func newFleetLabWith(t *testing.T, agentArgs ...string) *fleetLab {
	t.Helper()
	return newFleetLabOn(t, func(h *lab.Host) *etcdlab.Etcd { return etcdlab.StartEtcd(t, h) }, agentArgs...)
}

// newFleetLabOn is newFleetLabWith with the store started by startStore in
// its host (192.0.2.1), before the agents start.
func newFleetLabOn(t *testing.T, startStore func(*lab.Host) *etcdlab.Etcd, agentArgs ...string) *fleetLab {
	t.Helper()
	return newFleetLabThrough(t, startStore, false, agentArgs...)
}

// newFleetLabThrough is newFleetLabOn with, if relayed, the agents reaching
// the store through a relay in its host (f.relay), whose delay the test
// sets: a slow store.
func newFleetLabThrough(t *testing.T, startStore func(*lab.Host) *etcdlab.Etcd, relayed bool, agentArgs ...string) *fleetLab {
	t.Helper()
	labtest.RequireTool(t, "etcd")
	l := labtest.New(t,
		lab.HostConfig{Name: "store", IPv4: pfx("192.0.2.1/24")},
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.11/24"), IPv6: pfx("2001:db8::11/64")},
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.12/24"), IPv6: pfx("2001:db8::12/64")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.13/24"), IPv6: pfx("2001:db8::13/64")},
	)
	f := &fleetLab{l: l, a: l.Host("a"), b: l.Host("b"), client: l.Host("client")}
	f.etcd = startStore(l.Host("store"))
	f.storeURL = "etcd://" + strings.TrimPrefix(f.etcd.Endpoint(), "http://")
	if relayed {
		f.relay = labtest.StartRelay(t, l.Host("store"), "192.0.2.1:2479", strings.TrimPrefix(f.etcd.Endpoint(), "http://"))
		f.storeURL = "etcd://" + f.relay.Addr()
	}
	dir := sockDir(t)
	f.sa, f.sb, f.sc = filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock"), filepath.Join(dir, "client.sock")
	args := func(node string) []string {
		return append([]string{"--store", f.storeURL, "--node", node, "--lease-ttl", fleetTTL, "--log-format", "json"}, agentArgs...)
	}
	f.agentA = startAgent(t, f.a, f.sa, args("a")...)
	f.agentB = startAgent(t, f.b, f.sb, args("b")...)
	return f
}

// waitLostToB waits until a reports n claims lost to b (when is said in
// the failure).
func waitLostToB(t *testing.T, f *fleetLab, n int, when string) {
	t.Helper()
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		st := status(t, f.a, f.sa)
		lost := 0
		for _, c := range st.Claims {
			if c.State == "lost" && strings.Contains(c.Note, "lost to b") {
				lost++
			}
		}
		return lost == n, fmt.Sprintf("a does not report %d addresses lost to b %s: %+v", n, when, st.Claims)
	})
}

// answer is a frame on the client's wire that says which MAC has a VIP: an
// ARP reply or announcement, or a neighbor advertisement.
type answer struct {
	at  time.Time
	mac string
}

// answersFor returns the frames claiming addr, in order.
func answersFor(pkts []gopacket.Packet, addr netip.Addr) []answer {
	var out []answer
	for _, pk := range pkts {
		eth, _ := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if eth == nil {
			continue
		}
		at := pk.Metadata().Timestamp
		if arp, ok := pk.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
			// Replies, and requests announcing the sender's own
			// address (gratuitous), both say who has it.
			if addrOf(arp.SourceProtAddress) == addr && (arp.Operation == layers.ARPReply || addrOf(arp.DstProtAddress) == addr) {
				out = append(out, answer{at, eth.SrcMAC.String()})
			}
			continue
		}
		if na, ok := pk.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement); ok && addrOf(na.TargetAddress) == addr {
			out = append(out, answer{at, eth.SrcMAC.String()})
		}
	}
	return out
}

// requestsFor counts the ARP requests for addr that are not announcements.
func requestsFor(pkts []gopacket.Packet, addr netip.Addr) int {
	n := 0
	for _, pk := range pkts {
		if arp, ok := pk.Layer(layers.LayerTypeARP).(*layers.ARP); ok && arp.Operation == layers.ARPRequest &&
			addrOf(arp.DstProtAddress) == addr && addrOf(arp.SourceProtAddress) != addr {
			n++
		}
	}
	return n
}

// probeOwned has a claim v4 and v6 and b stand by for them (with claimArgs
// added to both claims), starts the
// client's capture and probe of both, and waits for a's answers (before
// what, said in the failure). It returns the capture and a's and b's MACs.
func probeOwned(t *testing.T, f *fleetLab, v4, v6 netip.Addr, before string, claimArgs ...string) (capture *labtest.Cap, macA, macB string) {
	t.Helper()
	mustVip(t, f.a, f.sa, append([]string{"claim", v4.String(), v6.String()}, claimArgs...)...)
	mustVip(t, f.b, f.sb, append([]string{"claim", v4.String(), v6.String(), "--standby"}, claimArgs...)...)
	capture = labtest.Capture(t, f.client, "eth0", "arp or icmp6")
	probe(t, f.client, v4, v6)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		pkts := capture.Snapshot(t)
		return len(answersFor(pkts, v4)) > 0 && len(answersFor(pkts, v6)) > 0, "no answers from a before " + before
	})
	return capture, mac(f.a, "eth0"), mac(f.b, "eth0")
}

// probedPast waits until the client's capture holds an answer for addr a
// second after since (when, said in the failure), and returns everything it
// captured, failing the test if the client asked for addr fewer than
// minRequests times (the probe did not run).
func probedPast(t *testing.T, capture *labtest.Cap, addr netip.Addr, since time.Time, minRequests int, when string) []gopacket.Packet {
	t.Helper()
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		ans := answersFor(capture.Snapshot(t), addr)
		return len(ans) > 0 && ans[len(ans)-1].at.After(since.Add(time.Second)), "no answers a second after " + when
	})
	pkts := capture.Packets(t)
	if n := requestsFor(pkts, addr); n < minRequests {
		t.Fatalf("the client asked for %s only %d times: the probe did not run", addr, n)
	}
	return pkts
}

// probe asks for the VIPs from the client without pause: an ARP request and
// a neighbor solicitation about every 50 ms each.
func probe(t *testing.T, h *lab.Host, v4, v6 netip.Addr) {
	t.Helper()
	// iputils arping takes whole seconds only (-i 0.05 is refused), so one
	// broadcast request per run, waiting up to a second for its answer.
	labtest.Start(t, h, "sh", "-c", fmt.Sprintf("while :; do arping -q -b -c 1 -w 1 -I eth0 %s; sleep 0.05; done", v4))
	labtest.Start(t, h, "sh", "-c", fmt.Sprintf("while :; do ndisc6 -q -n -r 1 -w 50 %s eth0; sleep 0.05; done", v6))
}

// TestFleetPartitionFencesBeforeTakeOver cuts the owner off from the store
// alone: it fences before its lease expires, the standby takes over after
// the expiry, and a continuous probe from the client never sees both MACs
// answer at once, nor anything from the owner once it fenced. After the
// heal the old owner reports the address lost to b and stays silent.
func TestFleetPartitionFencesBeforeTakeOver(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	for _, tc := range []struct {
		name string
		args []string
	}{{"lease", nil}, {"failsafe", []string{"--failsafe"}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			partitionFencesBeforeTakeOver(t, newFleetLabWith(t, tc.args...))
		})
	}
}

// partitionFencesBeforeTakeOver is TestFleetPartitionFencesBeforeTakeOver
// on f. With the failsafe, a asks b, which reaches the store and says so:
// the failsafe does not cover an outage of the owner's alone.
func partitionFencesBeforeTakeOver(t *testing.T, f *fleetLab) {
	v4, v6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	capture, macA, macB := probeOwned(t, f, v4, v6, "the cut")

	cut := labtest.Isolate(t, f.l, f.a, f.l.Host("store"))
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		st := status(t, f.b, f.sb)
		n := 0
		for _, c := range st.Claims {
			if c.State != "standby" {
				n++
			}
		}
		return n == 2, "b did not take both addresses after a was cut off"
	})
	st := status(t, f.a, f.sa)
	if st.Agent.Store == nil || st.Agent.Store.Fenced.IsZero() {
		t.Fatalf("a's status does not say it is fenced: %+v", st.Agent.Store)
	}
	for _, c := range st.Claims {
		if c.State != "fenced" {
			t.Errorf("a's claim of %s is %s, want fenced", c.Addr, c.State)
		}
	}
	if _, code := vipOn(t, f.a, f.sa, "status", "--check"); code != 3 {
		t.Errorf("status --check on the fenced a: exit %d, want 3", code)
	}
	fencedAt := st.Agent.Store.Fenced
	// Let b's answers reach the capture, then heal.
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		ans := answersFor(capture.Snapshot(t), v4)
		return len(ans) > 0 && ans[len(ans)-1].mac == macB, "the client hears no answer from b"
	})
	cut.Heal(t)
	waitLostToB(t, f, 2, "after the heal")
	// A second of probing after the heal: a must stay silent.
	pkts := probedPast(t, capture, v4, time.Now(), 20, "the heal")
	for _, vip := range []netip.Addr{v4, v6} {
		var lastA, firstB time.Time
		for _, an := range answersFor(pkts, vip) {
			switch an.mac {
			case macA:
				lastA = an.at
			case macB:
				if firstB.IsZero() {
					firstB = an.at
				}
			default:
				t.Errorf("%s answered by %s, neither a nor b", vip, an.mac)
			}
		}
		if lastA.IsZero() || firstB.IsZero() {
			t.Fatalf("%s: a's last answer %v, b's first %v: want both", vip, lastA, firstB)
		}
		t.Logf("%s: a's last answer %s, a fenced %s, b's first answer %s (gap %v)", vip,
			lastA.Format("15:04:05.000"), fencedAt.Format("15:04:05.000"), firstB.Format("15:04:05.000"), firstB.Sub(lastA).Round(time.Millisecond))
		if !lastA.Before(firstB) {
			t.Errorf("%s: a answered at %s, after b's first answer at %s: two owners at once", vip, lastA, firstB)
		}
		if lastA.After(fencedAt) {
			t.Errorf("%s: a sent a frame at %s, after it fenced at %s", vip, lastA, fencedAt)
		}
	}
}

// TestFleetStandbyAfterKill kills the owner's agent with SIGKILL: the
// standby answers within the lease's TTL and two seconds.
func TestFleetStandbyAfterKill(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "arping")
	f := newFleetLab(t)
	v4 := netip.MustParseAddr("192.0.2.10")
	mustVip(t, f.a, f.sa, "claim", v4.String())
	mustVip(t, f.b, f.sb, "claim", v4.String(), "--standby")
	macB := mac(f.b, "eth0")
	ttl, _ := time.ParseDuration(fleetTTL)
	killed := time.Now()
	f.agentA.Kill(t)
	labtest.Eventually(t, ttl+8*time.Second, func() (bool, string) {
		out, _ := arping(t, f.client, "-c", "1", "-w", "1", v4.String())
		macs := replyMACs(out)
		return len(macs) == 1 && macs[0] == macB, fmt.Sprintf("the standby b does not answer yet (%v)", macs)
	})
	// b logs the moment it took the address, after its first round: a
	// moment after its first answer, which may come first.
	var took logLine
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		var ok bool
		took, ok = findLog(logLines(t, f.agentB.Output()), "standby took over", v4.String())
		return ok, "b's log says nothing of taking over:\n" + f.agentB.Output()
	})
	live := took.Time.Sub(killed)
	t.Logf("the standby was live %v after the owner was killed (TTL %v)", live.Round(time.Millisecond), ttl)
	// TTL + 4 s: etcd expires a lease TTL after the last keepalive it
	// processed, checks every 500 ms and revokes through raft; on CI's
	// loaded 2-core machine it took 4.74 s, then 5.45 s, at TTL 3 s
	// (3.0-3.4 s here unloaded). The failover's speed is measured in
	// benchmarks (make bench, "failover"); this bound only catches a
	// standby that waits for something it should not.
	if live > ttl+4*time.Second {
		t.Errorf("the standby was live %v after the kill, want within TTL + 4 s (%v)", live, ttl+4*time.Second)
	}
}

// TestFleetAgentRestartAfterKill kills a guarded agent with SIGKILL and
// starts it again at once, within its old lease: the new agent takes its
// dead predecessor's place (same host and boot, its process gone) rather
// than being refused as a second agent of the name, re-adopts the claim,
// and binds its key to the new lease, so that it outlives the old one.
func TestFleetAgentRestartAfterKill(t *testing.T) {
	t.Parallel()
	f := newFleetLab(t)
	labtest.RequireTool(t, "etcdctl")
	mustVip(t, f.a, f.sa, "claim", "192.0.2.10")
	old := status(t, f.a, f.sa).Agent.Store.Lease
	f.agentA.Kill(t)
	f.agentA = startAgent(t, f.a, f.sa, "--store", f.storeURL, "--node", "a", "--lease-ttl", fleetTTL, "--log-format", "json")
	if _, ok := findLog(logLines(t, f.agentA.Output()), "took over the records of this node's agent that died (it recorded no stop)", ""); !ok {
		t.Errorf("the new agent does not say its predecessor died:\n%s", f.agentA.Output())
	}
	ttl, _ := time.ParseDuration(fleetTTL)
	// Past the old lease's expiry, which etcd itself reports, the claim
	// must still be a's, in the store and on the wire.
	store := f.l.Host("store")
	labtest.Eventually(t, 3*ttl, func() (bool, string) {
		out, _ := store.Run(ctxFor(t, 5*time.Second), "etcdctl", "--endpoints", f.etcd.Endpoint(), "lease", "timetolive", old)
		return strings.Contains(out, "already expired"), "the dead agent's lease " + old + " has not expired yet: " + out
	})
	st := status(t, f.a, f.sa)
	if len(st.Claims) != 1 || st.Claims[0].State == "fenced" || st.Claims[0].State == "lost" {
		t.Fatalf("the restarted agent's claims: %+v, want 192.0.2.10 held", st.Claims)
	}
	out, code := vipOn(t, f.b, f.sb, "claim", "192.0.2.10")
	if code != 5 || !strings.Contains(out, "held by node a") {
		t.Fatalf("b's claim after a's restart: exit %d, want 5 (still a's):\n%s", code, out)
	}
	outA, _ := arping(t, f.client, "-c", "2", "-w", "3", "192.0.2.10")
	if macs := replyMACs(outA); len(macs) == 0 || macs[0] != mac(f.a, "eth0") {
		t.Fatalf("after the restart the VIP is answered by %v, want a", macs)
	}
}

// TestFleetRefusesAHostsOwnAddress: a guarded agent refuses a claim of its
// interface's own address (exit 2, one sentence naming the interface), and
// vip move refuses to move a node's own address to it, before anything
// changes: the store names no owner, and the host's kernel stays the only
// one answering. An unguarded claim of such an address is not this
// test's: it keeps its documented behaviour.
func TestFleetRefusesAHostsOwnAddress(t *testing.T) {
	t.Parallel()
	f := newFleetLab(t)
	own := netip.MustParseAddr("192.0.2.11") // a's eth0
	out, code := vipOn(t, f.a, f.sa, "claim", own.String())
	if code != 2 || !strings.Contains(out, "own interface eth0") {
		t.Errorf("a guarded claim of a's own address: exit %d, %q; want exit 2 naming eth0", code, out)
	}
	if st := status(t, f.a, f.sa); len(st.Claims) != 0 {
		t.Errorf("a holds %+v after the refusal, want nothing", st.Claims)
	}
	// A move of it to a is refused before anything changes (exit 1, as
	// every refused move).
	out, code = vipOn(t, f.b, f.sb, "move", own.String(), "--to", "a", "--store", f.storeURL)
	if code != 1 || !strings.Contains(out, "node a's own address on eth0") {
		t.Errorf("a move of a's own address to a: exit %d, %q; want exit 1 naming it", code, out)
	}
	fl := mustVip(t, f.b, f.sb, "fleet", "--json", "--store", f.storeURL)
	if strings.Contains(fl, `"addr":"`+own.String()+`"`) {
		t.Errorf("the store names a claim of %s after the refusals:\n%s", own, fl)
	}
}
