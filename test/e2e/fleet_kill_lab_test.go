package e2e_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// fromMAC returns the frames of pkts sent by mac that say it has one of
// vips (claimsAny), or that carry one of them as their IPv4 or IPv6 source:
// an answer, an announcement, or a service's reply from the address.
func fromMAC(pkts []gopacket.Packet, mac string, after time.Time, vips ...netip.Addr) []gopacket.Packet {
	var out []gopacket.Packet
	for _, pk := range pkts {
		eth, _ := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if eth == nil || eth.SrcMAC.String() != mac || !pk.Metadata().Timestamp.After(after) {
			continue
		}
		src := netip.Addr{}
		if ip4, ok := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
			src = addrOf(ip4.SrcIP)
		}
		for _, vip := range vips {
			if src == vip {
				out = append(out, pk)
				break
			}
		}
		if src.IsValid() {
			continue
		}
		if claimsAny(pk, vips...) {
			out = append(out, pk)
		}
	}
	return out
}

// tcpConn names a TCP connection by its two ends.
type tcpConn struct{ src, dst netip.AddrPort }

// tcpConnOf is pk's connection, seen from its sender (false: not TCP).
func tcpConnOf(pk gopacket.Packet) (tcpConn, bool) {
	tcp, ok := pk.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok {
		return tcpConn{}, false
	}
	var src, dst netip.Addr
	switch ip := pk.NetworkLayer().(type) {
	case *layers.IPv4:
		src, dst = addrOf(ip.SrcIP), addrOf(ip.DstIP)
	case *layers.IPv6:
		src, dst = addrOf(ip.SrcIP), addrOf(ip.DstIP)
	default:
		return tcpConn{}, false
	}
	return tcpConn{netip.AddrPortFrom(src, uint16(tcp.SrcPort)), netip.AddrPortFrom(dst, uint16(tcp.DstPort))}, true
}

// lateFrom is what mac sent for vips after after (fromMAC), less the tail
// of TCP connections it had accepted before after: a FIN or a segment its
// kernel retransmits on a timer from a socket that outlived the address.
// That answers nothing and accepts nothing, and it does not teach a
// neighbour or a switch where the address is; a SYN-ACK, or a segment of a
// connection accepted later, does.
func lateFrom(pkts []gopacket.Packet, mac string, after time.Time, vips ...netip.Addr) []gopacket.Packet {
	before := map[tcpConn]bool{}
	for _, pk := range fromMAC(pkts, mac, time.Time{}, vips...) {
		tcp, ok := pk.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ok && tcp.SYN && tcp.ACK && !pk.Metadata().Timestamp.After(after) {
			if c, ok := tcpConnOf(pk); ok {
				before[c] = true
			}
		}
	}
	var out []gopacket.Packet
	for _, pk := range fromMAC(pkts, mac, after, vips...) {
		if c, ok := tcpConnOf(pk); ok && before[c] {
			if tcp := pk.Layer(layers.LayerTypeTCP).(*layers.TCP); !tcp.SYN {
				continue
			}
		}
		out = append(out, pk)
	}
	return out
}

// firstFrom is when mac first answered for addr in pkts (zero: never).
func firstFrom(pkts []gopacket.Packet, addr netip.Addr, mac string) time.Time {
	for _, an := range answersFor(pkts, addr) {
		if an.mac == mac {
			return an.at
		}
	}
	return time.Time{}
}

// synAcks counts the TCP connections mac accepted after after: the SYN-ACKs
// it sent from one of vips.
func synAcks(pkts []gopacket.Packet, mac string, after time.Time, vips ...netip.Addr) int {
	n := 0
	for _, pk := range fromMAC(pkts, mac, after, vips...) {
		if tcp, ok := pk.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && tcp.SYN && tcp.ACK {
			n++
		}
	}
	return n
}

// serveTCP starts a service on h that accepts TCP connections on port 7 on
// every address, as a service on a VIP does (socat, IPv4 and IPv6).
func serveTCP(t *testing.T, h *lab.Host) {
	t.Helper()
	labtest.RequireTool(t, "socat")
	labtest.Start(t, h, "socat", "TCP4-LISTEN:7,fork,reuseaddr", "SYSTEM:echo "+h.Name)
	labtest.Start(t, h, "socat", "TCP6-LISTEN:7,fork,reuseaddr,ipv6only=1", "SYSTEM:echo "+h.Name)
}

// connectLoop connects to port 7 of each of vips from h about every 100 ms.
func connectLoop(t *testing.T, h *lab.Host, vips ...netip.Addr) {
	t.Helper()
	for _, vip := range vips {
		target := "TCP4:" + vip.String() + ":7"
		if vip.Is6() {
			target = "TCP6:[" + vip.String() + "]:7"
		}
		labtest.Start(t, h, "sh", "-c", fmt.Sprintf("while :; do socat -T 0.3 - %s,connect-timeout=0.3 </dev/null; sleep 0.1; done", target))
	}
}

