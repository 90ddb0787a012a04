package sniff_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/packet"
	"github.com/vipctl/vip/test/wiretest"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/sniff"
	"github.com/vipctl/vip/test/labtest"
)

// openIn opens a capture on iface inside lab host h's network namespace.
//
// A packet socket belongs to the namespace it was made in, whichever thread
// reads it later, so only the open has to happen inside. It runs on a
// goroutine locked to its OS thread, which enters h's namespace and never
// leaves it: the goroutine ends still locked, and the Go runtime then ends
// the thread rather than hand it to another goroutine. Nothing else in the
// test process ever runs in the lab's namespace by accident, and the capture
// itself is the real Open, observed in-process.
func openIn(t *testing.T, h *lab.Host, iface string, opts sniff.Options) *sniff.Capture {
	t.Helper()
	var c *sniff.Capture
	err := labtest.Do(h, func() error {
		var err error
		c, err = sniff.Open(iface, opts)
		return err
	})
	if err != nil {
		t.Fatalf("capture on %s of %s: %v", iface, h.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// runCapture runs c with the observers until the test ends.
func runCapture(t *testing.T, c *sniff.Capture, obs ...sniff.Observer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, obs...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("capture: %v", err)
		}
	})
}

// runPeer runs a peer program on h to its end and fails the test unless it
// exits with status want (arping exits 1 and ndisc6 2 when nobody answers).
func runPeer(t *testing.T, h *lab.Host, want int, name string, args ...string) {
	t.Helper()
	labtest.RequireTool(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	code := 0
	if err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%s %v on %s: %v\n%s", name, args, h.Name, err, out)
		}
		code = exit.ExitCode()
	}
	if code != want {
		t.Fatalf("%s %v on %s: got exit status %d, want %d:\n%s", name, args, h.Name, code, want, out)
	}
}

