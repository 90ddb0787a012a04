package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// Every address here is from the documentation prefixes; every frame stays
// inside namespaces the test made.
var (
	vip4  = netip.MustParseAddr("192.0.2.10")
	vip6  = netip.MustParseAddr("2001:db8::10")
	other = netip.MustParseAddr("192.0.2.11")
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// claim starts vip claim ... --foreground on h and waits until it says the
// claims are live.
func claim(t *testing.T, h *lab.Host, args ...string) *labtest.Proc {
	t.Helper()
	p := labtest.Start(t, h, vipBin, append([]string{"claim", "--foreground"}, args...)...)
	p.WaitOutput(t, "claimed", 10*time.Second)
	return p
}

func mac(h *lab.Host, link string) string { return labtest.Link(h, link).MAC.String() }

// arping runs iputils arping on h and returns its output and exit code.
func arping(t *testing.T, h *lab.Host, args ...string) (string, int) {
	t.Helper()
	labtest.RequireTool(t, "arping")
	cmd := h.Command(ctxFor(t, 20*time.Second), "arping", args...)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(interface{ ExitCode() int })
		if !ok {
			t.Fatalf("arping %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

var replyFrom = regexp.MustCompile(`(?i)reply from \S+ \[([0-9a-f:]{17})\]`)

// replyMACs lists the MAC of each reply line of arping's output.
func replyMACs(out string) []string {
	var macs []string
	for _, m := range replyFrom.FindAllStringSubmatch(out, -1) {
		macs = append(macs, strings.ToLower(m[1]))
	}
	return macs
}

// TestClaimAnswersARP checks the IPv4 responder against iputils arping, on an
// interface with no IPv4 address of its own and beside a second interface on
// the same segment that must stay silent.
func TestClaimAnswersARP(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "b", Links: 2},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
	)
	b, client := l.Host("b"), l.Host("client")

	// With no IPv4 route on b, vip cannot guess the interface.
	p := labtest.Start(t, b, vipBin, "claim", vip4.String(), "--foreground")
	if code := p.Wait(t, 10*time.Second); code != 2 || !strings.Contains(p.Output(), "pass -i") {
		t.Fatalf("claim without -i and no connected route: got exit %d, output %q; want exit 2 asking for -i", code, p.Output())
	}

	vip := claim(t, b, vip4.String(), "-i", "eth0")

	out, code := arping(t, client, "-c", "3", "-w", "5", "-I", "eth0", vip4.String())
	got := replyMACs(out)
	if code != 0 || len(got) != 3 {
		t.Fatalf("arping %s: got exit %d and %d replies, want 3 replies (one per request):\n%s", vip4, code, len(got), out)
	}
	for _, m := range got {
		if m != mac(b, "eth0") {
			t.Errorf("arping %s: got a reply from %s, want only b's eth0 %s (eth1 is %s)", vip4, m, mac(b, "eth0"), mac(b, "eth1"))
		}
	}

	// An address nobody claimed gets no answer.
	out, code = arping(t, client, "-c", "2", "-w", "3", "-I", "eth0", other.String())
	if code == 0 || len(replyMACs(out)) != 0 {
		t.Errorf("arping %s (not claimed): got exit %d, replies %v, want none:\n%s", other, code, replyMACs(out), out)
	}

	// An RFC 5227 probe (arping -D sends from 0.0.0.0) learns the address is taken.
	out, code = arping(t, client, "-D", "-c", "2", "-w", "3", "-I", "eth0", vip4.String())
	if code != 1 || len(replyMACs(out)) == 0 || replyMACs(out)[0] != mac(b, "eth0") {
		t.Errorf("arping -D %s: got exit %d, replies %v; want exit 1 (address in use) with b's MAC %s:\n%s", vip4, code, replyMACs(out), mac(b, "eth0"), out)
	}

	if code := vip.Stop(t); code != 0 {
		t.Fatalf("vip after SIGTERM: got exit %d, want 0:\n%s", code, vip.Output())
	}
	out, code = arping(t, client, "-c", "2", "-w", "3", "-I", "eth0", vip4.String())
	if code == 0 || len(replyMACs(out)) != 0 {
		t.Errorf("arping %s after vip exited: got replies %v, want none:\n%s", vip4, replyMACs(out), out)
	}
}

// TestClaimAnswersNDP checks the IPv6 responder against ndisc6, the kernel's
// neighbour unreachability detection (unicast solicitations) and its
// duplicate address detection.
func TestClaimAnswersNDP(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "ndisc6")
	labtest.RequireTool(t, "ping")
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv6: pfx("2001:db8::2/64")},
		lab.HostConfig{Name: "client", IPv6: pfx("2001:db8::3/64")},
	)
	b, client := l.Host("b"), l.Host("client")

	// No -i: b's connected route 2001:db8::/64 is on eth0.
	vip := claim(t, b, vip6.String())
	group := "ff02::1:ff00:10" // solicited-node group of 2001:db8::10
	if out := mustRun(t, b, "ip", "-6", "maddr", "show", "dev", "eth0"); !strings.Contains(out, group) {
		t.Errorf("b's multicast groups while %s is held: want %s in\n%s", vip6, group, out)
	}

	checkNDP(t, b, client)

	if code := vip.Stop(t); code != 0 {
		t.Fatalf("vip after SIGTERM: got exit %d, want 0:\n%s", code, vip.Output())
	}
	if out := mustRun(t, b, "ip", "-6", "maddr", "show", "dev", "eth0"); strings.Contains(out, group) {
		t.Errorf("b's multicast groups after release: want %s gone from\n%s", group, out)
	}
}