// TestFleetKilledOwnerWithAssign kills the owner's agent (kill -9) while it
// holds addresses with --assign, a service listening on them: the
// addresses' lifetimes, which the agent kept to its answer deadline, run
// out, and the kernel removes them, so that from the standby's first answer
// on nothing of a answers for them or accepts a connection on them (before
// the lifetimes, a's kernel went on answering beside b for good). Started
// again, a's agent finds the addresses b's, leaves none on its interface
// and says so. On both responders, at the lab's TTL and the default.
func TestFleetKilledOwnerWithAssign(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	for _, tc := range []struct {
		name string
		args []string
		ttl  string
	}{
		{"socket", []string{"--responder", "socket"}, fleetTTL},
		{"ebpf-tcx", []string{"--responder", "ebpf", "--responder-hook", "tcx"}, fleetTTL},
		{"ebpf-xdp-generic", []string{"--responder", "ebpf", "--responder-hook", "xdp-generic"}, fleetTTL},
		{"socket-default-ttl", []string{"--responder", "socket"}, "6s"},
		{"ebpf-tcx-default-ttl", []string{"--responder", "ebpf", "--responder-hook", "tcx"}, "6s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			agentArgs := append(tc.args, "--lease-ttl", tc.ttl)
			f := newFleetLabWith(t, agentArgs...)
			v4, v6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
			vips := []netip.Addr{v4, v6}
			mustVip(t, f.a, f.sa, "claim", v4.String(), v6.String(), "--assign")
			mustVip(t, f.b, f.sb, "claim", v4.String(), v6.String(), "--standby", "--assign")
			macA, macB := mac(f.a, "eth0"), mac(f.b, "eth0")
			if got := assignedOf(t, f.a, func(a netip.Addr) bool { return a == v4 || a == v6 }); len(got) != 2 {
				t.Fatalf("a's eth0 has %v of the VIPs, want both (--assign)", got)
			}
			serveTCP(t, f.a)
			serveTCP(t, f.b)

			capture := labtest.Capture(t, f.client, "eth0", "arp or icmp6 or tcp port 7")
			probe(t, f.client, v4, v6)
			connectLoop(t, f.client, v4, v6)
			labtest.Eventually(t, 10*time.Second, func() (bool, string) {
				pkts := capture.Snapshot(t)
				return synAcks(pkts, macA, time.Time{}, v4) > 0 && synAcks(pkts, macA, time.Time{}, v6) > 0 &&
					len(answersFor(pkts, v4)) > 0 && len(answersFor(pkts, v6)) > 0, "a does not answer and serve both VIPs before the kill"
			})

			killed := time.Now()
			f.agentA.Kill(t)
			// b's first answer for each address, then two seconds of
			// probing after the later one.
			var firstB time.Time
			labtest.Eventually(t, 30*time.Second, func() (bool, string) {
				pkts := capture.Snapshot(t)
				firstB = time.Time{}
				for _, vip := range vips {
					first := firstFrom(pkts, vip, macB)
					if first.IsZero() {
						return false, fmt.Sprintf("b has not answered for %s yet", vip)
					}
					if first.After(firstB) {
						firstB = first
					}
				}
				return time.Since(firstB) > 2*time.Second, "two seconds of probing after b's first answers"
			})
			pkts := capture.Packets(t)
			t.Logf("killed %s, b's first answer for both %s (%v after the kill)", killed.Format("15:04:05.000"), firstB.Format("15:04:05.000"), firstB.Sub(killed).Round(time.Millisecond))
			if n := requestsFor(pkts, v4); n < 20 {
				t.Fatalf("the client asked for %s only %d times: the probe did not run", v4, n)
			}
			for _, vip := range vips {
				firstOfB := firstFrom(pkts, vip, macB)
				if late := lateFrom(pkts, macA, firstOfB, vip); len(late) > 0 {
					t.Errorf("%s: %d frames from a (%s) after b's first answer at %s: %s; first at %s", vip, len(late), macA,
						firstOfB.Format("15:04:05.000"), kindCounts(late), late[0].Metadata().Timestamp.Format("15:04:05.000"))
				}
				if n := synAcks(pkts, macA, firstOfB, vip); n > 0 {
					t.Errorf("%s: a accepted %d TCP connections after b's first answer", vip, n)
				}
				if n := synAcks(pkts, macB, firstOfB, vip); n == 0 {
					t.Errorf("%s: b accepted no TCP connection after it took the address", vip)
				}
			}
			// The kernel took the addresses off a's interface by itself.
			if got := assignedOf(t, f.a, func(a netip.Addr) bool { return a == v4 || a == v6 }); len(got) != 0 {
				t.Errorf("a's eth0 still has %v after b took over", got)
			}

			// a's agent again: it finds both addresses b's and leaves
			// none on its interface.
			f.agentA = startAgent(t, f.a, f.sa, append([]string{"--store", f.storeURL, "--node", "a", "--log-format", "json"}, agentArgs...)...)
			labtest.Eventually(t, 10*time.Second, func() (bool, string) {
				out := f.agentA.Output()
				return strings.Count(out, "is now another node's") == 2, "a's new agent has not dropped both claims:\n" + out
			})
			if got := assignedOf(t, f.a, func(a netip.Addr) bool { return a == v4 || a == v6 }); len(got) != 0 {
				t.Errorf("a's eth0 has %v after its agent started again, want none", got)
			}
			if st := status(t, f.a, f.sa); len(st.Claims) != 0 {
				t.Errorf("a's restarted agent holds %+v, want nothing (b's now)", st.Claims)
			}
			if n := strings.Count(f.agentA.Output(), "removed an address the earlier agent added"); n != 2 {
				t.Errorf("a's restarted agent reported %d addresses removed, want 2:\n%s", n, f.agentA.Output())
			}
		})
	}
}

