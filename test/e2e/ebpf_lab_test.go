package e2e_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/packet"
	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// The in-kernel responder through the real vip binary: run as root, the
// agent's default (--responder auto) answers in the kernel, on tcx.

// vipPrograms lists the names of the vip eBPF programs (their names start
// with vip_) attached to h's eth0, on tcx ingress and on XDP.
func vipPrograms(t *testing.T, h *lab.Host) []string {
	t.Helper()
	var names []string
	add := func(id ebpf.ProgramID) {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			return // gone meanwhile
		}
		defer p.Close()
		if info, err := p.Info(); err == nil && strings.HasPrefix(info.Name, "vip_") {
			names = append(names, info.Name)
		}
	}
	eth0 := labtest.Link(h, "eth0")
	err := labtest.Do(h, func() error {
		res, err := link.QueryPrograms(link.QueryOptions{Target: eth0.Index, Attach: ebpf.AttachTCXIngress})
		if err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
			return err
		}
		if res != nil {
			for _, p := range res.Programs {
				add(p.ID)
			}
		}
		nl, err := netlink.LinkByIndex(eth0.Index)
		if err != nil {
			return err
		}
		if x := nl.Attrs().Xdp; x != nil && x.Attached {
			add(ebpf.ProgramID(x.ProgId))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list the eBPF programs on %s's eth0: %v", h.Name, err)
	}
	return names
}

// claimOf returns addr's claim in st.
func claimOf(t *testing.T, st api.StatusResponse, addr string) api.Claim {
	t.Helper()
	for _, c := range st.Claims {
		if c.Addr == addr {
			return c
		}
	}
	t.Fatalf("status: %s is not held: %+v", addr, st.Claims)
	return api.Claim{}
}

// ebpfLab is b and a client on one segment, both with IPv4 and IPv6, and
// an agent on b with its socket.
func ebpfLab(t *testing.T) (b, client *lab.Host, sock string) {
	t.Helper()
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24"), IPv6: pfx("2001:db8::2/64")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24"), IPv6: pfx("2001:db8::3/64")},
	)
	return l.Host("b"), l.Host("client"), filepath.Join(sockDir(t), "b.sock")
}

// TestEBPFAgentAnswers: the agent answers in the kernel by default, once
// per request (the kernel owns neither address), for arping, ndisc6, the
// kernel's NUD and DAD; status says so per claim and counts the traffic
// that arrives (a ping, which nobody answers, is traffic all the same).
func TestEBPFAgentAnswers(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "ndisc6")
	labtest.RequireTool(t, "ping")
	b, client, sock := ebpfLab(t)
	startAgent(t, b, sock)
	mustVip(t, b, sock, "claim", vip4.String(), vip6.String(), "-i", "eth0")

	st := status(t, b, sock)
	for _, a := range []string{vip4.String(), vip6.String()} {
		if c := claimOf(t, st, a); c.Responder != "ebpf (tcx)" || c.Traffic == nil {
			t.Errorf("%s: got responder %q, traffic %+v; want ebpf (tcx) with its traffic counted", a, c.Responder, c.Traffic)
		}
	}
	if got := vipPrograms(t, b); len(got) != 1 || got[0] != "vip_tc" {
		t.Errorf("programs on b's eth0: got %v, want vip_tc alone (one for the interface, both addresses)", got)
	}

	oneReplyEach(t, client, vip4, 3, mac(b, "eth0"))
	checkNDP(t, b, client)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		c := claimOf(t, status(t, b, sock), vip4.String())
		return c.Answered >= 3, fmt.Sprintf("status answered %d for %s, want the 3 arping requests counted", c.Answered, vip4)
	})

	client.Run(ctxFor(t, 10*time.Second), "ping", "-c", "3", "-i", "0.2", "-W", "1", vip4.String()) // unanswered: the echo requests are the traffic
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		c := claimOf(t, status(t, b, sock), vip4.String())
		return c.Traffic != nil && c.Traffic.Packets >= 3 && c.Traffic.Bytes >= 3*98,
			fmt.Sprintf("status traffic for %s: %+v, want the 3 echo requests (98 bytes each) counted", vip4, c.Traffic)
	})
	out := mustVip(t, b, sock, "status")
	if !strings.Contains(out, "ebpf (tcx)") || !strings.Contains(out, "pkts") {
		t.Errorf("plain status: want the responder and the traffic in\n%s", out)
	}
}

