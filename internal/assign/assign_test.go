package assign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vipctl/vip/internal/assign"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// Documentation prefixes only; every change happens inside the lab's
// namespaces.
var (
	vip4 = netip.MustParseAddr("192.0.2.10")
	vip6 = netip.MustParseAddr("2001:db8::10")
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// assigner returns an assign.Netlink working inside h's namespace.
func assigner(t *testing.T, h *lab.Host) *assign.Netlink {
	t.Helper()
	ns, err := netns.GetFromName(h.Netns)
	if err != nil {
		t.Fatalf("open namespace of %s: %v", h.Name, err)
	}
	t.Cleanup(func() { ns.Close() })
	a, err := assign.New(&ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// ipAddr is one address in `ip -j addr show`.
type ipAddr struct {
	Local     string `json:"local"`
	PrefixLen int    `json:"prefixlen"`
	Tentative bool   `json:"tentative"`
	NoDAD     bool   `json:"nodad"`
	// ValidLife is the lifetime left in seconds: 4294967295 for ever.
	ValidLife uint32 `json:"valid_life_time"`
}

// addrs returns the addresses of ifname on h, by address.
func addrs(t *testing.T, h *lab.Host, ifname string) map[netip.Addr]ipAddr {
	t.Helper()
	out, err := h.Run(ctxFor(t, 10*time.Second), "ip", "-j", "addr", "show", "dev", ifname)
	if err != nil {
		t.Fatal(err)
	}
	var links []struct {
		AddrInfo []ipAddr `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		t.Fatalf("decode ip -j addr show: %v: %s", err, out)
	}
	m := make(map[netip.Addr]ipAddr)
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if ip, err := netip.ParseAddr(a.Local); err == nil {
				m[ip] = a
			}
		}
	}
	return m
}

func mustRun(t *testing.T, h *lab.Host, args ...string) string {
	t.Helper()
	out, err := h.Run(ctxFor(t, 10*time.Second), args[0], args[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func add(t *testing.T, as *assign.Netlink, ifname string, a netip.Addr, wantAdded bool) {
	t.Helper()
	added, err := as.Add(ifname, a)
	if err != nil {
		t.Fatalf("add %s to %s: %v", a, ifname, err)
	}
	if added != wantAdded {
		t.Fatalf("add %s to %s: got added=%v, want %v", a, ifname, added, wantAdded)
	}
}

func remove(t *testing.T, as *assign.Netlink, ifname string, a netip.Addr) {
	t.Helper()
	if err := as.Remove(ifname, a); err != nil {
		t.Fatalf("remove %s from %s: %v", a, ifname, err)
	}
}

var replyFrom = regexp.MustCompile(`(?i)reply from \S+ \[([0-9a-f:]{17})\]`)

// arping runs iputils arping on h and returns the MAC of each reply.
func arping(t *testing.T, h *lab.Host, target netip.Addr, count int) []string {
	t.Helper()
	labtest.RequireTool(t, "arping")
	out, _ := h.Command(ctxFor(t, 20*time.Second), "arping", "-c", strconv.Itoa(count), "-w", strconv.Itoa(count+2), "-I", "eth0", target.String()).CombinedOutput()
	var macs []string
	for _, m := range replyFrom.FindAllStringSubmatch(string(out), -1) {
		macs = append(macs, strings.ToLower(m[1]))
	}
	return macs
}

func TestAssignIPv4(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
	)
	b, client := l.Host("b"), l.Host("client")
	as := assigner(t, b)
	bMAC := labtest.Link(b, "eth0").MAC.String()

	if got := arping(t, client, vip4, 1); len(got) != 0 {
		t.Fatalf("arping %s before Add: got replies from %v, want none", vip4, got)
	}

	add(t, as, "eth0", vip4, true)
	if got, ok := addrs(t, b, "eth0")[vip4]; !ok || got.PrefixLen != 32 {
		t.Fatalf("b's eth0 after Add: got %+v (present %v), want %s/32", got, ok, vip4)
	}
	// The kernel now owns the address: it answers ARP for it.
	got := arping(t, client, vip4, 3)
	if len(got) != 3 {
		t.Errorf("arping %s after Add: got %d replies, want 3", vip4, len(got))
	}
	for _, m := range got {
		if m != bMAC {
			t.Errorf("arping %s: got a reply from %s, want b's eth0 %s", vip4, m, bMAC)
		}
	}

	// Already there (ours now, but Add cannot know that): not added again.
	add(t, as, "eth0", vip4, false)

	// b's own address, with another prefix length: left alone, and a
	// mistaken Remove cannot take it either.
	own := b.IPv4.Addr()
	add(t, as, "eth0", own, false)
	remove(t, as, "eth0", own)
	if got, ok := addrs(t, b, "eth0")[own]; !ok || got.PrefixLen != 24 {
		t.Errorf("b's own %s after Add and Remove: got %+v (present %v), want it unchanged as /24", b.IPv4, got, ok)
	}

	remove(t, as, "eth0", vip4)
	if got, ok := addrs(t, b, "eth0")[vip4]; ok {
		t.Errorf("b's eth0 after Remove: still has %+v", got)
	}
	remove(t, as, "eth0", vip4) // not there: fine
	if got := arping(t, client, vip4, 1); len(got) != 0 {
		t.Errorf("arping %s after Remove: got replies from %v, want none", vip4, got)
	}
}

func TestAssignIPv6(t *testing.T) {
	t.Parallel()
	labtest.RequireTool(t, "ndisc6")
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv6: pfx("2001:db8::2/64"), Links: 2},
		lab.HostConfig{Name: "client", IPv6: pfx("2001:db8::3/64")},
	)
	b, client := l.Host("b"), l.Host("client")
	as := assigner(t, b)

	// The lab turns duplicate address detection off; turn it on for eth0,
	// so that an address added with DAD would be tentative, and check that
	// it is.
	mustRun(t, b, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=1", "net.ipv6.conf.eth0.dad_transmits=3")
	control := netip.MustParseAddr("2001:db8::11")
	mustRun(t, b, "ip", "addr", "add", control.String()+"/128", "dev", "eth0")
	if got := addrs(t, b, "eth0")[control]; !got.Tentative {
		t.Fatalf("control address added by ip with DAD on: got %+v, want tentative (else this test proves nothing)", got)
	}

	add(t, as, "eth0", vip6, true)
	got, ok := addrs(t, b, "eth0")[vip6]
	if !ok || got.PrefixLen != 128 || got.Tentative || !got.NoDAD {
		t.Fatalf("b's eth0 after Add: got %+v (present %v), want %s/128, nodad, not tentative", got, ok, vip6)
	}
	out, err := client.Run(ctxFor(t, 10*time.Second), "ndisc6", "-n", "-r", "3", "-w", "1000", vip6.String(), "eth0")
	if mac := labtest.Link(b, "eth0").MAC.String(); err != nil || !strings.Contains(strings.ToLower(out), mac) {
		t.Errorf("ndisc6 %s after Add: got %q (%v), want b's MAC %s", vip6, out, err, mac)
	}

	add(t, as, "eth0", b.IPv6.Addr(), false) // b's own /64

	remove(t, as, "eth0", vip6)
	if got, ok := addrs(t, b, "eth0")[vip6]; ok {
		t.Errorf("b's eth0 after Remove: still has %+v", got)
	}
	remove(t, as, "eth0", vip6)

	// With IPv6 turned off the kernel says "permission denied"; say why.
	mustRun(t, b, "sysctl", "-qw", "net.ipv6.conf.eth1.disable_ipv6=1")
	if _, err := as.Add("eth1", vip6); err == nil || !strings.Contains(err.Error(), "IPv6 is turned off") || !strings.Contains(err.Error(), "eth1") {
		t.Errorf("add to eth1 with IPv6 turned off: got %v, want an error saying so and naming eth1", err)
	}
	remove(t, as, "eth1", vip6)
}

// TestIPv6AddressGoesWithLinkDown records a kernel behaviour the agent must
// handle: with keep_addr_on_down at its default, taking the interface down
// removes an added IPv6 address (IPv4 ones stay), so it must be added again
// when the interface comes back up.
func TestIPv6AddressGoesWithLinkDown(t *testing.T) {
	t.Parallel()
	b := labtest.New(t, lab.HostConfig{Name: "b"}).Host("b")
	as := assigner(t, b)
	add(t, as, "eth0", vip4, true)
	add(t, as, "eth0", vip6, true)
	mustRun(t, b, "ip", "link", "set", "eth0", "down")
	mustRun(t, b, "ip", "link", "set", "eth0", "up")
	got := addrs(t, b, "eth0")
	if _, ok := got[vip4]; !ok {
		t.Errorf("after down and up: %s is gone, want it kept", vip4)
	}
	if _, ok := got[vip6]; ok {
		t.Errorf("after down and up: %s is still there; the kernel's behaviour changed, update the package comment", vip6)
	}
	add(t, as, "eth0", vip6, true)
	remove(t, as, "eth0", vip6)
	remove(t, as, "eth0", vip4)
}

func TestAssignNoInterface(t *testing.T) {
	t.Parallel()
	b := labtest.New(t, lab.HostConfig{Name: "b"}).Host("b")
	as := assigner(t, b)
	_, err := as.Add("eth9", vip4)
	if err == nil || !strings.Contains(err.Error(), "eth9") || !strings.Contains(err.Error(), vip4.String()) || !strings.Contains(err.Error(), "no such interface") {
		t.Errorf("add to a missing interface: got %v, want an error naming eth9, %s and saying there is no such interface", err, vip4)
	}
	if err := as.Remove("eth9", vip4); err != nil {
		t.Errorf("remove from a missing interface: got %v, want nil (the address went with it)", err)
	}
	if _, err := as.Add("eth0", netip.MustParseAddr("::ffff:192.0.2.10")); err == nil || !strings.Contains(err.Error(), "eth0") {
		t.Errorf("add of an IPv4-mapped address: got %v, want a refusal naming eth0", err)
	}
}

// TestAssignLifetime gives addresses a lifetime: Extend keeps them for as
// long as it is called, and once it is not, the kernel removes them by
// itself shortly after the lifetime ends; Extend puts back one that is gone.
// Add's addresses have none.
func TestAssignLifetime(t *testing.T) {
	t.Parallel()
	l := labtest.New(t, lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24"), IPv6: pfx("2001:db8::2/64")})
	b := l.Host("b")
	as := assigner(t, b)
	for _, a := range []netip.Addr{vip4, vip6} {
		added, err := as.AddFor("eth0", a, 2500*time.Millisecond)
		if err != nil || !added {
			t.Fatalf("AddFor %s: added %v, %v; want added", a, added, err)
		}
		if got := addrs(t, b, "eth0")[a]; got.ValidLife == 0 || got.ValidLife > 2 {
			t.Fatalf("%s after AddFor 2.5 s: valid_life_time %d, want 1-2 (whole seconds, cut)", a, got.ValidLife)
		}
	}
	// Extended every half second for longer than the lifetime: still there.
	tick := time.NewTicker(500 * time.Millisecond) // a renewal's pace at a lease TTL of 3 s
	defer tick.Stop()
	var left time.Time // the last extension
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); <-tick.C {
		left = time.Now()
		for _, a := range []netip.Addr{vip4, vip6} {
			if err := as.Extend("eth0", a, 2*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, a := range []netip.Addr{vip4, vip6} {
		if _, ok := addrs(t, b, "eth0")[a]; !ok {
			t.Fatalf("%s went while it was extended", a)
		}
	}
	// Left alone: gone, by the kernel, within its lifetime and the
	// kernel's check (a quarter of a second), with room for a loaded
	// machine.
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		have := addrs(t, b, "eth0")
		_, v4 := have[vip4]
		_, v6 := have[vip6]
		return !v4 && !v6, fmt.Sprintf("still there %v after the last extension: %v", time.Since(left).Round(time.Millisecond), have)
	})
	gone := time.Since(left)
	t.Logf("removed by the kernel %v after a lifetime of 2 s was last set", gone.Round(time.Millisecond))
	if gone < 1900*time.Millisecond {
		t.Errorf("removed %v after the last extension, before its lifetime of 2 s ended", gone)
	}
	// Extend puts it back.
	if err := as.Extend("eth0", vip4, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, ok := addrs(t, b, "eth0")[vip4]; !ok || got.PrefixLen != 32 {
		t.Fatalf("%s after Extend of a removed address: %+v (present %v), want it back as /32", vip4, got, ok)
	}
	// Add's are for ever; lifetimes shorter than a second are refused.
	add(t, as, "eth0", netip.MustParseAddr("192.0.2.20"), true)
	if got := addrs(t, b, "eth0")[netip.MustParseAddr("192.0.2.20")]; got.ValidLife != 4294967295 {
		t.Errorf("Add's address has valid_life_time %d, want forever", got.ValidLife)
	}
	if _, err := as.AddFor("eth0", netip.MustParseAddr("192.0.2.21"), 900*time.Millisecond); err == nil {
		t.Error("AddFor with 900 ms: no error, want one (the kernel counts whole seconds)")
	}
}
