package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

// freezeAgent stops the agent p with SIGSTOP and returns a function that
// wakes it with SIGCONT. The test's cleanup wakes it too, should the test
// end while it is frozen. p must be the vip process itself (ip netns exec
// execs it in place), not a wrapper that would be stopped in its stead.
func freezeAgent(t *testing.T, p *labtest.Proc) (wake func()) {
	t.Helper()
	pid := p.Pid()
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || exe != vipBin {
		t.Fatalf("pid %d runs %q (%v), not %s: it is not the agent itself", pid, exe, err, vipBin)
	}
	woken := false
	wake = func() {
		if !woken {
			woken = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !p.Exited() {
				t.Errorf("SIGCONT to the agent (pid %d): %v", pid, err)
			}
		}
	}
	// Registered after the agent's own cleanup, so it runs before it.
	t.Cleanup(wake)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP to the agent (pid %d): %v", pid, err)
	}
	labtest.Eventually(t, time.Second, func() (bool, string) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// The state follows the command's closing parenthesis.
		i := strings.LastIndexByte(string(stat), ')')
		return err == nil && i >= 0 && strings.HasPrefix(string(stat[i+1:]), " T"), fmt.Sprintf("the agent (pid %d) is not stopped: %q %v", pid, stat, err)
	})
	return wake
}

// frameKind says briefly what an ARP or ICMPv6 frame is.
func frameKind(pk gopacket.Packet) string {
	if arp, ok := pk.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
		switch {
		case arp.Operation == layers.ARPReply && addrOf(arp.SourceProtAddress) == addrOf(arp.DstProtAddress):
			return "gratuitous ARP reply " + addrOf(arp.SourceProtAddress).String()
		case arp.Operation == layers.ARPReply:
			return "ARP reply " + addrOf(arp.SourceProtAddress).String()
		case addrOf(arp.SourceProtAddress) == addrOf(arp.DstProtAddress):
			return "gratuitous ARP request " + addrOf(arp.SourceProtAddress).String()
		default:
			return "ARP request for " + addrOf(arp.DstProtAddress).String()
		}
	}
	if na, ok := pk.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement); ok {
		if na.Solicited() {
			return "solicited NA " + addrOf(na.TargetAddress).String()
		}
		return "unsolicited NA " + addrOf(na.TargetAddress).String()
	}
	if ns, ok := pk.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation); ok {
		src := netip.Addr{}
		if ip6, ok := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
			src = addrOf(ip6.SrcIP)
		}
		return "NS for " + addrOf(ns.TargetAddress).String() + " from " + src.String()
	}
	if icmp, ok := pk.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		return "ICMPv6 " + icmp.TypeCode.String()
	}
	if tcp, ok := pk.Layer(layers.LayerTypeTCP).(*layers.TCP); ok {
		var flags []string
		for _, f := range []struct {
			on   bool
			name string
		}{{tcp.SYN, "SYN"}, {tcp.ACK, "ACK"}, {tcp.FIN, "FIN"}, {tcp.RST, "RST"}, {tcp.PSH, "PSH"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		if c, ok := tcpConnOf(pk); ok {
			return fmt.Sprintf("TCP %s %s > %s", strings.Join(flags, ","), c.src, c.dst)
		}
		return "TCP " + strings.Join(flags, ",")
	}
	return "other frame"
}

// claimsAny says whether pk tells who has one of vips: an ARP frame whose
// sender is one (a reply, an announcement, a request from it), a neighbor
// advertisement for one, or any IPv6 packet from one (a solicitation from
// it carries its link-layer address).
func claimsAny(pk gopacket.Packet, vips ...netip.Addr) bool {
	for _, vip := range vips {
		if arp, ok := pk.Layer(layers.LayerTypeARP).(*layers.ARP); ok && addrOf(arp.SourceProtAddress) == vip {
			return true
		}
		if na, ok := pk.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement); ok && addrOf(na.TargetAddress) == vip {
			return true
		}
		if ip6, ok := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok && addrOf(ip6.SrcIP) == vip {
			return true
		}
	}
	return false
}

