package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
	"github.com/vipctl/vip/tools/loadgen"
)

// TestFleetRestartIsQuick restarts the owner's agent as systemctl restart
// does (SIGTERM, then a start at once) while the client asks for every
// address 50 times a second: the old agent, which keeps its claims
// (--on-stop keep, the default), is gone within 200 ms of the signal, the
// addresses go unanswered for at most a second on the client's wire
// (from the old agent's last answer to the new one's first; 230-300 ms on
// a quiet machine, 770 ms in a CI run beside the parallel lab tests, where
// attaching the program to four interfaces took 460 ms), and the
// standby never answers. With claims on one interface and on four: the
// close of each packet socket and of each program's link waits for an RCU
// grace period of the kernel's, five an interface, and closed one after
// another they took the stop of an agent on four interfaces to 229-285 ms
// (batchio.CloseAll). Race-built, vip gets four times as long (slow).
func TestFleetRestartIsQuick(t *testing.T) {
	// Not in parallel: it measures a restart's gap, which the other
	// labs' load on CI's two cores stretched past its bound.
	skipRaced(t)
	labtest.RequireTool(t, "etcd")
	t.Run("one interface", func(t *testing.T) { restartQuickly(t, 1) })
	t.Run("four interfaces", func(t *testing.T) { restartQuickly(t, 4) })
}

// restartQuickly is TestFleetRestartIsQuick with a's claims on its first
// links interfaces: an IPv4 and an IPv6 address on each.
func restartQuickly(t *testing.T, links int) {
	l := labtest.New(t,
		lab.HostConfig{Name: "store", IPv4: pfx("192.0.2.1/24")},
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.11/24"), IPv6: pfx("2001:db8::11/64"), Links: links},
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.12/24"), IPv6: pfx("2001:db8::12/64")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.13/24"), IPv6: pfx("2001:db8::13/64")},
	)
	a, b, client := l.Host("a"), l.Host("b"), l.Host("client")
	etcd := etcdlab.StartEtcd(t, l.Host("store"))
	storeURL := "etcd://" + strings.TrimPrefix(etcd.Endpoint(), "http://")
	dir := sockDir(t)
	sa, sb := filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")
	args := func(node string) []string {
		return []string{"--store", storeURL, "--node", node, "--lease-ttl", fleetTTL, "--log-format", "json", "--log-level", "debug"}
	}
	agentA := startAgent(t, a, sa, args("a")...)
	agentB := startAgent(t, b, sb, args("b")...)

	// macA is the MAC a answers each address from: its interface's.
	var vips []netip.Addr
	macA := map[netip.Addr]string{}
	for i := range links {
		ifname := fmt.Sprintf("eth%d", i)
		v4, v6 := netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + 10*i)}), netip.MustParseAddr(fmt.Sprintf("2001:db8::%d", 10+10*i))
		mustVip(t, a, sa, "claim", v4.String(), v6.String(), "-i", ifname)
		mustVip(t, b, sb, "claim", v4.String(), v6.String(), "--standby")
		vips = append(vips, v4, v6)
		macA[v4], macA[v6] = mac(a, ifname), mac(a, ifname)
	}
	macB := mac(b, "eth0")

	capture := labtest.CaptureBuffered(t, client, "eth0", 16<<10, "arp or icmp6")
	stopProbes := probeFast(t, client, vips)
	// Answered before the restart, so that the gap begins at a's last
	// answer and not at the probes' start.
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		pkts := capture.Snapshot(t)
		for _, v := range vips {
			if len(answersFor(pkts, v)) < 5 {
				return false, "the client hears too few answers for " + v.String() + " before the restart"
			}
		}
		return true, ""
	})

	termed := time.Now()
	if code := agentA.Stop(t); code != 0 {
		t.Fatalf("a's agent after SIGTERM: exit %d:\n%s", code, agentA.Output())
	}
	gone := time.Since(termed)
	logPhases(t, "the old agent after SIGTERM", termed, agentA.Output(),
		"stopping", "agent stopping: keeping its guarded claims for a restart", "stopped", keptMsg)
	t.Logf("the old agent was gone %v after SIGTERM", gone.Round(time.Millisecond))
	if _, ok := findLog(logLines(t, agentA.Output()), keptMsg, ""); !ok {
		t.Errorf("a's agent does not say it kept its claims:\n%s", agentA.Output())
	}
	if gone > slow(200*time.Millisecond) {
		t.Errorf("the old agent was gone %v after SIGTERM, want within %v", gone, slow(200*time.Millisecond))
	}

	// Started as systemd starts it: the socket is not polled meanwhile, so
	// that only the agent runs between its start and its first answer.
	started := time.Now()
	// The flags startAgent gave the first (the failsafe off, as b's).
	agentA = labtest.Start(t, a, vipBin, append([]string{"agent", "--socket", sa, "--failsafe=false"}, args("a")...)...)
	first := map[netip.Addr]time.Time{}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		pkts := capture.Snapshot(t)
		for _, v := range vips {
			for _, ans := range answersFor(pkts, v) {
				if ans.mac == macA[v] && ans.at.After(started) {
					first[v] = ans.at
					break
				}
			}
			if first[v].IsZero() {
				return false, "nothing from a for " + v.String() + " on the client's wire since the new agent started"
			}
		}
		return true, ""
	})
	logPhases(t, "the new agent after its start", started, agentA.Output(),
		"joined", "joined the fleet", "re-adopting", "re-adopting the claims of an earlier agent", "listening", "agent listening")
	// The new agent goes on answering the probes (and b stays silent
	// meanwhile): ten answers for each address after its first.
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		pkts := capture.Snapshot(t)
		for _, v := range vips {
			n := 0
			for _, ans := range answersFor(pkts, v) {
				if ans.mac == macA[v] && ans.at.After(first[v]) {
					n++
				}
			}
			if n < 10 {
				return false, fmt.Sprintf("a answered %s %d times since its first answer after the restart, want 10", v, n)
			}
		}
		return true, ""
	})
	stopProbes()
	pkts := capture.Packets(t)

	for _, v := range vips {
		var last, after time.Time
		for _, ans := range answersFor(pkts, v) {
			switch {
			case ans.mac == macB:
				t.Errorf("the standby b answered for %s at %s, during its owner's restart", v, ans.at.Format("15:04:05.000"))
			case ans.mac != macA[v]:
				t.Errorf("%s answered by %s, neither a nor b", v, ans.mac)
			case ans.at.Before(started):
				last = ans.at
			case ans.at.After(first[v]):
				after = ans.at
			}
		}
		if last.IsZero() || after.IsZero() {
			t.Fatalf("%s: a's last answer before the restart %v, its last after %v: want both", v, last, after)
		}
		gap := first[v].Sub(last)
		t.Logf("%s: the old agent's last answer %v before SIGTERM, the new one's first %v after its start: unanswered for %v",
			v, termed.Sub(last).Round(time.Millisecond), first[v].Sub(started).Round(time.Millisecond), gap.Round(time.Millisecond))
		if gap > slow(time.Second) {
			t.Errorf("%s went unanswered for %v across the restart, want at most %v", v, gap, slow(time.Second))
		}
	}
	for _, v := range vips {
		if _, took := findLog(logLines(t, agentB.Output()), "standby took over", v.String()); took {
			t.Errorf("b took over %s during a's restart:\n%s", v, agentB.Output())
		}
	}
}

