package e2e_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// claimersOf returns the competing claimer MACs the agent on h reports for
// addr, and the claim's state.
func claimersOf(t *testing.T, h *lab.Host, sock, addr string) ([]string, string) {
	t.Helper()
	for _, c := range status(t, h, sock).Claims {
		if c.Addr == addr {
			var macs []string
			for _, cl := range c.Claimers {
				macs = append(macs, cl.MAC)
			}
			return macs, c.State
		}
	}
	return nil, "not held"
}

// TestSplitBrainIsSeenAndDefenceIsBounded: b claims an address a holds.
// Each reports the other as a competing claimer within a second, and with
// both defending, each sends at most one burst per defend interval.
func TestSplitBrainIsSeenAndDefenceIsBounded(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.1/24")},
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
		lab.HostConfig{Name: "watch"},
	)
	a, b, watch := l.Host("a"), l.Host("b"), l.Host("watch")
	dir := sockDir(t)
	sa, sb := filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")
	startAgent(t, a, sa)
	startAgent(t, b, sb)
	capture := labtest.Capture(t, watch, "eth0", "arp")
	burst := []string{"--window", "2s", "--interval", "500ms"} // 5 rounds a burst
	mustVip(t, a, sa, append([]string{"claim", "192.0.2.10"}, burst...)...)
	start := time.Now()
	mustVip(t, b, sb, append([]string{"claim", "192.0.2.10"}, burst...)...)
	for _, side := range []struct {
		h     *lab.Host
		sock  string
		rival *lab.Host
	}{{a, sa, b}, {b, sb, a}} {
		labtest.Eventually(t, slow(2*time.Second), func() (bool, string) {
			macs, state := claimersOf(t, side.h, side.sock, "192.0.2.10")
			want := mac(side.rival, "eth0")
			return state == "conflict" && len(macs) == 1 && macs[0] == want,
				fmt.Sprintf("%s reports claimers %v in state %s, want %s in state conflict", side.h.Name, macs, state, want)
		})
	}
	if took := time.Since(start); took > slow(2*time.Second) {
		t.Errorf("both sides saw the split brain %v after the second claim, want about a second", took)
	}
	if out, code := vipOn(t, a, sa, "status", "--check"); code != 3 || !strings.Contains(out, "competing claimer") {
		t.Errorf("status --check during the split brain: got exit %d, %q; want 3", code, out)
	} else if why := labtest.CheckLastLine(out); why != "" {
		t.Errorf("status --check during the split brain: its message %s:\n%s", why, out)
	}

	// Count each side's rounds over 12 s: one burst at the claim, then at
	// most one defence per 10 s; defending on every conflict would send a
	// round every interval (24).
	const span = 12 * time.Second
	time.Sleep(span - time.Since(start)) // the traffic over a fixed span is what is measured
	pk := capture.Packets(t)
	for _, h := range []*lab.Host{a, b} {
		// Each round is an announcement and a reply from the sender's MAC.
		n := 0
		for _, p := range pk {
			if gratuitousFor(p, vip4) && p.Metadata().Timestamp.Sub(start) <= span &&
				p.LinkLayer().LinkFlow().Src().String() == mac(h, "eth0") {
				n++
			}
		}
		rounds := n / 2
		if max := 5 * (1 + int(span/(10*time.Second)) + 1); rounds > max || rounds < 5 {
			t.Errorf("%s sent %d rounds in %v, want its claim's 5 and at most one more burst per 10 s (<= %d)", h.Name, rounds, span, max)
		}
	}
}