// TestEBPFRefusedFallsBack: an agent without CAP_BPF (and without
// CAP_SYS_ADMIN, which would stand in for it) answers on sockets, says why
// in its log and status; a foreground claim with --responder ebpf there
// exits 1 with the sentence; and the capabilities the systemd unit grants
// (CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF, CAP_PERFMON) are enough for eBPF.
func TestEBPFRefusedFallsBack(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "setpriv")
	b, client, sock := ebpfLab(t)
	without := []string{"--inh-caps=-all", "--bounding-set=-all,+net_raw,+net_admin"}

	agent := labtest.Start(t, b, "setpriv", append(without, vipBin, "agent", "--socket", sock)...)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		_, code := vipOn(t, b, sock, "status")
		return code == 0 || agent.Exited(), "waiting for the agent without CAP_BPF to answer"
	})
	mustVip(t, b, sock, "claim", vip4.String(), "-i", "eth0")
	if c := claimOf(t, status(t, b, sock), vip4.String()); c.Responder != "socket" || c.Traffic != nil {
		t.Errorf("without CAP_BPF: got responder %q, traffic %+v; want socket and the traffic unknown (absent)", c.Responder, c.Traffic)
	}
	agent.WaitOutput(t, "the eBPF responder is unavailable: answering on packet sockets", 5*time.Second)
	if out := agent.Output(); !strings.Contains(out, "needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN") {
		t.Errorf("the agent's log: want the reason naming the capabilities in\n%s", out)
	}
	if got := vipPrograms(t, b); len(got) != 0 {
		t.Errorf("programs on b's eth0 without CAP_BPF: got %v, want none", got)
	}
	oneReplyEach(t, client, vip4, 2, mac(b, "eth0"))
	if code := agent.Stop(t); code != 0 {
		t.Fatalf("agent after SIGTERM: exit %d", code)
	}

	fg := labtest.Start(t, b, "setpriv", append(without, vipBin, "claim", other.String(), "-i", "eth0", "--foreground", "--responder", "ebpf")...)
	if code := fg.Wait(t, 10*time.Second); code != 1 || !strings.Contains(fg.Output(), "needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN") {
		t.Errorf("claim --foreground --responder ebpf without CAP_BPF: got exit %d:\n%s\nwant exit 1 naming the capabilities", code, fg.Output())
	}

	// CAP_BPF alone is not enough: the verifier allows the program's
	// pointer arithmetic only with CAP_PERFMON.
	noPerfmon := labtest.Start(t, b, "setpriv", "--inh-caps=-all", "--bounding-set=-all,+net_raw,+net_admin,+bpf",
		vipBin, "claim", other.String(), "-i", "eth0", "--foreground", "--responder", "ebpf")
	if code := noPerfmon.Wait(t, 10*time.Second); code != 1 || !strings.Contains(noPerfmon.Output(), "needs CAP_PERFMON besides CAP_BPF and CAP_NET_ADMIN") {
		t.Errorf("claim --foreground --responder ebpf without CAP_PERFMON: got exit %d:\n%s\nwant exit 1 naming CAP_PERFMON", code, noPerfmon.Output())
	}

	unit := labtest.Start(t, b, "setpriv", "--inh-caps=-all", "--bounding-set=-all,+net_raw,+net_admin,+bpf,+perfmon",
		vipBin, "claim", other.String(), "-i", "eth0", "--foreground", "--responder", "ebpf")
	unit.WaitOutput(t, "claimed", 10*time.Second)
	if got := vipPrograms(t, b); len(got) != 1 {
		t.Errorf("with the unit's capabilities: got programs %v, want vip's one", got)
	}
	oneReplyEach(t, client, other, 2, mac(b, "eth0"))
}

// TestEBPFKilledAgentReplaced: after kill -9 the next agent re-adopts the
// claim and exactly one program answers; vip agent --clean removes what a
// vip still running on a claimed interface attached.
func TestEBPFKilledAgentReplaced(t *testing.T) {
	t.Parallel()
	b, client, sock := ebpfLab(t)
	agent := startAgent(t, b, sock)
	mustVip(t, b, sock, "claim", vip4.String(), "-i", "eth0")
	if got := vipPrograms(t, b); len(got) != 1 {
		t.Fatalf("programs on b's eth0: got %v, want one", got)
	}
	agent.Kill(t)

	again := startAgent(t, b, sock)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		st := status(t, b, sock)
		return len(st.Claims) == 1 && st.Claims[0].Responder == "ebpf (tcx)", fmt.Sprintf("the new agent's claims: %+v", st.Claims)
	})
	if got := vipPrograms(t, b); len(got) != 1 {
		t.Errorf("after kill -9 and a new agent: got programs %v, want exactly one", got)
	}
	oneReplyEach(t, client, vip4, 2, mac(b, "eth0"))

	// Crash the agent again, so that --clean may run, and have another
	// vip attach on the interface meanwhile.
	again.Kill(t)
	fg := claim(t, b, other.String(), "-i", "eth0")
	if got := vipPrograms(t, b); len(got) != 1 {
		t.Fatalf("with a foreground claim on b's eth0: got programs %v, want one", got)
	}
	if out, code := vipOn(t, b, sock, "agent", "--clean"); code != 0 {
		t.Fatalf("vip agent --clean: exit %d:\n%s", code, out)
	}
	if got := vipPrograms(t, b); len(got) != 0 {
		t.Errorf("after vip agent --clean: got programs %v, want none", got)
	}
	fg.Stop(t)
}