// keptMsg is what an agent that kept its guarded claims logs last.
const keptMsg = "agent stopped, keeping its guarded claims for a restart: started again within the lease's TTL it answers again with no standby taking over; after it, standbys take them (vip agent --on-stop hand-over gives them to the standbys at once)"

// logPhases logs when the agent logged each message of labelMsgs (label,
// message, label, message...), from since: where the time of a stop or a
// start goes.
func logPhases(t *testing.T, what string, since time.Time, out string, labelMsgs ...string) {
	t.Helper()
	lines := logLines(t, out)
	var b strings.Builder
	for i := 0; i+1 < len(labelMsgs); i += 2 {
		if l, ok := findLog(lines, labelMsgs[i+1], ""); ok {
			fmt.Fprintf(&b, ", %s at %v", labelMsgs[i], l.Time.Sub(since).Round(100*time.Microsecond))
		}
	}
	t.Logf("%s%s", what, b.String())
}

// probeFast asks the client's segment who has each of vips, 50 times a
// second each (loadgen), until the returned stop is called. The requests
// come from an address no host has, so that no kernel on the segment
// learns a neighbour entry for the client from them.
func probeFast(t *testing.T, client *lab.Host, vips []netip.Addr) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make([]error, len(vips))
	for i, v := range vips {
		sender := netip.MustParseAddr("192.0.2.213")
		if v.Is6() {
			sender = netip.MustParseAddr("2001:db8::213")
		}
		wg.Go(func() {
			_, err := loadgen.Run(ctx, loadgen.Config{
				Netns: "/run/netns/" + client.Netns, Interface: "eth0", Target: v, Sender: sender,
				Rate: 50, Count: 50 * 600, Run: uint8(i + 1), Sources: 4,
			})
			if !errors.Is(err, context.Canceled) {
				errs[i] = err
			}
		})
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("probe %s: %v", vips[i], err)
				}
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