// kindCounts lists how many frames of each kind pkts holds, in the order
// each kind first appears.
func kindCounts(pkts []gopacket.Packet) string {
	var order []string
	n := map[string]int{}
	for _, pk := range pkts {
		k := frameKind(pk)
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	var s []string
	for _, k := range order {
		s = append(s, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(s, ", ")
}

// firstTimes formats the times of up to n answers.
func firstTimes(ans []answer, n int) string {
	var s []string
	for i, an := range ans {
		if i == n {
			s = append(s, "...")
			break
		}
		s = append(s, an.at.Format("15:04:05.000"))
	}
	return strings.Join(s, " ")
}

// TestFleetFrozenOwnerStaysSilent freezes the owner's agent (SIGSTOP) for
// longer than its lease's TTL, as a stalled VM or a debugger would: its
// lease expires and the standby b takes over. The frozen owner must not
// answer meanwhile (nothing it left in the kernel may answer for it), and
// once woken it must not answer either (no backlog of requests answered, no
// overdue gratuitous round) but report the addresses lost to b.
func TestFleetFrozenOwnerStaysSilent(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	responders := []struct {
		name      string
		responder string // as status shows it
		args      []string
		// withheld says that frames must have been withheld: the
		// program passes on every request it sees past the deadline
		// while the agent is frozen. The sockets' backlog, read on
		// waking, is withheld or, if the fence dropped the addresses
		// first, not for a held address at all.
		withheld bool
		// claim is added to both claims: --assign has the kernel
		// answer, for a service on the address, and the program drop
		// the requests past the deadline.
		claim []string
	}{
		{"socket", "socket", []string{"--responder", "socket"}, false, nil},
		{"ebpf-tcx", "ebpf (tcx)", []string{"--responder", "ebpf", "--responder-hook", "tcx"}, true, nil},
		{"ebpf-xdp-generic", "ebpf (xdp-generic)", []string{"--responder", "ebpf", "--responder-hook", "xdp-generic"}, true, nil},
		{"ebpf-tcx-assign", "kernel", []string{"--responder", "ebpf", "--responder-hook", "tcx"}, true, []string{"--assign"}},
		// On sockets nothing withholds the kernel's answers: the
		// address's lifetime, which ends by the deadline, has the kernel
		// remove it.
		{"socket-assign", "kernel", []string{"--responder", "socket"}, false, []string{"--assign"}},
	}
	for _, resp := range responders {
		t.Run(resp.name, func(t *testing.T) {
			t.Parallel()
			f := newFleetLabWith(t, resp.args...)
			v4, v6 := netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("2001:db8::100")
			mustVip(t, f.a, f.sa, append([]string{"claim", v4.String(), v6.String()}, resp.claim...)...)
			mustVip(t, f.b, f.sb, append([]string{"claim", v4.String(), v6.String(), "--standby"}, resp.claim...)...)
			for _, c := range status(t, f.a, f.sa).Claims {
				if c.Responder != resp.responder {
					t.Fatalf("a's claim of %s: responder %q, want %q", c.Addr, c.Responder, resp.responder)
				}
			}
			macA, macB := mac(f.a, "eth0"), mac(f.b, "eth0")
			ttl, _ := time.ParseDuration(fleetTTL)
			// The deadline, in status: ahead, and no further than the TTL.
			if st := status(t, f.a, f.sa).Agent.Store; st == nil || st.Deadline.IsZero() ||
				time.Duration(st.DeadlineLeft) <= 0 || time.Duration(st.DeadlineLeft) > ttl {
				t.Fatalf("a's status shows no answer deadline ahead within the TTL: %+v", st)
			}
			events := labtest.Start(t, f.a, vipBin, "events", "--json", "--socket", f.sa)
			labtest.Eventually(t, 5*time.Second, func() (bool, string) {
				_, code := vipOn(t, f.a, f.sa, "refresh", v4.String())
				return code == 0 && strings.Contains(events.Output(), `"kind":"refresh"`), "waiting for a's event stream"
			})

			// When the store deletes a's keys (its lease's expiry), seen by
			// a watch from the client host: within a few milliseconds of
			// the deletion, on the same clock as the capture.
			expired := map[netip.Addr]time.Time{}
			var expiredMu sync.Mutex
			cli := etcdlab.Client(t, f.client, f.etcd.Endpoint())
			keys := store.NewKeys(store.DefaultPrefix)
			wctx, stopWatch := context.WithCancel(context.Background())
			t.Cleanup(stopWatch)
			watch := cli.Watch(wctx, keys.Claims(), clientv3.WithPrefix())
			go func() {
				for wr := range watch {
					for _, ev := range wr.Events {
						if ev.Type != clientv3.EventTypeDelete {
							continue
						}
						for _, vip := range []netip.Addr{v4, v6} {
							if string(ev.Kv.Key) == keys.Claim(vip) {
								expiredMu.Lock()
								if _, ok := expired[vip]; !ok {
									expired[vip] = time.Now()
								}
								expiredMu.Unlock()
							}
						}
					}
				}
			}()

			capture := labtest.Capture(t, f.client, "eth0", "arp or icmp6")
			probe(t, f.client, v4, v6)
			labtest.Eventually(t, 10*time.Second, func() (bool, string) {
				pkts := capture.Snapshot(t)
				has := func(vip netip.Addr) bool {
					for _, an := range answersFor(pkts, vip) {
						if an.mac == macA {
							return true
						}
					}
					return false
				}
				return has(v4) && has(v6), "a does not answer both addresses before the freeze"
			})

			// The fault: a's agent frozen for longer than its TTL.
			const freeze = 8 * time.Second
			frozen := time.Now()
			wake := freezeAgent(t, f.agentA)
			labtest.Eventually(t, freeze-time.Since(frozen), func() (bool, string) {
				n := 0
				for _, c := range status(t, f.b, f.sb).Claims {
					if c.State != "standby" {
						n++
					}
				}
				return n == 2, "b did not take both addresses while a was frozen"
			})
			tookOver := time.Since(frozen)
			time.Sleep(time.Until(frozen.Add(freeze)))
			// Taken before the signal: the woken agent may send at once.
			woke := time.Now()
			wake()
			t.Logf("a frozen at %s for %v; b took over %v into the freeze", frozen.Format("15:04:05.000"), freeze, tookOver.Round(time.Millisecond))

			// Three seconds of probing after the wake.
			labtest.Eventually(t, 15*time.Second, func() (bool, string) {
				ans := answersFor(capture.Snapshot(t), v4)
				return len(ans) > 0 && ans[len(ans)-1].mac == macB && ans[len(ans)-1].at.After(woke.Add(3*time.Second)),
					"no answer from b 3 s after a woke"
			})
			pkts := capture.Packets(t)
			if n := requestsFor(pkts, v4); n < 20 {
				t.Fatalf("the client asked for %s only %d times: the probe did not run", v4, n)
			}
			for _, vip := range []netip.Addr{v4, v6} {
				ans := answersFor(pkts, vip)
				var firstB time.Time
				for _, an := range ans {
					if an.mac == macB {
						firstB = an.at
						break
					}
				}
				if firstB.IsZero() {
					t.Errorf("%s: b never answered", vip)
					continue
				}
				var late []answer
				var lastA time.Time
				for _, an := range ans {
					switch an.mac {
					case macA:
						lastA = an.at
						if an.at.After(firstB) {
							late = append(late, an)
						}
					case macB:
					default:
						t.Errorf("%s answered by %s, neither a nor b", vip, an.mac)
					}
				}
				t.Logf("%s: a's last answer %s, b's first answer %s", vip, lastA.Format("15:04:05.000"), firstB.Format("15:04:05.000"))
				// The deadline's slack: how long before the store deleted
				// a's key the last frame from a left.
				expiredMu.Lock()
				gone, ok := expired[vip]
				expiredMu.Unlock()
				switch {
				case !ok:
					t.Errorf("%s: the store never deleted a's key during the freeze", vip)
				case !lastA.Before(gone):
					t.Errorf("%s: a's last frame at %s, after the store deleted its key at %s", vip, lastA.Format("15:04:05.000"), gone.Format("15:04:05.000"))
				default:
					t.Logf("%s: slack %v: a's last frame left that long before the store deleted its key (%s)", vip, gone.Sub(lastA).Round(time.Millisecond), gone.Format("15:04:05.000"))
				}
				if len(late) > 0 {
					t.Errorf("%s: a's MAC claimed it %d times after b's first answer at %s (two owners); first at %s",
						vip, len(late), firstB.Format("15:04:05.000"), firstTimes(late, 5))
				}
			}
			// Past its lease's expiry no frame from a may claim either
			// address: no answer, no announcement, and no request or
			// solicitation from it, whose sender teaches the asked the
			// same as an answer. (With --assign a's kernel may still send
			// for its own addresses, such as its link-local one.)
			deadline := frozen.Add(ttl + 100*time.Millisecond)
			var frozenLate, wokenLate []gopacket.Packet
			for _, pk := range pkts {
				eth, _ := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
				at := pk.Metadata().Timestamp
				switch {
				case eth == nil || eth.SrcMAC.String() != macA || !at.After(deadline) || !claimsAny(pk, v4, v6):
				case at.Before(woke):
					frozenLate = append(frozenLate, pk)
				default:
					wokenLate = append(wokenLate, pk)
				}
			}
			if n := len(frozenLate) + len(wokenLate); n > 0 {
				first := append(frozenLate, wokenLate...)[0]
				t.Errorf("%d frames from a's MAC claiming a VIP after the freeze + TTL + 100 ms (%s), the first at %s: %d while frozen (%s), %d after it woke at %s (%s)",
					n, deadline.Format("15:04:05.000"), first.Metadata().Timestamp.Format("15:04:05.000"),
					len(frozenLate), kindCounts(frozenLate), len(wokenLate), woke.Format("15:04:05.000"), kindCounts(wokenLate))
			}

			waitLostToB(t, f, 2, "after it woke")
			if _, code := vipOn(t, f.a, f.sa, "status", "--check"); code != 3 {
				t.Errorf("status --check on the woken a: exit %d, want 3", code)
			}
			// What happened, told by a once it runs again: one stall event
			// (how long, the lease expired, who holds what now), and the
			// frames it withheld past its deadline.
			labtest.Eventually(t, 10*time.Second, func() (bool, string) {
				var stall, withheld bool
				for _, line := range strings.Split(events.Output(), "\n") {
					var ev api.Event
					if json.Unmarshal([]byte(line), &ev) != nil {
						continue
					}
					switch ev.Kind {
					case "stall":
						stall = strings.Contains(ev.Message, "did not run for") && strings.Contains(ev.Message, "expired") &&
							strings.Contains(ev.Message, v4.String()+" is b's") && strings.Contains(ev.Message, v6.String()+" is b's")
					case "withheld":
						withheld = withheld || ev.Count > 0
					}
				}
				return stall && (withheld || !resp.withheld), "no stall event naming b for both addresses, or no withheld event, in:\n" + events.Output()
			})
		})
	}
}
