package bpfresp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

var (
	labVIP4 = netip.MustParseAddr("192.0.2.10")
	labVIP6 = netip.MustParseAddr("2001:db8::10")
)

// childEnv, set, makes the test binary the child TestLabKilled kills: it
// opens a responder on the interface the variable names and waits.
const childEnv = "VIP_BPFRESP_CHILD"

func TestMain(m *testing.M) {
	if ifname := os.Getenv(childEnv); ifname != "" {
		os.Exit(child(ifname))
	}
	os.Exit(m.Run())
}

// child opens a responder on ifname, says so, and waits to be killed.
func child(ifname string) int {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	r, err := Open(ifname, ifi.Index, ifi.HardwareAddr, TCX, nil)
	if err != nil {
		fmt.Printf("%v (unavailable: %v)\n", err, errors.Is(err, ErrUnavailable))
		return 1
	}
	if err := r.Hold(labVIP4); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("attached")
	select {}
}

func labCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openOn opens a responder of hook on h's eth0, in h's namespace.
func openOn(t *testing.T, h *lab.Host, hook Hook) *Responder {
	t.Helper()
	eth0 := labtest.Link(h, "eth0")
	var r *Responder
	if err := labtest.Do(h, func() (err error) {
		r, err = Open("eth0", eth0.Index, eth0.MAC, hook, nil)
		return err
	}); err != nil {
		t.Fatalf("open on %s: %v", h.Name, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// vipPrograms lists the vip programs on h's eth0.
func vipPrograms(t *testing.T, h *lab.Host) []attachedProg {
	t.Helper()
	var progs []attachedProg
	if err := labtest.Do(h, func() (err error) {
		progs, err = attached(labtest.Link(h, "eth0").Index)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return progs
}

var arpReply = regexp.MustCompile(`(?i)reply from \S+ \[([0-9a-f:]+)\]|Unicast reply from \S+ \[([0-9a-f:]+)\]`)

func arping(t *testing.T, h *lab.Host, args ...string) (replies []string, code int, out string) {
	t.Helper()
	cmd := h.Command(labCtx(t), "arping", args...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		ee, ok := err.(interface{ ExitCode() int })
		if !ok {
			t.Fatalf("arping %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	for _, m := range arpReply.FindAllStringSubmatch(string(b), -1) {
		replies = append(replies, strings.ToLower(m[1]+m[2]))
	}
	return replies, code, string(b)
}

// TestLabAnswers: on a lab veth whose kernel owns neither address, the
// program alone answers arping (requests and RFC 5227 probes) and ndisc6,
// once per request, defends the IPv6 address against the kernel's DAD,
// and counts the traffic that arrives for the address. On tcx a capture on
// the interface still sees the requests and the answers; on XDP it sees
// neither.
func TestLabAnswers(t *testing.T) {
	labtest.RequireTool(t, "arping")
	labtest.RequireTool(t, "ndisc6")
	labtest.RequireTool(t, "ping")
	for _, hook := range []Hook{TCX, XDPGeneric} {
		t.Run(hook.String(), func(t *testing.T) {
			t.Parallel()
			l := labtest.New(t,
				lab.HostConfig{Name: "b"},
				lab.HostConfig{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24"), IPv6: netip.MustParsePrefix("2001:db8::3/64")},
			)
			b, client := l.Host("b"), l.Host("client")
			bMAC := labtest.Link(b, "eth0").MAC.String()
			r := openOn(t, b, hook)
			if err := r.Hold(labVIP4, labVIP6); err != nil {
				t.Fatal(err)
			}
			capture := labtest.Capture(t, b, "eth0", "arp or icmp6")

			got, code, out := arping(t, client, "-c", "3", "-w", "5", "-I", "eth0", labVIP4.String())
			if code != 0 || len(got) != 3 {
				t.Fatalf("arping %s: got exit %d and %d replies, want 3 (one per request):\n%s", labVIP4, code, len(got), out)
			}
			for _, m := range got {
				if m != bMAC {
					t.Errorf("arping %s: got a reply from %s, want b's %s", labVIP4, m, bMAC)
				}
			}
			got, code, out = arping(t, client, "-D", "-c", "2", "-w", "3", "-I", "eth0", labVIP4.String())
			if code != 1 || len(got) == 0 || got[0] != bMAC {
				t.Errorf("arping -D %s: got exit %d, replies %v; want exit 1 (in use) with b's %s:\n%s", labVIP4, code, got, bMAC, out)
			}
			if _, code, out := arping(t, client, "-c", "2", "-w", "3", "-I", "eth0", "192.0.2.11"); code == 0 {
				t.Errorf("arping 192.0.2.11 (not held): got exit 0, want no answer:\n%s", out)
			}
			// arping -D stops at the first reply: 3 + 1 answers.
			if n := r.Answered(labVIP4); n != 4 {
				t.Errorf("answered for %s: got %d, want 4", labVIP4, n)
			}

			ctx := labCtx(t)
			out, err := client.Run(ctx, "ndisc6", "-n", "-r", "3", "-w", "1000", labVIP6.String(), "eth0")
			if err != nil || !strings.Contains(strings.ToLower(out), bMAC) {
				t.Fatalf("ndisc6 %s: got %q, %v; want b's %s", labVIP6, out, err, bMAC)
			}
			if out, err := client.Run(ctx, "ndisc6", "-n", "-r", "2", "-w", "500", "2001:db8::11", "eth0"); err == nil {
				t.Errorf("ndisc6 2001:db8::11 (not held): got an answer:\n%s", out)
			}
			mustRun(t, client, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=1", "net.ipv6.conf.eth0.dad_transmits=1")
			mustRun(t, client, "ip", "-6", "addr", "add", labVIP6.String()+"/64", "dev", "eth0")
			labtest.Eventually(t, 10*time.Second, func() (bool, string) {
				out, _ := client.Run(ctx, "ip", "-6", "addr", "show", "dev", "eth0")
				return strings.Contains(out, "dadfailed"), "client's addresses: " + out
			})
			// ndisc6 stops at its first answer; DAD sent one probe.
			if n := r.Answered(labVIP6); n != 2 {
				t.Errorf("answered for %s: got %d, want 2 (ndisc6 and DAD)", labVIP6, n)
			}

			// b's kernel drops the pings (it has no such address); they
			// count as traffic all the same.
			client.Run(ctx, "ping", "-c", "3", "-i", "0.2", "-W", "1", labVIP4.String())
			if p, bytes := r.Traffic(labVIP4); p < 3 || bytes < 3*98 {
				t.Errorf("traffic to %s after 3 pings: got %d packets, %d bytes; want at least 3 and %d", labVIP4, p, bytes, 3*98)
			}

			var requests, replies int
			for _, pk := range capture.Packets(t) {
				a, ok := pk.Layer(layers.LayerTypeARP).(*layers.ARP)
				if !ok || netip.AddrFrom4([4]byte(a.DstProtAddress)) != labVIP4 && netip.AddrFrom4([4]byte(a.SourceProtAddress)) != labVIP4 {
					continue
				}
				switch a.Operation {
				case layers.ARPRequest:
					requests++
				case layers.ARPReply:
					replies++
				}
			}
			// The pings' own neighbour resolution was answered too.
			answered := int(r.Answered(labVIP4))
			if hook == TCX && (requests != answered || replies != answered) {
				t.Errorf("capture on b's eth0 (tcx): got %d requests and %d replies for %s, want %d of each (every request and every answer)", requests, replies, labVIP4, answered)
			}
			if hook != TCX && (requests != 0 || replies != 0) {
				t.Errorf("capture on b's eth0 (XDP): got %d requests and %d replies for %s, want none (XDP runs before the taps)", requests, replies, labVIP4)
			}
		})
	}
}

func mustRun(t *testing.T, h *lab.Host, name string, args ...string) string {
	t.Helper()
	out, err := h.Run(labCtx(t), name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLabCloseLeavesNothing: after Close no vip program is on the
// interface, on either hook; Cleanup removes one a vip left there.
func TestLabCloseLeavesNothing(t *testing.T) {
	l := labtest.New(t, lab.HostConfig{Name: "b"})
	b := l.Host("b")
	for _, hook := range []Hook{TCX, XDPGeneric} {
		r := openOn(t, b, hook)
		if progs := vipPrograms(t, b); len(progs) != 1 {
			t.Fatalf("%s: got %d vip programs on eth0 while open, want 1: %+v", hook, len(progs), progs)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("%s: close: %v", hook, err)
		}
		if progs := vipPrograms(t, b); len(progs) != 0 {
			t.Errorf("%s: got vip programs on eth0 after Close: %+v", hook, progs)
		}
		if out := mustRun(t, b, "ip", "link", "show", "dev", "eth0"); strings.Contains(out, "xdp") {
			t.Errorf("%s: ip link shows an XDP program after Close:\n%s", hook, out)
		}
	}
	// A responder not closed (a vip still running, or one whose link
	// outlives it) is what Cleanup is for.
	openOn(t, b, TCX)
	if err := labtest.Do(b, func() error { return Cleanup("eth0") }); err != nil {
		t.Fatal(err)
	}
	if progs := vipPrograms(t, b); len(progs) != 0 {
		t.Errorf("got vip programs on eth0 after Cleanup: %+v", progs)
	}
}

// TestLabKilled: a vip killed with SIGKILL leaves nothing attached (the
// kernel detaches a link when its last descriptor closes), and a second
// Open on the interface while another's program is still there replaces
// it: exactly one vip program answers.
func TestLabKilled(t *testing.T) {
	l := labtest.New(t, lab.HostConfig{Name: "b"})
	b := l.Host("b")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := labtest.Start(t, b, "env", childEnv+"=eth0", self)
	p.WaitOutput(t, "attached", 10*time.Second)
	if progs := vipPrograms(t, b); len(progs) != 1 {
		t.Fatalf("got %d vip programs with the child running, want 1: %+v", len(progs), progs)
	}
	first := openOn(t, b, TCX) // replaces the live child's
	if progs := vipPrograms(t, b); len(progs) != 1 {
		t.Fatalf("got %d vip programs after a second Open, want 1: %+v", len(progs), progs)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait(t, 10*time.Second)
	if progs := vipPrograms(t, b); len(progs) != 1 {
		t.Errorf("got %d vip programs after the child was killed, want ours alone: %+v", len(progs), progs)
	}
	first.Close()

	// Killed while it is the one attached: the kernel removes it.
	p = labtest.Start(t, b, "env", childEnv+"=eth0", self)
	p.WaitOutput(t, "attached", 10*time.Second)
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait(t, 10*time.Second)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		progs := vipPrograms(t, b)
		return len(progs) == 0, fmt.Sprintf("vip programs after SIGKILL: %+v", progs)
	})
	openOn(t, b, TCX)
	if progs := vipPrograms(t, b); len(progs) != 1 {
		t.Errorf("got %d vip programs after Open, want 1: %+v", len(progs), progs)
	}
}
