package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

// splitWatch polls vip fleet --json from the client until stopped, and
// keeps every listing that shows the group's addresses on two nodes.
type splitWatch struct {
	mu     sync.Mutex
	polls  int
	splits []string
	stop   chan struct{}
	done   chan struct{}
}

func watchSplits(t *testing.T, client *lab.Host, sock, storeURL, group string) *splitWatch {
	w := &splitWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			cmd := client.Command(ctxFor(t, 10*time.Second), vipBin, "fleet", "--json", "--store", storeURL, "--socket", sock)
			out, err := cmd.Output()
			if err != nil {
				continue // the store busy or a fault under way: polled again
			}
			var fl api.FleetResponse
			if json.Unmarshal(out, &fl) != nil {
				continue
			}
			nodes := map[string][]string{}
			for _, c := range fl.Claims {
				if c.Group == group && c.Node != "" {
					nodes[c.Node] = append(nodes[c.Node], c.Addr)
				}
			}
			w.mu.Lock()
			w.polls++
			if len(nodes) > 1 {
				w.splits = append(w.splits, fmt.Sprintf("revision %d: %v", fl.Revision, nodes))
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *splitWatch) end() (polls int, splits []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls, w.splits
}

// groupOwner is the one node vip fleet --json lists for every address of
// the group, or "" while they are not all on one node.
func groupOwner(t *testing.T, f *fleetLab, addrs []string) string {
	t.Helper()
	owners := map[string]bool{}
	fl := fleetOf(t, f)
	for _, a := range addrs {
		i := slices.IndexFunc(fl.Claims, func(c api.FleetClaim) bool { return c.Addr == a })
		if i < 0 || fl.Claims[i].Node == "" || fl.Claims[i].Group != "web" {
			return ""
		}
		owners[fl.Claims[i].Node] = true
	}
	if len(owners) != 1 {
		return ""
	}
	for n := range owners {
		return n
	}
	return ""
}

// TestGroupMovesWhole, against a real etcd and three real agents: a
// dual-stack group of three addresses, held by a with b and c standing by,
// goes whole to one node through each fault and operation: kill -9 of its
// owner (two standbys race for it), a move, a take-over and a drain. A
// poller of vip fleet --json never sees it on two nodes, and the client's
// capture (with a continuous probe) never sees its addresses answered by
// two MACs at once: the answering MAC changes once per change of owner.
func TestGroupMovesWhole(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "etcd")
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	l := labtest.New(t,
		lab.HostConfig{Name: "store", IPv4: pfx("192.0.2.1/24")},
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.11/24"), IPv6: pfx("2001:db8::11/64")},
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.12/24"), IPv6: pfx("2001:db8::12/64")},
		lab.HostConfig{Name: "c", IPv4: pfx("192.0.2.14/24"), IPv6: pfx("2001:db8::14/64")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.13/24"), IPv6: pfx("2001:db8::13/64")},
	)
	f := &fleetLab{l: l, a: l.Host("a"), b: l.Host("b"), client: l.Host("client")}
	c := l.Host("c")
	f.etcd = etcdlab.StartEtcd(t, l.Host("store"))
	st := "etcd://" + strings.TrimPrefix(f.etcd.Endpoint(), "http://")
	f.storeURL = st
	dir := sockDir(t)
	f.sa, f.sb, f.sc = filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock"), filepath.Join(dir, "client.sock")
	sockC := filepath.Join(dir, "c.sock")
	args := func(node string) []string {
		return []string{"--store", st, "--node", node, "--lease-ttl", fleetTTL, "--log-format", "json"}
	}
	f.agentA = startAgent(t, f.a, f.sa, args("a")...)
	f.agentB = startAgent(t, f.b, f.sb, args("b")...)
	startAgent(t, c, sockC, args("c")...)
	hostOf := map[string]*lab.Host{"a": f.a, "b": f.b, "c": c}
	sockOf := map[string]string{"a": f.sa, "b": f.sb, "c": sockC}
	macNode := map[string]string{mac(f.a, "eth0"): "a", mac(f.b, "eth0"): "b", mac(c, "eth0"): "c"}

	addrs := []string{"192.0.2.10", "192.0.2.20", "2001:db8::10"}
	mustVip(t, f.a, f.sa, append([]string{"claim", "--group", "web"}, addrs...)...)
	mustVip(t, f.b, f.sb, append([]string{"claim", "--standby", "--group", "web"}, addrs...)...)
	// c stands by through vip standby naming one address: a group has
	// one set of standbys, so it names all three.
	if out := mustVip(t, f.client, f.sc, "standby", addrs[0], "--on", "c", "--store", st); strings.Count(out, "node c stands by") != 3 {
		t.Fatalf("vip standby %s --on c did not make c a standby for the whole group:\n%s", addrs[0], out)
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		n := 0
		for _, cl := range status(t, c, sockC).Claims {
			if cl.Group == "web" && cl.State == api.StateStandby {
				n++
			}
		}
		return n == 3, fmt.Sprintf("c stands by for %d of the group's addresses, want 3", n)
	})
	// A standby for part of the group is refused.
	if out, code := vipOn(t, c, sockC, "claim", "--standby", "--group", "web", addrs[0]); code != 2 || !strings.Contains(out, "group web has 192.0.2.20 2001:db8::10 too") {
		t.Errorf("a standby for one address of three: exit %d:\n%s\nwant exit 2 naming the two left out", code, out)
	}
	if got := groupOwner(t, f, addrs); got != "a" {
		t.Fatalf("after the claim the group is on %q, want a", got)
	}
	if out := mustVip(t, f.a, f.sa, "status"); !strings.Contains(out, "group web: 192.0.2.10 192.0.2.20 2001:db8::10") {
		t.Errorf("vip status does not list the group:\n%s", out)
	}

	capture := labtest.Capture(t, f.client, "eth0", "arp or icmp6")
	probe(t, f.client, netip.MustParseAddr(addrs[0]), netip.MustParseAddr(addrs[2]))
	labtest.Start(t, f.client, "sh", "-c", fmt.Sprintf("while :; do arping -q -b -c 1 -w 1 -I eth0 %s; sleep 0.05; done", addrs[1]))
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		pk := capture.Snapshot(t)
		for _, a := range addrs {
			if len(answersFor(pk, netip.MustParseAddr(a))) == 0 {
				return false, "no answer for " + a + " from a before the faults"
			}
		}
		return true, ""
	})
	polls := watchSplits(t, f.client, f.sc, st, "web")
	waitOwner := func(why string, ok func(string) bool) string {
		t.Helper()
		var got string
		labtest.Eventually(t, 30*time.Second, func() (bool, string) {
			got = groupOwner(t, f, addrs)
			return got != "" && ok(got), fmt.Sprintf("%s: the group is on %q", why, got)
		})
		// Every address answers from the owner's host as well.
		labtest.Eventually(t, 10*time.Second, func() (bool, string) {
			st := status(t, hostOf[got], sockOf[got])
			n := 0
			for _, cl := range st.Claims {
				if cl.Group == "web" && cl.State != api.StateStandby && cl.State != api.StateLost {
					n++
				}
			}
			return n == len(addrs), fmt.Sprintf("%s: %s holds %d of the group's addresses, want %d", why, got, n, len(addrs))
		})
		return got
	}

	// 1. kill -9 of the owner: b and c race, one takes all three.
	f.agentA.Kill(t)
	first := waitOwner("after a's kill -9", func(n string) bool { return n == "b" || n == "c" })
	other := map[string]string{"b": "c", "c": "b"}[first]
	f.agentA = startAgent(t, f.a, f.sa, args("a")...)

	// 2. a move of the group to the other standby.
	mustVip(t, f.client, f.sc, "move", "--group", "web", "--to", other, "--traffic-window", "0", "--reason", "rebalance", "--store", st)
	waitOwner("after the move", func(n string) bool { return n == other })

	// 3. a take-over by a, naming one address: the group comes whole.
	mustVip(t, f.a, f.sa, "claim", addrs[0], "--take-over", "--group", "web")
	waitOwner("after a's take-over", func(n string) bool { return n == "a" })

	// 4. a drain of a: to one node that stands by for all of them.
	mustVip(t, f.client, f.sc, "drain", "a", "--quiet", "0", "--reason", "kernel upgrade", "--store", st)
	last := waitOwner("after the drain of a", func(n string) bool { return n == "b" || n == "c" })

	n, splits := polls.end()
	if n < 10 {
		t.Errorf("vip fleet --json was read only %d times through the faults: too few to tell", n)
	}
	if len(splits) > 0 {
		t.Errorf("vip fleet --json listed the group on two nodes %d times of %d, first: %s", len(splits), n, splits[0])
	}

	// The wire: merge the answers for the three addresses in time order;
	// the answering node changes once per change of owner (4), never
	// back and forth.
	type seen struct {
		at   time.Time
		node string
		addr string
	}
	var frames []seen
	pkts := capture.Snapshot(t)
	for _, a := range addrs {
		for _, an := range answersFor(pkts, netip.MustParseAddr(a)) {
			frames = append(frames, seen{an.at, macNode[an.mac], a})
		}
	}
	sort.SliceStable(frames, func(i, j int) bool { return frames[i].at.Before(frames[j].at) })
	var runs []string
	for i, fr := range frames {
		if fr.node == "" {
			t.Errorf("%s answered at %s by a MAC of no agent", fr.addr, fr.at.Format(time.StampMicro))
			continue
		}
		if i == 0 || fr.node != frames[i-1].node {
			runs = append(runs, fmt.Sprintf("%s from %s (%s)", fr.node, fr.at.Format(time.StampMicro), fr.addr))
		}
	}
	want := []string{"a", first, other, "a", last}
	var got []string
	for _, r := range runs {
		got = append(got, strings.Fields(r)[0])
	}
	if !slices.Equal(got, want) {
		t.Errorf("the answering node, in order: %v; want %v (one change per change of owner):\n  %s", got, want, strings.Join(runs, "\n  "))
	}

	// The history names the group's one transaction for the standby's
	// takeover.
	h := historyOf(t, f, addrs[1])
	if i := slices.IndexFunc(h.Changes, func(c api.HistoryChange) bool { return c.Kind == "standby-takeover" }); i < 0 ||
		h.Changes[i].Node != first || !strings.Contains(h.Changes[i].Message, "group web") {
		t.Errorf("history of %s has no standby takeover by %s naming the group: %+v", addrs[1], first, h.Changes)
	}
	// vip history --group, and the agent's GET /v1/history (the live
	// view's history pane), list the group's changes: all three
	// addresses', the move's reason among them.
	hg := historyOf(t, f, "--group", "web")
	viaAgent, err := api.NewClient(f.sb).History(ctxFor(t, 10*time.Second), "", "web")
	if err != nil {
		t.Fatalf("GET /v1/history?group=web: %v", err)
	}
	for name, changes := range map[string][]api.HistoryChange{"vip history --group web": hg.Changes, "GET /v1/history": viaAgent.Changes} {
		per := map[string]int{}
		reason := false
		for _, c := range changes {
			per[c.Addr]++
			reason = reason || c.Reason == "rebalance" && c.Group == "web"
		}
		if len(per) != len(addrs) || !reason {
			t.Errorf("%s: changes of %v, the move's reason with its group %v; want all three addresses and the reason:\n%+v", name, per, reason, changes)
		}
	}
}