// checkNDP checks that b answers for vip6 as the client's tools and kernel
// expect: ndisc6 learns b's MAC (and nothing for an address not claimed),
// neighbour unreachability detection gets a solicited advertisement, and
// duplicate address detection finds the address in use.
func checkNDP(t *testing.T, b, client *lab.Host) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	out, err := client.Run(ctx, "ndisc6", "-n", "-r", "3", "-w", "1000", vip6.String(), "eth0")
	if err != nil {
		t.Fatalf("ndisc6 %s: %v", vip6, err)
	}
	if !strings.Contains(strings.ToLower(out), mac(b, "eth0")) {
		t.Fatalf("ndisc6 %s: got %q, want b's MAC %s", vip6, out, mac(b, "eth0"))
	}
	if out, err := client.Run(ctx, "ndisc6", "-n", "-r", "2", "-w", "500", "2001:db8::11", "eth0"); err == nil {
		t.Errorf("ndisc6 2001:db8::11 (not claimed): got an answer, want none:\n%s", out)
	}

	// Neighbour unreachability detection: a STALE entry makes the kernel
	// send a unicast solicitation straight to the address; only a
	// solicited advertisement makes the entry REACHABLE again.
	capture := labtest.Capture(t, client, "eth0", "icmp6")
	mustRun(t, client, "sysctl", "-qw", "net.ipv6.neigh.eth0.delay_first_probe_time=1")
	mustRun(t, client, "ip", "-6", "neigh", "replace", vip6.String(), "lladdr", mac(b, "eth0"), "dev", "eth0", "nud", "stale")
	client.Run(ctx, "ping", "-6", "-c", "1", "-W", "1", vip6.String()) // vip does not answer echo; the frame is enough
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		out, _ := client.Run(ctx, "ip", "-6", "neigh", "show", vip6.String(), "dev", "eth0")
		return strings.Contains(out, "REACHABLE"), "neighbour entry: " + out
	})
	// The entry is REACHABLE once the kernel took the advertisement,
	// which tcpdump may not have written yet: the capture is read until
	// it holds both frames (stopping it at once would lose what tcpdump
	// had not read from the kernel).
	var unicastNS, solicitedNA bool
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		unicastNS, solicitedNA = false, false
		for _, pk := range capture.Snapshot(t) {
			ip, _ := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
			if ip == nil {
				continue
			}
			if ns, ok := pk.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation); ok &&
				addrOf(ns.TargetAddress) == vip6 && addrOf(ip.DstIP) == vip6 {
				unicastNS = true
			}
			if na, ok := pk.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement); ok &&
				addrOf(na.TargetAddress) == vip6 && na.Solicited() && na.Override() && !addrOf(ip.DstIP).IsMulticast() {
				solicitedNA = true
			}
		}
		return unicastNS && solicitedNA, fmt.Sprintf("NUD: got unicast NS to %s %v, solicited NA back %v; want both", vip6, unicastNS, solicitedNA)
	})
	capture.Packets(t) // the kernel dropped none

	// Duplicate address detection: the client tries to take the address
	// and the kernel must find it in use.
	mustRun(t, client, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=1", "net.ipv6.conf.eth0.dad_transmits=1")
	mustRun(t, client, "ip", "-6", "addr", "add", vip6.String()+"/64", "dev", "eth0")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		out, _ := client.Run(ctx, "ip", "-6", "addr", "show", "dev", "eth0")
		return strings.Contains(out, "dadfailed"), "client's addresses: " + out
	})
}