// TestRogueAnnouncementIsAConflict: arping -U from another host for our
// address shows up as a competing claimer, in status and in events.
func TestRogueAnnouncementIsAConflict(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
		lab.HostConfig{Name: "rogue", IPv4: pfx("192.0.2.66/24")},
	)
	b, rogue := l.Host("b"), l.Host("rogue")
	sock := filepath.Join(sockDir(t), "b.sock")
	startAgent(t, b, sock)
	mustVip(t, b, sock, "claim", "192.0.2.10", "--on-conflict", "warn")
	events := labtest.Start(t, b, vipBin, "events", "--json", "--socket", sock)
	// The stream is subscribed once it shows a refresh made after it started.
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		_, code := vipOn(t, b, sock, "refresh", "192.0.2.10")
		return code == 0 && strings.Contains(events.Output(), `"kind":"refresh"`), "waiting for the event stream"
	})
	// arping -U sends from the address, so the rogue has it too, as a stale
	// owner would.
	mustRun(t, rogue, "ip", "addr", "add", "192.0.2.10/32", "dev", "eth0")
	arping(t, rogue, "-U", "-c", "2", "-I", "eth0", "192.0.2.10")
	labtest.Eventually(t, 3*time.Second, func() (bool, string) {
		macs, state := claimersOf(t, b, sock, "192.0.2.10")
		return state == "conflict" && len(macs) > 0 && macs[0] == mac(rogue, "eth0"), fmt.Sprintf("claimers %v, state %s", macs, state)
	})
	labtest.Eventually(t, 3*time.Second, func() (bool, string) {
		for _, line := range strings.Split(events.Output(), "\n") {
			var ev api.Event
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == "conflict" && ev.MAC == mac(rogue, "eth0") {
				return true, ""
			}
		}
		return false, "no conflict event naming the rogue in:\n" + events.Output()
	})
}

// TestYieldStopsAnswering: a claims with --on-conflict yield; when b claims
// the address, a releases it and only b answers.
func TestYieldStopsAnswering(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.1/24")},
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
	)
	a, b, client := l.Host("a"), l.Host("b"), l.Host("client")
	dir := sockDir(t)
	sa, sb := filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")
	startAgent(t, a, sa)
	startAgent(t, b, sb)
	mustVip(t, a, sa, "claim", "192.0.2.10", "--on-conflict", "yield")
	mustVip(t, b, sb, "claim", "192.0.2.10")
	labtest.Eventually(t, 3*time.Second, func() (bool, string) {
		st := status(t, a, sa)
		return len(st.Claims) == 0, fmt.Sprintf("a still holds %+v", st.Claims)
	})
	out, code := arping(t, client, "-c", "3", "-w", "5", "-I", "eth0", "192.0.2.10")
	for _, m := range replyMACs(out) {
		if m != mac(b, "eth0") {
			t.Errorf("after a yielded: got a reply from %s, want only b's %s", m, mac(b, "eth0"))
		}
	}
	if code != 0 || len(replyMACs(out)) != 3 {
		t.Errorf("after a yielded: got exit %d and %d replies, want 3 from b:\n%s", code, len(replyMACs(out)), out)
	}
}

