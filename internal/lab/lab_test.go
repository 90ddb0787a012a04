package lab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// segment is the lab most tests use: a holds both families, b only IPv6 and
// two links, client both.
var segment = []lab.HostConfig{
	{Name: "a", IPv4: netip.MustParsePrefix("192.0.2.1/24"), IPv6: netip.MustParsePrefix("2001:db8::1/64")},
	{Name: "b", IPv6: netip.MustParsePrefix("2001:db8::2/64"), Links: 2},
	{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24"), IPv6: netip.MustParsePrefix("2001:db8::3/64")},
}

const cmdTimeout = 5 * time.Second

func run(t *testing.T, h *lab.Host, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := h.Run(ctx, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSegment(t *testing.T) {
	l := labtest.New(t, segment...)
	a, b, client := l.Host("a"), l.Host("b"), l.Host("client")

	t.Run("links", func(t *testing.T) {
		for _, h := range l.Hosts {
			for _, link := range h.Links {
				if len(link.MAC) != 6 || link.Index == 0 || !link.LinkLocal.IsLinkLocalUnicast() {
					t.Errorf("host %s: got link %+v, want MAC, index and link-local address filled in", h.Name, link)
				}
			}
		}
		if got := len(b.Links); got != 2 {
			t.Fatalf("b: got %d links, want 2", got)
		}
		if b.Links[0].Name != "eth0" || b.Links[1].Name != "eth1" {
			t.Errorf("b: got links %s and %s, want eth0 and eth1", b.Links[0].Name, b.Links[1].Name)
		}
		if bytes.Equal(b.Links[0].MAC, b.Links[1].MAC) {
			t.Errorf("b: eth0 and eth1 share MAC %s, want distinct", b.Links[0].MAC)
		}
		if got := labtest.Link(b, "eth1"); got == nil || got.BridgePort != "b-eth1" {
			t.Errorf("b: got eth1 %+v, want bridge port b-eth1", got)
		}
	})

	t.Run("addresses", func(t *testing.T) {
		tests := []struct {
			host *lab.Host
			want []string // addresses on eth0, link-local left out
		}{
			{a, []string{"192.0.2.1/24", "2001:db8::1/64"}},
			{b, []string{"2001:db8::2/64"}},
			{client, []string{"192.0.2.3/24", "2001:db8::3/64"}},
		}
		for _, tt := range tests {
			got := globalAddrs(t, tt.host, "eth0")
			if !slices.Equal(got, tt.want) {
				t.Errorf("host %s eth0: got addresses %v, want %v", tt.host.Name, got, tt.want)
			}
		}
	})

	// ping is not installed everywhere the tests run; arping and ndisc6 are
	// the peers the project's tests use anyway, and show the same thing: the
	// kernel on a answers for its addresses across the bridge.
	t.Run("ipv4", func(t *testing.T) {
		labtest.RequireTool(t, "arping")
		out := run(t, client, "arping", "-c", "1", "-w", "2", "-I", "eth0", "192.0.2.1")
		if want := strings.ToUpper(a.Links[0].MAC.String()); !strings.Contains(out, want) {
			t.Errorf("arping 192.0.2.1 from client: got\n%s\nwant a reply from %s", out, want)
		}
	})

	t.Run("ipv6", func(t *testing.T) {
		labtest.RequireTool(t, "ndisc6")
		out := run(t, client, "ndisc6", "-1", "-r", "1", "-w", "2000", "2001:db8::1", "eth0")
		if want := strings.ToUpper(a.Links[0].MAC.String()); !strings.Contains(strings.ToUpper(out), want) {
			t.Errorf("ndisc6 2001:db8::1 from client: got\n%s\nwant a reply from %s", out, want)
		}
	})

	t.Run("fdb", func(t *testing.T) {
		labtest.RequireTool(t, "arping")
		run(t, client, "arping", "-c", "1", "-w", "2", "-I", "eth0", "192.0.2.1")
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		defer cancel()
		fdb, err := labtest.FDB(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		mac := a.Links[0].MAC.String()
		if got, want := fdb[mac], a.Links[0].BridgePort; got != want {
			t.Errorf("fdb[%s]: got port %q, want %q (fdb %v)", mac, got, want, fdb)
		}
		for mac, port := range fdb {
			if !strings.Contains(port, "-eth") {
				t.Errorf("fdb[%s]: got port %q, want only learned entries on host ports", mac, port)
			}
		}
	})

	// The bridge snoops MLD, but with no querier on the segment it floods
	// multicast to every port, so b sees a solicitation for a's address.
	// Tests may lean on this; a switch with a querier would not deliver it.
	t.Run("multicast floods", func(t *testing.T) {
		labtest.RequireTool(t, "ndisc6")
		c := labtest.Capture(t, b, "eth0", "icmp6", "and", "ip6[40] == 135")
		run(t, client, "ndisc6", "-1", "-r", "1", "-w", "2000", "2001:db8::1", "eth0")
		want := netip.MustParseAddr("ff02::1:ff00:1")
		labtest.Eventually(t, 2*time.Second, func() (bool, string) {
			packets := c.Snapshot(t)
			for _, p := range packets {
				ip6, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
				if ok && ip6.DstIP.Equal(want.AsSlice()) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("b saw no neighbour solicitation to %s among %d packets", want, len(packets))
		})
	})
}

// globalAddrs returns the addresses on an interface of h, link-local left out.
func globalAddrs(t *testing.T, h *lab.Host, ifname string) []string {
	t.Helper()
	out := run(t, h, "ip", "-j", "addr", "show", "dev", ifname)
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
			Scope     string `json:"scope"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		t.Fatalf("ip -j addr show on %s: %v", h.Name, err)
	}
	var addrs []string
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if a.Scope == "global" {
				addrs = append(addrs, netip.PrefixFrom(netip.MustParseAddr(a.Local), a.PrefixLen).String())
			}
		}
	}
	slices.Sort(addrs)
	return addrs
}

func TestCaptureSeesARPRequest(t *testing.T) {
	labtest.RequireTool(t, "arping")
	l := labtest.New(t, segment...)
	a, client := l.Host("a"), l.Host("client")

	start := time.Now()
	c := labtest.Capture(t, client, "eth0", "arp")
	run(t, a, "arping", "-c", "1", "-w", "2", "-I", "eth0", "192.0.2.3")
	packets := c.Packets(t)

	for _, p := range packets {
		arp, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
		if !ok || arp.Operation != layers.ARPRequest || !bytes.Equal(arp.SourceHwAddress, a.Links[0].MAC) {
			continue
		}
		if ts := p.Metadata().Timestamp; ts.Before(start.Add(-time.Second)) || ts.After(time.Now()) {
			t.Errorf("ARP request: got timestamp %v, want between %v and now", ts, start)
		}
		return
	}
	t.Errorf("got %d packets, want an ARP request from a (%s):\n%v", len(packets), a.Links[0].MAC, packets)
}

func TestDownRemovesNamespaces(t *testing.T) {
	l := labtest.New(t, segment...)
	if got := labNetns(t, l.Prefix); len(got) != 4 {
		t.Fatalf("after up: got namespaces %v, want the switch and 3 hosts", got)
	}
	if err := l.Down(); err != nil {
		t.Fatalf("first down: %v", err)
	}
	if got := labNetns(t, l.Prefix); len(got) != 0 {
		t.Errorf("after down: got namespaces %v, want none", got)
	}
	if err := l.Down(); err != nil {
		t.Errorf("second down: got %v, want nil", err)
	}
}

func TestCleanRemovesLeftovers(t *testing.T) {
	// This lab only gets the test skipped when not root, and must survive
	// Clean of another prefix.
	other := labtest.New(t, lab.HostConfig{Name: "a"})

	prefix := labtest.Prefix()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leftover, err := lab.Up(ctx, lab.Config{Prefix: prefix, Hosts: segment})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leftover.Down() })

	if err := lab.Clean(prefix); err != nil {
		t.Fatalf("clean: %v", err)
	}
	if got := labNetns(t, prefix); len(got) != 0 {
		t.Errorf("after clean: got namespaces %v, want none", got)
	}
	if got := labNetns(t, other.Prefix); len(got) != 2 {
		t.Errorf("other lab after clean: got namespaces %v, want its switch and host", got)
	}
}

// labNetns returns the namespaces whose names are those of a lab with prefix.
func labNetns(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		// Lines read "name" or "name (id: N)".
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, prefix+"-") {
			names = append(names, name)
		}
	}
	return names
}

func TestUpRejectsBadConfig(t *testing.T) {
	a := lab.HostConfig{Name: "a"}
	tests := []struct {
		name string
		cfg  lab.Config
		want string
	}{
		{"empty prefix", lab.Config{Hosts: []lab.HostConfig{a}}, "prefix"},
		{"dash in prefix", lab.Config{Prefix: "v-t", Hosts: []lab.HostConfig{a}}, "prefix"},
		{"no hosts", lab.Config{Prefix: "vt"}, "no hosts"},
		{"host named sw", lab.Config{Prefix: "vt", Hosts: []lab.HostConfig{{Name: "sw"}}}, "taken by the switch"},
		{"duplicate host", lab.Config{Prefix: "vt", Hosts: []lab.HostConfig{a, a}}, "two hosts"},
		{"upper-case host", lab.Config{Prefix: "vt", Hosts: []lab.HostConfig{{Name: "A"}}}, "host name"},
		{"long host name", lab.Config{Prefix: "vt", Hosts: []lab.HostConfig{{Name: "averylonghost"}}}, "too long"},
		{"IPv6 as IPv4", lab.Config{Prefix: "vt", Hosts: []lab.HostConfig{{Name: "a", IPv4: netip.MustParsePrefix("2001:db8::1/64")}}}, "not IPv4"},
		{"IPv4 as IPv6", lab.Config{Prefix: "vt", Hosts: []lab.HostConfig{{Name: "a", IPv6: netip.MustParsePrefix("192.0.2.1/24")}}}, "not IPv6"},
		{"negative links", lab.Config{Prefix: "vt", Hosts: []lab.HostConfig{{Name: "a", Links: -1}}}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := lab.Up(context.Background(), tt.cfg)
			if err == nil {
				l.Down()
				t.Fatalf("got no error, want one containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %q, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestUpFailureRemovesOnlyWhatItBuilt(t *testing.T) {
	// Any lab gets the test skipped when not root.
	labtest.New(t, lab.HostConfig{Name: "a"})

	prefix := labtest.Prefix()
	// A namespace in the way of host b, as another lab might have left it.
	taken := lab.NetnsName(prefix, "b")
	if out, err := exec.Command("ip", "netns", "add", taken).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", taken, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", taken).Run() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := lab.Up(ctx, lab.Config{Prefix: prefix, Hosts: segment})
	if err == nil {
		l.Down()
		t.Fatalf("got no error with namespace %s taken, want one", taken)
	}
	if got := labNetns(t, prefix); !slices.Equal(got, []string{taken}) {
		t.Errorf("after failed up: got namespaces %v, want only the one that was there before, %s", got, taken)
	}
}