func mustRun(t *testing.T, h *lab.Host, name string, args ...string) string {
	t.Helper()
	out, err := h.Run(ctxFor(t, 20*time.Second), name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// logLine is one line of vip's JSON log.
type logLine struct {
	Time time.Time `json:"time"`
	Msg  string    `json:"msg"`
	Addr string    `json:"addr"`
}

func logLines(t *testing.T, out string) []logLine {
	var lines []logLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

func findLog(lines []logLine, msg, addr string) (logLine, bool) {
	for _, l := range lines {
		if l.Msg == msg && l.Addr == addr {
			return l, true
		}
	}
	return logLine{}, false
}

// round is the gratuitous frames of one address seen close together.
type round struct {
	at     time.Time
	frames []gopacket.Packet
}

// rounds groups the gratuitous frames for addr into rounds: a round's
// frames go out back to back, so frames less than 30 ms apart belong to one.
func rounds(pkts []gopacket.Packet, addr netip.Addr) []round {
	var out []round
	for _, pk := range pkts {
		if !gratuitousFor(pk, addr) {
			continue
		}
		ts := pk.Metadata().Timestamp
		if n := len(out); n > 0 && ts.Sub(out[n-1].at) < 30*time.Millisecond {
			out[n-1].frames = append(out[n-1].frames, pk)
			continue
		}
		out = append(out, round{at: ts, frames: []gopacket.Packet{pk}})
	}
	return out
}

func gratuitousFor(pk gopacket.Packet, addr netip.Addr) bool {
	if a, ok := pk.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
		return addrOf(a.SourceProtAddress) == addr && addrOf(a.DstProtAddress) == addr
	}
	if na, ok := pk.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement); ok {
		return addrOf(na.TargetAddress) == addr && !na.Solicited()
	}
	return false
}

// checkARPRound checks the two frames of an IPv4 round: an announcement
// (request, target MAC zero) and a gratuitous reply (target MAC broadcast),
// both broadcast from our MAC.
func checkARPRound(t *testing.T, r round, ourMAC string) {
	t.Helper()
	var req, rep int
	for _, pk := range r.frames {
		eth := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		a := pk.Layer(layers.LayerTypeARP).(*layers.ARP)
		if eth.DstMAC.String() != "ff:ff:ff:ff:ff:ff" || eth.SrcMAC.String() != ourMAC || net.HardwareAddr(a.SourceHwAddress).String() != ourMAC {
			t.Errorf("ARP frame: got eth %s -> %s, sender MAC %s; want %s -> broadcast, sender %s", eth.SrcMAC, eth.DstMAC, net.HardwareAddr(a.SourceHwAddress), ourMAC, ourMAC)
		}
		switch {
		case a.Operation == layers.ARPRequest && net.HardwareAddr(a.DstHwAddress).String() == "00:00:00:00:00:00":
			req++
		case a.Operation == layers.ARPReply && net.HardwareAddr(a.DstHwAddress).String() == "ff:ff:ff:ff:ff:ff":
			rep++
		default:
			t.Errorf("ARP frame: got op %d target MAC %s, want a request with zero target MAC or a reply with broadcast target MAC", a.Operation, net.HardwareAddr(a.DstHwAddress))
		}
	}
	if req != 1 || rep != 1 {
		t.Errorf("IPv4 round at %v: got %d requests and %d replies, want 1 and 1", r.at, req, rep)
	}
}

func checkNARound(t *testing.T, r round, ourMAC string, addr netip.Addr) {
	t.Helper()
	if len(r.frames) != 1 {
		t.Errorf("IPv6 round at %v: got %d frames, want 1", r.at, len(r.frames))
		return
	}
	pk := r.frames[0]
	eth := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	na := pk.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	var tlla string
	for _, o := range na.Options {
		if o.Type == layers.ICMPv6OptTargetAddress {
			tlla = net.HardwareAddr(o.Data).String()
		}
	}
	if eth.DstMAC.String() != "33:33:00:00:00:01" || addrOf(ip.DstIP) != netip.MustParseAddr("ff02::1") ||
		addrOf(ip.SrcIP) != addr || ip.HopLimit != 255 || na.Solicited() || !na.Override() || tlla != ourMAC {
		t.Errorf("NA: got eth dst %s, %s -> %s hop limit %d, S=%v O=%v, target link-layer %s; want 33:33:00:00:00:01, %s -> ff02::1, 255, S=false O=true, %s",
			eth.DstMAC, ip.SrcIP, ip.DstIP, ip.HopLimit, na.Solicited(), na.Override(), tlla, addr, ourMAC)
	}
}

// TestBurstOnTheWire counts the gratuitous burst from a third host: the
// first round within 50 ms of the claim, then the configured number of rounds
// at the configured spacing, with the frame fields the design asks for.
func TestBurstOnTheWire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		rounds   int
		interval time.Duration
	}{
		{"defaults", nil, 5, 1100 * time.Millisecond},
		{"custom window and interval", []string{"--window", "2300ms", "--interval", "500ms"}, 5, 500 * time.Millisecond},
		{"a single round", []string{"--window", "0"}, 1, 1100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := labtest.New(t,
				lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24"), IPv6: pfx("2001:db8::2/64")},
				lab.HostConfig{Name: "watch"},
			)
			b, watch := l.Host("b"), l.Host("watch")
			capture := labtest.Capture(t, watch, "eth0", "arp or (icmp6 and ip6[40] == 136)")
			args := append([]string{vip4.String(), vip6.String(), "-i", "eth0", "--log-format", "json"}, tt.args...)
			p := claim(t, b, args...)
			// Wait for the end of both bursts as vip reports it, then a
			// further interval in which no round may come.
			labtest.Eventually(t, 15*time.Second, func() (bool, string) {
				lines := logLines(t, p.Output())
				_, e4 := findLog(lines, "burst end", vip4.String())
				_, e6 := findLog(lines, "burst end", vip6.String())
				return e4 && e6, "waiting for both bursts to end"
			})
			time.Sleep(tt.interval + 200*time.Millisecond) // a quiet spell is what is being checked
			pkts := capture.Packets(t)
			lines := logLines(t, p.Output())
			ourMAC := mac(b, "eth0")
			for _, addr := range []netip.Addr{vip4, vip6} {
				claimLog, ok := findLog(lines, "claim", addr.String())
				if !ok {
					t.Fatalf("no claim log line for %s in:\n%s", addr, p.Output())
				}
				rs := rounds(pkts, addr)
				if len(rs) != tt.rounds {
					t.Errorf("%s: got %d rounds, want %d", addr, len(rs), tt.rounds)
					continue
				}
				if d := rs[0].at.Sub(claimLog.Time); d < -5*time.Millisecond || d > 50*time.Millisecond {
					t.Errorf("%s: first round %v after the claim, want within 50 ms", addr, d)
				}
				for i := 1; i < len(rs); i++ {
					gap := rs[i].at.Sub(rs[i-1].at)
					if gap < tt.interval-20*time.Millisecond || gap > tt.interval+300*time.Millisecond {
						t.Errorf("%s: rounds %d and %d %v apart, want %v", addr, i, i+1, gap, tt.interval)
					}
				}
				for _, r := range rs {
					if addr.Is4() {
						checkARPRound(t, r, ourMAC)
					} else {
						checkNARound(t, r, ourMAC, addr)
					}
				}
			}
			// The switch learnt where b lives.
			fdb, err := labtest.FDB(ctxFor(t, 10*time.Second), l)
			if err != nil {
				t.Fatal(err)
			}
			if port := fdb[ourMAC]; port != labtest.Link(b, "eth0").BridgePort {
				t.Errorf("bridge fdb: got %s on port %q, want %q", ourMAC, port, labtest.Link(b, "eth0").BridgePort)
			}
		})
	}
}