// TestProbe: vip probe finds whoever answers for an address: a vip agent,
// or a plain Linux host holding it as its own (IPv4 and IPv6), and a silent
// stale owner is found by a new claimer's probes too.
func TestProbe(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.1/24"), IPv6: pfx("2001:db8::1/64")},
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24"), IPv6: pfx("2001:db8::2/64")},
		lab.HostConfig{Name: "stale", IPv4: pfx("192.0.2.77/24"), IPv6: pfx("2001:db8::77/64")},
	)
	a, b, stale := l.Host("a"), l.Host("b"), l.Host("stale")
	sa := filepath.Join(sockDir(t), "a.sock")
	startAgent(t, a, sa)

	out, code := vipOn(t, b, sa, "probe", "192.0.2.10", "2001:db8::10")
	if code != 0 || strings.Count(out, "no answer") != 2 {
		t.Fatalf("probe of free addresses: got exit %d, %q; want 0 and no answer for both", code, out)
	}
	mustVip(t, a, sa, "claim", "192.0.2.10", "2001:db8::10")
	out, code = vipOn(t, b, sa, "probe", "192.0.2.10", "2001:db8::10", "--json")
	var res struct {
		Results []struct {
			Addr     string
			Claimers []api.Claimer
		}
	}
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &res); err != nil {
		t.Fatalf("probe --json: %v:\n%s", err, out)
	}
	if code != 3 || len(res.Results) != 2 {
		t.Fatalf("probe of a's addresses: got exit %d, %q; want 3", code, out)
	}
	for _, r := range res.Results {
		if len(r.Claimers) != 1 || r.Claimers[0].MAC != mac(a, "eth0") {
			t.Errorf("probe %s: got claimers %+v, want a's %s alone", r.Addr, r.Claimers, mac(a, "eth0"))
		}
	}
	// --expect checks the owner from the wire: a's MAC is the one
	// expected, b's is not, and the verdict names who did answer.
	out, code = vipOn(t, b, sa, "probe", "192.0.2.10", "2001:db8::10", "--expect", mac(a, "eth0"))
	if code != 0 || strings.Count(out, "as expected") != 2 {
		t.Errorf("probe --expect a's MAC: got exit %d, %q; want 0 and both as expected", code, out)
	}
	out, code = vipOn(t, b, sa, "probe", "192.0.2.10", "2001:db8::10", "--expect", mac(b, "eth0"))
	if code != 3 || strings.Count(out, "not by "+mac(b, "eth0")) != 2 || !strings.Contains(out, mac(a, "eth0")) {
		t.Errorf("probe --expect b's MAC: got exit %d, %q; want 3, naming a's MAC as the one that answered", code, out)
	} else if why := labtest.CheckLastLine(out); why != "" {
		t.Errorf("probe --expect b's MAC: its message %s:\n%s", why, out)
	}

	// A plain host that has the addresses as its own: its kernel answers.
	mustRun(t, stale, "ip", "addr", "add", "192.0.2.20/32", "dev", "eth0")
	mustRun(t, stale, "ip", "addr", "add", "2001:db8::20/128", "dev", "eth0", "nodad")
	out, code = vipOn(t, b, sa, "probe", "192.0.2.20", "2001:db8::20")
	if code != 3 || strings.Count(out, "answered by "+mac(stale, "eth0")) != 2 {
		t.Errorf("probe of the stale host's addresses: got exit %d, %q; want both answered by %s", code, out, mac(stale, "eth0"))
	}
	// The stale owner sends nothing by itself; b's claim probes and finds it.
	sb := filepath.Join(sockDir(t), "b.sock")
	startAgent(t, b, sb)
	mustVip(t, b, sb, "claim", "192.0.2.20", "2001:db8::20", "--on-conflict", "warn")
	for _, addr := range []string{"192.0.2.20", "2001:db8::20"} {
		labtest.Eventually(t, 3*time.Second, func() (bool, string) {
			macs, state := claimersOf(t, b, sb, addr)
			return state == "conflict" && len(macs) == 1 && macs[0] == mac(stale, "eth0"), fmt.Sprintf("%s: claimers %v, state %s", addr, macs, state)
		})
	}
}