// TestFleetRestartKeepsAssigned restarts the owner's agent (SIGTERM and a
// start, as systemctl restart does) while it holds addresses with --assign
// and a service listens on them: the addresses stay on the interface
// through the restart, with the lifetimes the last renewal gave them, so
// the service goes on accepting connections, and the new agent takes them
// over and lengthens their lifetimes again, past the old lease.
//
// It runs at the default TTL, 6 s: the addresses keep the lifetime of the
// last renewal, whole seconds that end by its deadline, which at the lab's
// 3 s TTL leaves about a second, less than a race-built agent takes to
// stop and start again on a loaded machine (measured 1.3 s in CI).
func TestFleetRestartKeepsAssigned(t *testing.T) {
	t.Parallel()
	const ttl = 6 * time.Second
	f := newFleetLabWith(t, "--lease-ttl", ttl.String())
	v4, v6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	vips := []netip.Addr{v4, v6}
	mustVip(t, f.a, f.sa, "claim", v4.String(), v6.String(), "--assign")
	mustVip(t, f.b, f.sb, "claim", v4.String(), v6.String(), "--standby", "--assign")
	macA, macB := mac(f.a, "eth0"), mac(f.b, "eth0")
	serveTCP(t, f.a)
	capture := labtest.Capture(t, f.client, "eth0", "arp or icmp6 or tcp port 7")
	connectLoop(t, f.client, v4, v6)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		pkts := capture.Snapshot(t)
		return synAcks(pkts, macA, time.Time{}, v4) > 0 && synAcks(pkts, macA, time.Time{}, v6) > 0, "a's service does not accept on both VIPs"
	})
	ours := func(a netip.Addr) bool { return a == v4 || a == v6 }

	stopped := time.Now()
	if code := f.agentA.Stop(t); code != 0 {
		t.Fatalf("a's agent after SIGTERM: exit %d:\n%s", code, f.agentA.Output())
	}
	if got := assignedOf(t, f.a, ours); len(got) != 2 {
		t.Fatalf("a's eth0 has %v once its agent stopped for a restart, want both VIPs still there", got)
	}
	f.agentA = startAgent(t, f.a, f.sa, "--store", f.storeURL, "--node", "a", "--lease-ttl", ttl.String(), "--log-format", "json")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		return strings.Count(f.agentA.Output(), "took over an address the earlier agent added") == 2, "the new agent has not taken over both addresses:\n" + f.agentA.Output()
	})
	// Two TTLs on, past the old lease and any lifetime it gave: still
	// there, and still served.
	labtest.Eventually(t, 4*ttl, func() (bool, string) {
		return time.Since(stopped) > 2*ttl, "two TTLs after the restart"
	})
	if got := assignedOf(t, f.a, ours); len(got) != 2 {
		t.Fatalf("a's eth0 has %v two TTLs after the restart, want both VIPs", got)
	}
	pkts := capture.Packets(t)
	for _, vip := range vips {
		var longest time.Duration
		prev := stopped
		for _, pk := range fromMAC(pkts, macA, stopped, vip) {
			if tcp, ok := pk.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && tcp.SYN && tcp.ACK {
				at := pk.Metadata().Timestamp
				longest = max(longest, at.Sub(prev))
				prev = at
			}
		}
		t.Logf("%s: longest stretch without a connection accepted by a across the restart: %v", vip, longest.Round(time.Millisecond))
		// The client tries about every 100 ms; a second allows for a
		// loaded machine.
		if longest > time.Second {
			t.Errorf("%s: a accepted no connection for %v across its agent's restart", vip, longest)
		}
		if n := len(fromMAC(pkts, macB, time.Time{}, vip)); n > 0 {
			t.Errorf("%s: %d frames from the standby b during a's restart", vip, n)
		}
	}
}