// neighMAC returns the MAC of h's neighbour entry for addr, or "".
func neighMAC(t *testing.T, h *lab.Host, addr netip.Addr) string {
	out, _ := h.Run(ctxFor(t, 10*time.Second), "ip", "neigh", "show", addr.String(), "dev", "eth0")
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "lladdr" {
			return f[i+1]
		}
	}
	return ""
}

// TestFailover moves both VIPs from a to b and checks that the client's
// kernel neighbour entries follow, from b's gratuitous traffic alone.
func TestFailover(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "ping")
	l := labtest.New(t,
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.1/24"), IPv6: pfx("2001:db8::1/64")},
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24"), IPv6: pfx("2001:db8::2/64")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24"), IPv6: pfx("2001:db8::3/64")},
	)
	a, b, client := l.Host("a"), l.Host("b"), l.Host("client")
	ctx := ctxFor(t, 60*time.Second)

	pa := claim(t, a, vip4.String(), vip6.String())
	for _, addr := range []netip.Addr{vip4, vip6} {
		client.Run(ctx, "ping", "-c", "1", "-W", "1", addr.String()) // resolves; vip does not answer echo
		labtest.Eventually(t, 5*time.Second, func() (bool, string) {
			got := neighMAC(t, client, addr)
			return got == mac(a, "eth0"), fmt.Sprintf("client's entry for %s: got %q, want a's %s", addr, got, mac(a, "eth0"))
		})
	}
	if code := pa.Stop(t); code != 0 {
		t.Fatalf("a's vip after SIGTERM: got exit %d, want 0:\n%s", code, pa.Output())
	}
	claim(t, b, vip4.String(), vip6.String())
	for _, addr := range []netip.Addr{vip4, vip6} {
		labtest.Eventually(t, 8*time.Second, func() (bool, string) {
			got := neighMAC(t, client, addr)
			return got == mac(b, "eth0"), fmt.Sprintf("client's entry for %s: got %q, want b's %s", addr, got, mac(b, "eth0"))
		})
	}
}