// TestTrafficCountsWhoHas: N requests from arping -c N are counted as N,
// with the asker, in the agent's who-has table, whatever answers them. By
// default the agent's capture is narrowed to the held addresses: requests
// for another address never reach the agent (its capture does not even
// receive them); with --watch-all they are counted too. Where the
// in-kernel responder answers, the capture reads after tc ingress and
// receives not even the requests for the held address, which the program
// answered there: the table counts them from the askers the program
// remembers, once each, on tcx as on XDP, with --watch-all too.
func TestTrafficCountsWhoHas(t *testing.T) {
	t.Parallel()
	responders := []struct {
		name string
		args []string
		ebpf bool
	}{
		{"socket", []string{"--responder", "socket"}, false},
		{"tcx", []string{"--responder", "ebpf", "--responder-hook", "tcx"}, true},
		{"xdp-generic", []string{"--responder", "ebpf", "--responder-hook", "xdp-generic"}, true},
	}
	for _, resp := range responders {
		for _, all := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/watch-all=%v", resp.name, all), func(t *testing.T) {
				t.Parallel()
				l := labtest.New(t,
					lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
					lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
				)
				b, client := l.Host("b"), l.Host("client")
				sock := filepath.Join(sockDir(t), "b.sock")
				args := resp.args
				if all {
					args = append(args, "--watch-all")
				}
				startAgent(t, b, sock, args...)
				mustVip(t, b, sock, "claim", "192.0.2.10") // its own probes must not count as requests
				// The capture opens just after the claim goes live.
				labtest.Eventually(t, 3*time.Second, func() (bool, string) {
					st := status(t, b, sock)
					want := "held"
					if all {
						want = "all"
					}
					return len(st.Captures) == 1 && st.Captures[0].Interface == "eth0" && st.Captures[0].Error == "" && st.Captures[0].Scope == want,
						fmt.Sprintf("captures: %+v, want one on eth0 with scope %s", st.Captures, want)
				})
				st := status(t, b, sock)
				if got, want := claimOf(t, st, "192.0.2.10").Responder, map[bool]string{false: "socket", true: "ebpf (" + resp.name + ")"}[resp.ebpf]; got != want {
					t.Fatalf("responder %q, want %q", got, want)
				}
				if c := st.Captures[0]; c.FromResponder != map[bool]int{false: 0, true: 1}[resp.ebpf] || c.AfterIngress != resp.ebpf {
					t.Errorf("capture: %d addresses counted from the responder, after tc ingress %v; want %v and %v", c.FromResponder, c.AfterIngress, resp.ebpf, resp.ebpf)
				}
				before := st.Captures[0].Received
				arping(t, client, "-c", "3", "-w", "4", "-I", "eth0", "192.0.2.20") // nobody holds it
				arping(t, client, "-c", "4", "-w", "6", "-I", "eth0", "192.0.2.10")
				entry := func(tr api.WhoHasResponse, addr string) (api.WhoHas, bool) {
					for _, e := range tr.Entries {
						if e.Addr == addr {
							return e, true
						}
					}
					return api.WhoHas{}, false
				}
				var tr api.WhoHasResponse
				labtest.Eventually(t, 3*time.Second, func() (bool, string) {
					var err error
					if tr, err = api.NewClient(sock).WhoHas(ctxFor(t, 5*time.Second)); err != nil {
						return false, fmt.Sprintf("traffic: %v", err)
					}
					e, ok := entry(tr, "192.0.2.10")
					if !ok {
						return false, fmt.Sprintf("no traffic entry for 192.0.2.10 in %+v", tr.Entries)
					}
					return e.Requests == 4 && e.LastAsker.MAC == mac(client, "eth0") && e.LastAsker.Addr == "192.0.2.3" && e.Held,
						fmt.Sprintf("traffic for 192.0.2.10: %d requests, last asker %+v, held %v; want 4 from the client", e.Requests, e.LastAsker, e.Held)
				})
				// Counted once: a second read adds nothing.
				if tr2, err := api.NewClient(sock).WhoHas(ctxFor(t, 5*time.Second)); err != nil {
					t.Fatal(err)
				} else if e, _ := entry(tr2, "192.0.2.10"); e.Requests != 4 {
					t.Errorf("traffic for 192.0.2.10 read again: %d requests, want still 4", e.Requests)
				}
				// The requests for 192.0.2.20 came first: were they let in,
				// they are counted by now.
				e, ok := entry(tr, "192.0.2.20")
				received := status(t, b, sock).Captures[0].Received - before
				switch {
				case all && (!ok || e.Requests != 3):
					t.Errorf("--watch-all: entry for 192.0.2.20 %+v (present %v), want 3 requests", e, ok)
				case !all && ok:
					t.Errorf("default scope: entry for 192.0.2.20, which is not held: %+v; want none", e)
				case !all && !resp.ebpf && received != 4:
					t.Errorf("default scope: the capture received %d frames, want the 4 requests for the held address alone (the kernel drops the others)", received)
				case !all && resp.ebpf && received != 0:
					t.Errorf("default scope, in-kernel responder: the capture received %d frames, want none (the program answers the requests and remembers who asked)", received)
				case all && resp.ebpf && received != 3:
					t.Errorf("--watch-all, in-kernel responder: the capture received %d frames, want the 3 for 192.0.2.20 alone (the program answered the others before the capture reads)", received)
				}
			})
		}
	}
}