// TestLabCapture runs a capture on a lab host and checks what it makes of
// real peers' traffic: iputils arping's requests counted one for one, a
// gratuitous ARP for a held address from another host reported as a
// conflict within a second, and ndisc6's solicitation decoded.
func TestLabCapture(t *testing.T) {
	l := labtest.New(t,
		lab.HostConfig{Name: "mon", IPv4: netip.MustParsePrefix("192.0.2.1/24"), IPv6: netip.MustParsePrefix("2001:db8::1/64")},
		lab.HostConfig{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24"), IPv6: netip.MustParsePrefix("2001:db8::3/64")},
		lab.HostConfig{Name: "rogue", IPv4: netip.MustParsePrefix("192.0.2.4/24")},
	)
	mon, client, rogue := l.Host("mon"), l.Host("client"), l.Host("rogue")
	monMAC, _ := wire.MACFrom(mon.Links[0].MAC)
	clientMAC, _ := wire.MACFrom(client.Links[0].MAC)
	rogueMAC, _ := wire.MACFrom(rogue.Links[0].MAC)

	table, err := sniff.NewTable(sniff.TableConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// reported is a conflict and when the detector reported it.
	type reported struct {
		sniff.Conflict
		at time.Time
	}
	conflicts := make(chan reported, 16)
	det, err := sniff.NewDetector(sniff.DetectorConfig{OnEvent: func(ev sniff.Event) {
		if c, ok := ev.(sniff.Conflict); ok {
			select {
			case conflicts <- reported{c, time.Now()}:
			default:
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	held := netip.MustParseAddr("192.0.2.10")
	if err := det.Hold(held, mon.Links[0].MAC); err != nil {
		t.Fatal(err)
	}
	var seen collect
	capture := openIn(t, mon, "eth0", sniff.Options{Promiscuous: true})
	runCapture(t, capture, table, det, &seen)

	t.Run("arping requests counted", func(t *testing.T) {
		target := netip.MustParseAddr("192.0.2.20") // nobody has it
		runPeer(t, client, 1, "arping", "-c", "5", "-I", "eth0", target.String())
		labtest.Eventually(t, time.Second, func() (bool, string) {
			e, _ := table.Get(target)
			return e.Requests == 5, fmt.Sprintf("%d requests for %s", e.Requests, target)
		})
		// Nothing more comes: each request was counted once.
		time.Sleep(300 * time.Millisecond)
		e, _ := table.Get(target)
		wantAsker := sniff.Asker{MAC: clientMAC, Addr: netip.MustParseAddr("192.0.2.3")}
		if e.Requests != 5 || e.LastAsker != wantAsker || len(e.Askers) != 1 || e.Askers[0].Requests != 5 || len(e.Answerers) != 0 {
			t.Errorf("entry for %s: got %+v, want 5 requests, all from %v, no answer", target, e, wantAsker)
		}
		if e.Rate <= 0 {
			t.Errorf("rate for %s: got %v, want above 0", target, e.Rate)
		}
	})

	t.Run("rogue announcement is a conflict", func(t *testing.T) {
		// A stale owner: it still has the address, and announces it
		// (arping -U sends from the address, so it must be assigned).
		runPeer(t, rogue, 0, "ip", "addr", "add", held.String()+"/32", "dev", "eth0")
		runPeer(t, rogue, 0, "arping", "-U", "-c", "2", "-I", "eth0", held.String())
		select {
		case c := <-conflicts:
			if c.Addr != held || c.MAC != rogueMAC || c.Kind != sniff.KindAnnouncement || c.Count != 1 {
				t.Errorf("conflict: got %+v, want %s claimed by the rogue's %s with one announcement", c.Conflict, held, rogueMAC)
			}
			// First is the kernel's capture time of the rogue's frame.
			d := c.at.Sub(c.First)
			if d > time.Second {
				t.Errorf("conflict reported %v after the frame was captured, want within 1s", d)
			}
			t.Logf("conflict reported %v after the frame was captured", d)
		case <-time.After(2 * time.Second):
			t.Fatalf("no conflict reported for %s; conflicts %+v", held, det.Conflicts())
		}
		labtest.Eventually(t, 2*time.Second, func() (bool, string) {
			cs := det.Conflicts()
			return len(cs) == 1 && cs[0].Count == 2, fmt.Sprintf("conflicts %+v, want the rogue's two frames", cs)
		})

		// Our own announcement of the address is no conflict: the capture
		// does not even see what this host sends.
		runPeer(t, mon, 0, "ip", "addr", "add", held.String()+"/32", "dev", "eth0")
		runPeer(t, mon, 0, "arping", "-U", "-c", "1", "-I", "eth0", held.String())
		// A frame that arrives after it proves the capture has read past it.
		runPeer(t, rogue, 0, "arping", "-U", "-c", "1", "-I", "eth0", held.String())
		labtest.Eventually(t, 2*time.Second, func() (bool, string) {
			cs := det.Conflicts()
			return len(cs) == 1 && cs[0].Count == 3, fmt.Sprintf("conflicts %+v, want the rogue's three frames", cs)
		})
		if cs := det.Conflicts(); len(cs) != 1 || cs[0].MAC != rogueMAC {
			t.Errorf("after our own announcement: got conflicts %+v, want only the rogue's", cs)
		}
		if e, _ := table.Get(held); slices.ContainsFunc(e.Answerers, func(a sniff.Answerer) bool { return a.MAC == monMAC }) {
			t.Errorf("our own announcement was captured: answerers %+v", e.Answerers)
		}
	})

	t.Run("ndisc6 solicitations decoded", func(t *testing.T) {
		nobody := netip.MustParseAddr("2001:db8::30")
		runPeer(t, client, 2, "ndisc6", "-1", "-r", "1", "-w", "300", nobody.String(), "eth0")
		// mon asks the client, whose kernel answers with an advertisement
		// that arrives at mon.
		clientAddr := netip.MustParseAddr("2001:db8::3")
		runPeer(t, mon, 0, "ndisc6", "-1", "-r", "1", "-w", "1000", clientAddr.String(), "eth0")
		labtest.Eventually(t, 2*time.Second, func() (bool, string) {
			seen.mu.Lock()
			defer seen.mu.Unlock()
			var ns, na bool
			for _, o := range seen.obs {
				if o.Kind == sniff.KindSolicitation && o.Target == nobody && o.SenderMAC == clientMAC && o.LinkLayerOption {
					ns = true
				}
				if o.Kind == sniff.KindAdvertisement && o.Target == clientAddr && o.TargetMAC == clientMAC && o.Solicited {
					na = true
				}
			}
			return ns && na, fmt.Sprintf("solicitation for %s seen %v, solicited advertisement of %s seen %v", nobody, ns, clientAddr, na)
		})
		e, _ := table.Get(nobody)
		if e.Requests != 1 || e.LastAsker.MAC != clientMAC {
			t.Errorf("entry for %s: got %+v, want 1 request from %s", nobody, e, clientMAC)
		}
	})

	// Only neighbour traffic passed the kernel filter (the MLD reports of
	// the lab's start did not), all of it decoded, none dropped.
	st := capture.Stats()
	if st.Received == 0 || st.Ignored != 0 || st.Undecodable != 0 || st.Dropped != 0 {
		t.Errorf("capture stats: got %+v, want frames received and none ignored, undecodable or dropped", st)
	}
}

// TestLabCloseWhileRunning closes a live capture under its Run, as an
// agent does when a claim ends: Run returns at once with nil, and nothing
// reads the closed socket.
func TestLabCloseWhileRunning(t *testing.T) {
	l := labtest.New(t, lab.HostConfig{Name: "mon", IPv4: netip.MustParsePrefix("192.0.2.1/24")})
	c := openIn(t, l.Host("mon"), "eth0", sniff.Options{})
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after Close: got %v, want nil", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run still running 2s after Close")
	}
	t.Logf("Run returned %v after Close", time.Since(start))
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_ = c.Stats()
}

// TestLabCaptureNarrow narrows a live capture to held addresses: requests
// from a real arping and ndisc6 for other addresses never reach the process
// (the kernel drops them: they are not even received), an IPv6 address that
// only shares the held one's last 32 bits gets through the kernel and is
// left out by Run, and requests for the held addresses are all seen.
func TestLabCaptureNarrow(t *testing.T) {
	l := labtest.New(t,
		lab.HostConfig{Name: "mon", IPv4: netip.MustParsePrefix("192.0.2.1/24"), IPv6: netip.MustParsePrefix("2001:db8::1/64")},
		lab.HostConfig{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24"), IPv6: netip.MustParsePrefix("2001:db8::3/64")},
	)
	mon, client := l.Host("mon"), l.Host("client")
	capture := openIn(t, mon, "eth0", sniff.Options{Promiscuous: true})
	if err := capture.Narrow([]netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")}); err != nil {
		t.Fatalf("Narrow: %v", err)
	}
	var seen collect
	runCapture(t, capture, &seen)

	runPeer(t, client, 1, "arping", "-c", "3", "-w", "2", "-I", "eth0", "192.0.2.20")
	runPeer(t, client, 2, "ndisc6", "-1", "-r", "2", "-w", "100", "2001:db8::30", "eth0")
	runPeer(t, client, 2, "ndisc6", "-1", "-r", "1", "-w", "100", "2001:db8:1::10", "eth0")
	runPeer(t, client, 1, "arping", "-c", "2", "-w", "2", "-I", "eth0", "192.0.2.10")
	runPeer(t, client, 2, "ndisc6", "-1", "-r", "1", "-w", "100", "2001:db8::10", "eth0")
	// Frames arrive in order: once the last requests are seen, anything
	// the kernel let through before them has been read too.
	labtest.Eventually(t, 2*time.Second, func() (bool, string) {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return len(seen.obs) == 3, fmt.Sprintf("observed %d frames, want 3 (two who-has and a solicitation for the held addresses)", len(seen.obs))
	})
	seen.mu.Lock()
	for _, o := range seen.obs {
		if o.Target != netip.MustParseAddr("192.0.2.10") && o.Target != netip.MustParseAddr("2001:db8::10") {
			t.Errorf("observed a frame about %s, outside the scope", o.Target)
		}
	}
	seen.mu.Unlock()
	if st := capture.Stats(); st.Received != 4 || st.OutOfScope != 1 {
		t.Errorf("capture stats %+v: want 4 frames received (3 held, 1 sharing a held address's last word) and 1 left out by Run; the 5 others must not leave the kernel", st)
	}

	// Widened again, the capture sees requests for any address.
	if err := capture.Widen(); err != nil {
		t.Fatal(err)
	}
	runPeer(t, client, 1, "arping", "-c", "1", "-w", "1", "-I", "eth0", "192.0.2.20")
	labtest.Eventually(t, 2*time.Second, func() (bool, string) {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return len(seen.obs) == 4, fmt.Sprintf("observed %d frames after Widen, want 4", len(seen.obs))
	})
}

// TestLabCancelWhileIdle: a live capture waits for frames without a
// deadline, yet Run still returns at once when its context is done, and a
// second Run on the same capture reads again.
func TestLabCancelWhileIdle(t *testing.T) {
	l := labtest.New(t,
		lab.HostConfig{Name: "mon", IPv4: netip.MustParsePrefix("192.0.2.1/24")},
		lab.HostConfig{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24")},
	)
	mon, client := l.Host("mon"), l.Host("client")
	c := openIn(t, mon, "eth0", sniff.Options{})
	for round := 1; round <= 2; round++ {
		var seen collect
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx, &seen) }()
		runPeer(t, client, 1, "arping", "-c", "1", "-w", "1", "-I", "eth0", "192.0.2.20")
		labtest.Eventually(t, 2*time.Second, func() (bool, string) {
			return len(seen.kinds()) == 1, fmt.Sprintf("run %d: observed %v, want arping's request", round, seen.kinds())
		})
		time.Sleep(200 * time.Millisecond) // idle: the reader waits in the poller
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d: Run after cancel: %v", round, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("run %d: Run still running 2s after its context was cancelled", round)
		}
		t.Logf("run %d: Run returned %v after cancel", round, time.Since(start))
	}
}

// TestLabCaptureVLANParent captures on the parent of a VLAN: the kernel has
// taken the tag off before the filter and the socket see the frame, and
// the capture puts it back, so that a who-has on VLAN 7 is observed as
// VLAN 7's (the detector leaves such frames to their own segment) and an
// untagged one as untagged.
func TestLabCaptureVLANParent(t *testing.T) {
	l := labtest.New(t,
		lab.HostConfig{Name: "mon", IPv4: netip.MustParsePrefix("192.0.2.1/24")},
		lab.HostConfig{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24")},
	)
	mon, client := l.Host("mon"), l.Host("client")
	for _, args := range [][]string{
		{"link", "add", "link", "eth0", "name", "eth0.7", "type", "vlan", "id", "7"},
		{"addr", "add", "198.51.100.3/24", "dev", "eth0.7"},
		{"link", "set", "eth0.7", "up"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := client.Command(ctx, "ip", args...).CombinedOutput()
		cancel()
		if err != nil && strings.Contains(string(out), "Unknown device type") {
			// Skipped even under CI: a kernel without VLAN support is
			// not something CI can install, and nothing here can load
			// the module (the tag's re-insertion is unit-tested in
			// TestPacketSourceFrame all the same).
			t.Skip("needs VLAN interfaces, which this kernel lacks (no 8021q module)")
		}
		if err != nil {
			t.Fatalf("ip %v on %s: %v\n%s", args, client.Name, err, out)
		}
	}
	c := openIn(t, mon, "eth0", sniff.Options{Promiscuous: true})
	var seen collect
	runCapture(t, c, &seen)
	runPeer(t, client, 1, "arping", "-c", "1", "-w", "1", "-I", "eth0.7", "198.51.100.20")
	runPeer(t, client, 1, "arping", "-c", "1", "-w", "1", "-I", "eth0", "192.0.2.20")
	labtest.Eventually(t, 2*time.Second, func() (bool, string) {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return len(seen.obs) == 2, fmt.Sprintf("observed %d frames, want the two who-has", len(seen.obs))
	})
	seen.mu.Lock()
	defer seen.mu.Unlock()
	want := []struct {
		target string
		vlan   uint16
	}{{"198.51.100.20", 7}, {"192.0.2.20", 0}}
	for i, w := range want {
		if o := seen.obs[i]; o.Kind != sniff.KindWhoHas || o.Target != netip.MustParseAddr(w.target) || o.VLAN != w.vlan {
			t.Errorf("frame %d: got %v for %s on VLAN %d, want a who-has for %s on VLAN %d", i, o.Kind, o.Target, o.VLAN, w.target, w.vlan)
		}
	}
}

// TestLabCaptureAfterIngress: a capture that reads after tc ingress
// (Options.AfterIngress, two sockets bound to ARP and IPv6) sees the ARP
// and NDP frames the host's stack receives, from a real arping and
// ndisc6, but not a frame a tc ingress filter consumes, which a tap of
// every frame (the default) still sees: an in-kernel responder that answers
// at tc ingress then costs the capture nothing. A four-instruction tcx
// program drops the ARP frames.
func TestLabCaptureAfterIngress(t *testing.T) {
	labtest.RequireRoot(t, "attaching a tcx program")
	l := labtest.New(t,
		lab.HostConfig{Name: "mon", IPv4: netip.MustParsePrefix("192.0.2.1/24"), IPv6: netip.MustParsePrefix("2001:db8::1/64")},
		lab.HostConfig{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24"), IPv6: netip.MustParsePrefix("2001:db8::3/64")},
	)
	mon, client := l.Host("mon"), l.Host("client")
	stack := openIn(t, mon, "eth0", sniff.Options{Promiscuous: true, AfterIngress: true})
	tap := openIn(t, mon, "eth0", sniff.Options{Promiscuous: true})
	var fromStack, fromTap collect
	runCapture(t, stack, &fromStack)
	runCapture(t, tap, &fromTap)

	runPeer(t, client, 1, "arping", "-c", "2", "-w", "2", "-I", "eth0", "192.0.2.20")
	runPeer(t, client, 2, "ndisc6", "-1", "-r", "1", "-w", "100", "2001:db8::30", "eth0")
	count := func(c *collect, arp bool) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		for _, o := range c.obs {
			if o.Kind.IsARP() == arp {
				n++
			}
		}
		return n
	}
	labtest.Eventually(t, 2*time.Second, func() (bool, string) {
		return count(&fromStack, true) == 2 && count(&fromStack, false) == 1,
			fmt.Sprintf("after ingress: %d ARP and %d NDP frames observed, want arping's 2 and ndisc6's solicitation", count(&fromStack, true), count(&fromStack, false))
	})

	dropARP(t, mon, "eth0")
	runPeer(t, client, 1, "arping", "-c", "3", "-w", "2", "-I", "eth0", "192.0.2.20")
	runPeer(t, client, 2, "ndisc6", "-1", "-r", "1", "-w", "100", "2001:db8::30", "eth0")
	labtest.Eventually(t, 2*time.Second, func() (bool, string) {
		return count(&fromTap, true) == 5 && count(&fromTap, false) == 2 && count(&fromStack, false) == 2,
			fmt.Sprintf("with ARP dropped at tc ingress: the tap observed %d ARP and %d NDP frames (want 5 and 2), after ingress %d NDP (want 2)",
				count(&fromTap, true), count(&fromTap, false), count(&fromStack, false))
	})
	if n := count(&fromStack, true); n != 2 {
		t.Errorf("after ingress: %d ARP frames observed, want still 2 (tc dropped the later ones before the stack)", n)
	}
	if st := stack.Stats(); st.Received != 4 {
		t.Errorf("after ingress: %d frames received, want the 4 the stack got", st.Received)
	}
}

// dropARP attaches to h's iface a tcx ingress program that drops every ARP
// frame and passes the others on, until the test ends.
func dropARP(t *testing.T, h *lab.Host, iface string) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, 16, asm.Word), // skb->protocol, big-endian
			asm.Mov.Imm(asm.R0, 0),                    // TCX_PASS
			asm.JNE.Imm(asm.R2, 0x0608, "out"),        // ETH_P_ARP as the bytes 08 06
			asm.Mov.Imm(asm.R0, 2),                    // TCX_DROP
			asm.Return().WithSymbol("out"),
		},
	})
	if err != nil {
		t.Fatalf("load the program that drops ARP: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	ifi := labtest.Link(h, iface)
	var l link.Link
	if err := labtest.Do(h, func() (err error) {
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: prog, Attach: ebpf.AttachTCXIngress})
		return err
	}); err != nil {
		t.Fatalf("attach the program that drops ARP to %s of %s: %v", iface, h.Name, err)
	}
	t.Cleanup(func() { l.Close() })
}

// TestLabCaptureAfterIngressOwnFramesOnly: the sockets of a capture after
// tc ingress also get what the kernel hands them on an upper interface's
// behalf, and frames for other hosts; it leaves both out (on a VLAN's
// parent both would be the VLAN's frames, their tag taken off). Three
// who-has come in on mon's eth0, which has a macvlan: one broadcast, which
// is eth0's; one sent to the macvlan's MAC, which the macvlan takes over;
// one sent to a MAC nobody has, which eth0, promiscuous, takes for another
// host's. The tap sees all three, the capture after ingress the first
// alone.
func TestLabCaptureAfterIngressOwnFramesOnly(t *testing.T) {
	l := labtest.New(t,
		lab.HostConfig{Name: "mon", IPv4: netip.MustParsePrefix("192.0.2.1/24")},
		lab.HostConfig{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24")},
	)
	mon, client := l.Host("mon"), l.Host("client")
	mv0 := labtest.Macvlan(t, mon, "eth0", "mv0")
	stack := openIn(t, mon, "eth0", sniff.Options{Promiscuous: true, AfterIngress: true})
	tap := openIn(t, mon, "eth0", sniff.Options{Promiscuous: true})
	var fromStack, fromTap collect
	runCapture(t, stack, &fromStack)
	runCapture(t, tap, &fromTap)

	clientMAC := labtest.Link(client, "eth0").MAC
	sends := []struct {
		to     net.HardwareAddr
		target string
	}{
		{net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "192.0.2.51"},
		{mv0, "192.0.2.52"},
		{net.HardwareAddr{0x02, 0x00, 0x5e, 0x00, 0x53, 0x99}, "192.0.2.53"},
	}
	if err := labtest.Do(client, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		c, err := packet.Listen(ifi, packet.Raw, 0x0806, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		for _, s := range sends {
			frame, err := wiretest.ARPFrame(s.to, clientMAC, arp.OperationRequest, clientMAC, netip.MustParseAddr("192.0.2.3"), make(net.HardwareAddr, 6), netip.MustParseAddr(s.target))
			if err != nil {
				return err
			}
			if _, err := c.WriteTo(frame, &packet.Addr{HardwareAddr: s.to}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("send the who-has from %s: %v", client.Name, err)
	}
	targets := func(c *collect) []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		var out []string
		for _, o := range c.obs {
			out = append(out, o.Target.String())
		}
		return out
	}
	labtest.Eventually(t, 3*time.Second, func() (bool, string) {
		got := targets(&fromTap)
		return len(got) == 3, fmt.Sprintf("the tap observed who-has for %v, want all three", got)
	})
	// The capture after ingress reads later than the tap: wait for the
	// broadcast there too (the frames to other MACs, sent after it, never
	// come), rather than read it the moment the tap has all three.
	labtest.Eventually(t, 3*time.Second, func() (bool, string) {
		got := targets(&fromStack)
		return len(got) > 0, "after ingress: no who-has observed, want the broadcast's (192.0.2.51)"
	})
	if got := targets(&fromStack); len(got) != 1 || got[0] != "192.0.2.51" {
		t.Errorf("after ingress: who-has for %v, want the broadcast's (192.0.2.51) alone", got)
	}
}