// TestClaimRefusesBadInput runs vip against real interfaces in a lab host:
// each refusal is exit 2 with a sentence naming the fix, and a refused claim
// sends nothing, not even for the addresses that were fine.
func TestClaimRefusesBadInput(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24"), Links: 4},
		lab.HostConfig{Name: "watch"},
	)
	b := l.Host("b")
	mustRun(t, b, "ip", "link", "set", "eth1", "down")
	mustRun(t, b, "ip", "link", "set", "eth2", "arp", "off")
	mustRun(t, b, "sysctl", "-qw", "net.ipv6.conf.eth3.disable_ipv6=1")
	capture := labtest.Capture(t, l.Host("watch"), "eth0", "arp or icmp6")

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no such interface", []string{"192.0.2.10", "-i", "eth9"}, `"eth9" does not exist`},
		{"interface down", []string{"192.0.2.10", "-i", "eth1"}, "ip link set eth1 up"},
		{"NOARP", []string{"192.0.2.10", "-i", "eth2"}, "arp on"},
		{"loopback", []string{"192.0.2.10", "-i", "lo"}, "loopback interface"},
		{"IPv6 off, beside a good IPv4 address", []string{"192.0.2.10", "2001:db8::10", "-i", "eth3"}, "IPv6 is turned off on eth3"},
		{"subnet broadcast", []string{"192.0.2.255"}, "broadcast address of 192.0.2.0/24"},
		{"same address twice", []string{"2001:db8::10", "2001:DB8:0::10", "-i", "eth0"}, "same address"},
		{"multicast", []string{"224.0.0.1", "-i", "eth0"}, "multicast"},
		{"unknown frame kind", []string{"192.0.2.10", "-i", "eth0", "--frames", "garp"}, `unknown frame kind "garp"`},
		{"no ARP kind for an IPv4 address", []string{"192.0.2.10", "-i", "eth0", "--frames", "na"}, "add arp-request or arp-reply"},
		{"bad duration", []string{"192.0.2.10", "-i", "eth0", "--window", "soon"}, "--window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := labtest.Start(t, b, vipBin, append([]string{"claim", "--foreground"}, tt.args...)...)
			code := p.Wait(t, 10*time.Second)
			out := p.Output()
			if code != 2 || !strings.Contains(out, tt.want) {
				t.Errorf("vip claim %v: got exit %d, output %q; want exit 2 and %q", tt.args, code, out, tt.want)
			}
			if n := strings.Count(strings.TrimSpace(out), "\n"); n > 1 {
				t.Errorf("vip claim %v: got %d lines, want one sentence (and a usage hint for flag errors):\n%s", tt.args, n+1, out)
			}
		})
	}
	for _, pk := range capture.Packets(t) {
		if gratuitousFor(pk, vip4) || gratuitousFor(pk, vip6) {
			t.Errorf("a refused claim sent %v", pk)
		}
	}
}

// TestClaimWithoutPrivileges runs vip as nobody: exit 1 and a message that
// names root and CAP_NET_RAW.
func TestClaimWithoutPrivileges(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "setpriv")
	l := labtest.New(t, lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")})
	p := labtest.Start(t, l.Host("b"), "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
		vipBin, "claim", vip4.String(), "-i", "eth0", "--foreground")
	code := p.Wait(t, 10*time.Second)
	if out := p.Output(); code != 1 || !strings.Contains(out, "root") || !strings.Contains(out, "CAP_NET_RAW") || !strings.Contains(out, "setcap") {
		t.Errorf("vip claim as nobody: got exit %d, output %q; want exit 1 naming root, CAP_NET_RAW and setcap", code, out)
	} else if why := labtest.CheckLastLine(out); why != "" {
		t.Errorf("vip claim as nobody: the message %s: %q", why, out)
	}
}