// TestEBPFSeesARivalsAnnouncement: a rival's gratuitous ARP in request form
// (arping -U) for an address the program holds is a competing claim, not a
// question: the program leaves it unanswered and passes it on, so that the
// agent's capture, which reads after tc ingress (and on XDP could never see
// a frame the program consumed), reports the rival. The rival's kernel
// answers no probe (arp_ignore 8), so only its announcement gives it away.
func TestEBPFSeesARivalsAnnouncement(t *testing.T) {
	t.Parallel()
	for _, hook := range []string{"tcx", "xdp-generic"} {
		t.Run(hook, func(t *testing.T) {
			t.Parallel()
			l := labtest.New(t,
				lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
				lab.HostConfig{Name: "rogue", IPv4: pfx("192.0.2.66/24")},
			)
			b, rogue := l.Host("b"), l.Host("rogue")
			sock := filepath.Join(sockDir(t), "b.sock")
			startAgent(t, b, sock, "--responder", "ebpf", "--responder-hook", hook)
			mustVip(t, b, sock, "claim", "192.0.2.10", "--on-conflict", "warn")
			if c := claimOf(t, status(t, b, sock), "192.0.2.10"); c.Responder != "ebpf ("+hook+")" {
				t.Fatalf("responder %q, want ebpf (%s)", c.Responder, hook)
			}
			mustRun(t, rogue, "sysctl", "-qw", "net.ipv4.conf.eth0.arp_ignore=8")
			mustRun(t, rogue, "ip", "addr", "add", "192.0.2.10/32", "dev", "eth0")
			arping(t, rogue, "-U", "-c", "2", "-I", "eth0", "192.0.2.10")
			labtest.Eventually(t, 3*time.Second, func() (bool, string) {
				macs, state := claimersOf(t, b, sock, "192.0.2.10")
				return state == "conflict" && len(macs) > 0 && macs[0] == mac(rogue, "eth0"), fmt.Sprintf("claimers %v, state %s; want the rival's announcement seen", macs, state)
			})
		})
	}
}

// TestSocketResponderOwnFramesOnly: the socket responder's sockets, bound
// to ARP and IPv6 on eth0, are also handed what an upper interface took
// over (on a VLAN's parent that is the VLAN's frames, their tag taken
// off); it answers none of those. A who-has for the held address sent to
// the MAC of a macvlan on b's eth0 gets no answer, one sent to broadcast
// gets one, from eth0's MAC.
func TestSocketResponderOwnFramesOnly(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
	)
	b, client := l.Host("b"), l.Host("client")
	mv0 := labtest.Macvlan(t, b, "eth0", "mv0")
	sock := filepath.Join(sockDir(t), "b.sock")
	startAgent(t, b, sock, "--responder", "socket")
	mustVip(t, b, sock, "claim", vip4.String(), "-i", "eth0")

	// The answers, unicast to the client; the burst's gratuitous
	// replies go to broadcast, a round every interval.
	replies := labtest.Capture(t, client, "eth0", "arp[6:2] == 2 and not ether broadcast")
	conn, clientMAC := rawSocketIn(t, client, "eth0")
	for _, to := range []net.HardwareAddr{mv0, wire.Broadcast} {
		frame, err := wiretest.ARPFrame(to, clientMAC, arp.OperationRequest, clientMAC, netip.MustParseAddr("192.0.2.3"), make(net.HardwareAddr, 6), vip4)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.WriteTo(frame, &packet.Addr{HardwareAddr: to}); err != nil {
			t.Fatalf("send a who-has to %v: %v", to, err)
		}
	}
	bMAC := mac(b, "eth0")
	labtest.Eventually(t, 3*time.Second, func() (bool, string) {
		n := len(replies.Snapshot(t))
		return n >= 1, fmt.Sprintf("%d ARP replies at the client, want the broadcast's", n)
	})
	// The reply to the broadcast came after whatever the first request
	// drew: all are in now.
	var from []string
	for _, pk := range replies.Packets(t) {
		if a := arpOf(pk); a != nil {
			from = append(from, net.HardwareAddr(a.SourceHwAddress).String())
		}
	}
	if len(from) != 1 || from[0] != bMAC {
		t.Errorf("ARP replies from %v, want one, from b's eth0 (%s): the request sent to the macvlan %v is not eth0's", from, bMAC, mv0)
	}
}
