package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/sniff"
)

// vip lab demo --fleet: a night of maintenance on the fleet lab, in acts,
// each proved by what a capture on the client's side of the wire saw
// answer for the addresses, not by what the agents say of themselves.

// errProofFailed is an act whose proof the capture did not bear out: exit 3.
var errProofFailed = errors.New("a proof of the demo failed")

// The night's group: an IPv4 and an IPv6 address that move together.
var nightAddrs = []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")}

const (
	nightGroup = "web"
	// nightAsk is how often the client asks who has each address: every
	// stretch without an answer longer than this is one the client saw.
	nightAsk = 100 * time.Millisecond
	// nightWatch is how long an act keeps watching after the new owner's
	// first answer, for an old owner that answers late (one that wakes).
	nightWatch = 4 * time.Second
	// nightOutage is how long the store is stopped in act 5, and
	// nightDark the longest an address may go unanswered meanwhile.
	nightOutage = 10 * time.Second
	nightDark   = time.Second
	// nightWait bounds each wait for the fleet to do what an act asked.
	nightWait = 30 * time.Second
)

// night is one run of the fleet demo: the lab, the client's witness, and
// how to say and run things.
type night struct {
	labScript
	witness *lab.Witness
	capt    *sniff.Capture
	// mu guards deaf: why the client's capture or requests stopped.
	mu    sync.Mutex
	deaf  error
	macs  map[string]string // node -> MAC of eth0
	start time.Time
	// expect are the history's records the acts made, in order.
	expect []expected
}

// expected is a change an act made, as the history must hold it.
type expected struct {
	kind store.ChangeKind
	node string // the node the record names
	what string
}

// demoFleet plays the night on a fleet lab it builds, and leaves the lab
// up to explore. It returns errProofFailed (exit 3) at the first act whose
// proof fails, naming it.
func (e *labEnv) demoFleet(ctx context.Context, d *deps) error {
	if up, err := e.exists(ctx); err != nil {
		return err
	} else if up {
		return fmt.Errorf("a lab is up, and the fleet demo plays its night on a fresh one: remove it with \"%s\" first", labHint("down"))
	}
	if _, err := e.up(ctx, d, true); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	n := &night{labScript: labScript{e: e, d: d, ctx: ctx, exe: exe}, witness: lab.NewWitness(nightAddrs...), macs: map[string]string{}, start: time.Now()}
	for _, h := range labAgents {
		out, err := n.output(h, "cat", "/sys/class/net/eth0/address")
		if err != nil {
			return fmt.Errorf("the MAC of lab host %s: %w", h, err)
		}
		n.macs[h] = strings.TrimSpace(out)
	}
	stop, err := n.watchFromClient()
	if err != nil {
		return err
	}
	defer stop()
	acts := []struct {
		title string
		play  func() error
	}{
		{"a claims the group web (192.0.2.10 and 2001:db8::10) with standbys b and c", n.claim},
		{"a freezes (SIGSTOP): a standby takes over, and a stays silent when it wakes", n.freeze},
		{"the owner's agent is killed (kill -9) with the addresses on its interface (--assign)", n.kill},
		{"the group goes home to a; a is drained, with its proof of quiet, and uncordoned with the return home", n.drain},
		{"the store stops for 10 s: every address stays answered", n.outage},
		{"vip history of the night", n.history},
	}
	for i, act := range acts {
		n.say("act %d of %d: %s", i+1, len(acts), act.title)
		if err := act.play(); err != nil {
			if errors.Is(err, errProofFailed) {
				n.say("act %d FAILED: %v", i+1, err)
				return fmt.Errorf("act %d of the fleet demo (%s): %w", i+1, act.title, err)
			}
			return fmt.Errorf("act %d of the fleet demo (%s): %w", i+1, act.title, err)
		}
	}
	n.say("the night is over in %.0f s, every proof from the client's capture held. Explore with: %s; remove it all with: %s",
		time.Since(n.start).Seconds(), labHint("exec client -- vip fleet"), labHint("down"))
	return nil
}

// proof prints a proof that held, or returns it as the act's failure.
func (n *night) proof(err error, held string, args ...any) error {
	if err == nil {
		err = n.listening()
	}
	if err != nil {
		fmt.Fprintf(n.d.io.Out, "   proof FAILED: %v\n", err)
		return fmt.Errorf("%w: %v", errProofFailed, err)
	}
	fmt.Fprintf(n.d.io.Out, "   proof: "+held+"\n", args...)
	return nil
}

// owner returns the node that holds every address of the night in the
// store, or "" while they are not held by one node.
func (n *night) owner() string {
	out, err := n.output("client", n.exe, "fleet", "--json")
	if err != nil {
		return ""
	}
	var f api.FleetResponse
	if json.Unmarshal([]byte(out), &f) != nil {
		return ""
	}
	owner := ""
	for _, a := range nightAddrs {
		i := slices.IndexFunc(f.Claims, func(c api.FleetClaim) bool { return c.Addr == a.String() })
		if i < 0 || f.Claims[i].Node == "" || f.Claims[i].State != api.FleetHolding || owner != "" && f.Claims[i].Node != owner {
			return ""
		}
		owner = f.Claims[i].Node
	}
	return owner
}

// waitFor polls cond until it holds or nightWait passes.
func (n *night) waitFor(what string, cond func() bool) error {
	deadline := time.Now().Add(nightWait)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v for %s", nightWait, what)
		}
		select {
		case <-n.ctx.Done():
			return n.ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// answeredBy waits until the client has seen mac answer for every address
// after from.
func (n *night) answeredBy(node string, from time.Time) error {
	return n.waitFor("the client to see "+node+" answer for every address", func() bool {
		for _, a := range nightAddrs {
			if n.witness.Count(a, from, time.Now())[n.macs[node]] == 0 {
				return false
			}
		}
		return true
	})
}

// handover proves each address passed from old to new after from: new
// answered, and old not once after new's first answer; it watches
// nightWatch past the later first answer.
func (n *night) handover(old, new string, from time.Time, why string) error {
	if err := n.answeredBy(new, from); err != nil {
		return n.proof(fmt.Errorf("%s: %w", why, err), "")
	}
	n.sleep(nightWatch)
	var (
		errs  []error
		parts []string
	)
	now := time.Now()
	for _, a := range nightAddrs {
		h := n.witness.Handover(a, n.macs[old], n.macs[new], from, now)
		if err := h.Err(nightDark); err != nil {
			errs = append(errs, err)
			continue
		}
		dark := old + " had not answered since the act began"
		if !h.LastOld.IsZero() {
			dark = fmt.Sprintf("%s last answered %s before %s's first", old, h.FirstNew.Sub(h.LastOld).Round(time.Millisecond), new)
		}
		parts = append(parts, fmt.Sprintf("%s: %d answers from %s, 0 from %s after %s's first (%s; watched %.1f s after it)",
			a, h.NewAnswers, new, old, new, dark, h.UntilWatchEnds.Seconds()))
	}
	return n.proof(errors.Join(errs...), "%s", strings.Join(parts, "; "))
}

func (n *night) sleep(d time.Duration) {
	select {
	case <-n.ctx.Done():
	case <-time.After(d):
	}
}

// agentPID returns the pid of host's agent.
func (n *night) agentPID(host string) (int, error) {
	out, err := n.output(host, n.exe, "status", "--json")
	if err != nil {
		return 0, fmt.Errorf("vip status on %s: %v: %s", host, err, strings.TrimSpace(out))
	}
	var st api.StatusResponse
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Agent.PID <= 0 {
		return 0, fmt.Errorf("vip status --json on %s named no agent", host)
	}
	return st.Agent.PID, nil
}

// Act 1: the claim, and who answers.
func (n *night) claim() error {
	addrs := make([]string, len(nightAddrs))
	for i, a := range nightAddrs {
		addrs[i] = a.String()
	}
	from := time.Now()
	if err := n.show("a", append(append([]string{"claim"}, addrs...), "--group", nightGroup, "--assign", "--reason", "the night's service")...); err != nil {
		return err
	}
	for _, h := range []string{"b", "c"} {
		if err := n.show("client", append(append([]string{"standby"}, addrs...), "--on", h)...); err != nil {
			return err
		}
	}
	n.expect = append(n.expect, expected{store.ChangeClaim, "a", "a's claim"})
	if err := n.answeredBy("a", from); err != nil {
		return n.proof(err, "")
	}
	n.sleep(time.Second)
	_ = n.show("client", "fleet")
	var (
		errs  []error
		parts []string
	)
	for _, a := range nightAddrs {
		count := n.witness.Count(a, from, time.Now())
		if len(count) != 1 {
			errs = append(errs, fmt.Errorf("%s answered by %s: want a (%s) alone", a, macCounts(count, n.macs), n.macs["a"]))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s answered by a alone (%d answers)", a, count[n.macs["a"]]))
	}
	return n.proof(errors.Join(errs...), "the client's capture saw %s", strings.Join(parts, ", "))
}

// Act 2: the owner freezes; a standby takes the group; the owner wakes
// and says nothing.
func (n *night) freeze() error {
	pid, err := n.agentPID("a")
	if err != nil {
		return err
	}
	from := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("freeze a's agent: %w", err)
	}
	woke := false
	wake := func() {
		if !woke {
			woke = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer wake()
	var taker string
	if err := n.waitFor("a standby to take the group", func() bool {
		taker = n.owner()
		return taker != "" && taker != "a"
	}); err != nil {
		return n.proof(err, "")
	}
	if err := n.answeredBy(taker, from); err != nil {
		return n.proof(err, "")
	}
	n.expect = append(n.expect, expected{store.ChangeFailover, taker, taker + "'s take after a froze"})
	n.say("%s took the group %.1f s after a froze; a wakes now (SIGCONT), and the client watches %v more", taker, time.Since(from).Seconds(), nightWatch)
	wake()
	return n.handover("a", taker, from, "a froze")
}

// Act 3: the owner's agent is killed; the next standby takes the group,
// and the dead owner's kernel, which held the addresses (--assign), says
// nothing either. Its agent then starts again, as after a reboot.
func (n *night) kill() error {
	old := n.owner()
	if old == "" {
		return errors.New("no node holds the whole group")
	}
	pid, err := n.agentPID(old)
	if err != nil {
		return err
	}
	from := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s's agent: %w", old, err)
	}
	var taker string
	if err := n.waitFor("another standby to take the group", func() bool {
		taker = n.owner()
		return taker != "" && taker != old
	}); err != nil {
		return n.proof(err, "")
	}
	n.expect = append(n.expect, expected{store.ChangeFailover, taker, taker + "'s take after " + old + "'s agent was killed"})
	n.say("%s took the group %.1f s after %s's agent was killed; the client watches %v more", taker, time.Since(from).Seconds(), old, nightWatch)
	if err := n.handover(old, taker, from, old+" was killed"); err != nil {
		return err
	}
	n.say("%s's agent starts again, as after a reboot", old)
	sock := n.e.socket(old)
	if err := n.e.spawn(old, agent.PathsFor(sock).Log, n.exe, "agent", "--socket", sock, "--node", old, "--store", labStoreURL); err != nil {
		return fmt.Errorf("start %s's agent again: %w", old, err)
	}
	return n.e.waitFleet(n.ctx, n.exe, labAgents)
}

// Act 4: the group goes home to a, where the night began (the takes left
// a as its home); a is drained for maintenance, with drain's own proof
// that nothing reaches it any more, and uncordoned with the group's
// return home.
func (n *night) drain() error {
	if from := n.owner(); from != "a" {
		start := time.Now()
		if err := n.show("client", "move", "--group", nightGroup, "--to", "a", "--reason", "home before the maintenance"); err != nil {
			return err
		}
		n.expect = append(n.expect, expected{store.ChangeMove, "a", "the move home to a"})
		if err := n.handover(from, "a", start, "the move home to a"); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := n.show("client", "drain", "a", "--quiet", "3s", "--reason", "kernel upgrade"); err != nil {
		return n.proof(err, "")
	}
	to := n.owner()
	if to == "" || to == "a" {
		return n.proof(fmt.Errorf("after the drain of a the group is held by %q", to), "")
	}
	n.expect = append(n.expect, expected{store.ChangeMove, to, "the drain's move to " + to})
	if err := n.handover("a", to, start, "the drain of a"); err != nil {
		return err
	}
	if err := n.neighbours(to); err != nil {
		return err
	}
	back := time.Now()
	if err := n.show("client", "uncordon", "a", "--return"); err != nil {
		return err
	}
	n.expect = append(n.expect, expected{store.ChangeMove, "a", "the return home to a"})
	if err := n.handover(to, "a", back, "the return home to a"); err != nil {
		return err
	}
	return n.neighbours("a")
}

// neighbours proves the client's kernel sends to node now: its neighbour
// entry of each address names node's MAC (ip neigh, the kernel's table).
func (n *night) neighbours(node string) error {
	var errs []error
	for _, a := range nightAddrs {
		out, _ := n.output("client", "ip", "neigh", "show", a.String(), "dev", "eth0")
		f := strings.Fields(out)
		i := slices.Index(f, "lladdr")
		if i < 0 || i+1 >= len(f) || f[i+1] != n.macs[node] {
			errs = append(errs, fmt.Errorf("the client's neighbour entry of %s is %q, not %s's MAC %s", a, strings.TrimSpace(out), node, n.macs[node]))
		}
	}
	return n.proof(errors.Join(errs...), "the client's kernel sends to %s (ip neigh names %s for both)", node, n.macs[node])
}

// Act 5: the store stops (SIGSTOP) for nightOutage; the owner goes on
// answering, on the failsafe its peers acknowledged.
func (n *night) outage() error {
	owner := n.owner()
	if owner == "" {
		return errors.New("no node holds the whole group")
	}
	pids, err := n.storePIDs()
	if err != nil {
		return err
	}
	from := time.Now()
	for _, p := range pids {
		if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("stop the store: %w", err)
		}
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			for _, p := range pids {
				_ = syscall.Kill(p, syscall.SIGCONT)
			}
		}
	}
	defer resume()
	n.sleep(nightOutage / 2)
	_ = n.show(owner, "status")
	n.sleep(nightOutage - time.Since(from))
	resume()
	back := time.Now()
	var (
		errs  []error
		parts []string
	)
	for _, a := range nightAddrs {
		s := n.witness.Silence(a, from, back)
		others := othersThan(s.MACs, n.macs[owner])
		switch {
		case s.Longest > nightDark:
			errs = append(errs, fmt.Errorf("%s went unanswered for %s, from %s after the store stopped", a, s.Longest.Round(time.Millisecond), s.At.Sub(from).Round(time.Millisecond)))
		case len(others) > 0:
			errs = append(errs, fmt.Errorf("%s was answered by %s, not %s alone", a, macCounts(s.MACs, n.macs), owner))
		default:
			parts = append(parts, fmt.Sprintf("%s answered by %s alone, %d answers, never silent for more than %s", a, owner, s.MACs[n.macs[owner]], s.Longest.Round(time.Millisecond)))
		}
	}
	n.say("the store answers again after %.1f s", back.Sub(from).Seconds())
	if err := n.proof(errors.Join(errs...), "through the outage %s", strings.Join(parts, "; ")); err != nil {
		return err
	}
	// The store's return: the leases it let run out while stopped may
	// be gone, and the group taken again, by its owner or a standby.
	// Measured and said; a second owner answering is a failure.
	var now string
	if err := n.waitFor("the store to say who holds the group", func() bool { now = n.owner(); return now != "" }); err != nil {
		return n.proof(err, "")
	}
	n.sleep(time.Until(back.Add(nightWatch)))
	until := time.Now()
	errs, parts = nil, nil
	for _, a := range nightAddrs {
		s := n.witness.Silence(a, back, until)
		if now != owner {
			if err := n.witness.Handover(a, n.macs[owner], n.macs[now], back, until).Err(until.Sub(back)); err != nil {
				errs = append(errs, err)
				continue
			}
		} else if others := othersThan(s.MACs, n.macs[owner]); len(others) > 0 {
			errs = append(errs, fmt.Errorf("%s was answered by %s after the store's return, not %s alone", a, macCounts(s.MACs, n.macs), owner))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s longest unanswered %s", a, s.Longest.Round(time.Millisecond)))
	}
	held := owner + " kept the group"
	if now != owner {
		held = fmt.Sprintf("%s took the group (the store had let %s's lease run out while it was stopped), and %s was silent after %s's first answer", now, owner, owner, now)
	}
	return n.proof(errors.Join(errs...), "in the %.1f s after the store's return %s; %s", until.Sub(back).Seconds(), held, strings.Join(parts, ", "))
}

// storePIDs returns the processes of the store host: etcd.
func (n *night) storePIDs() ([]int, error) {
	out, err := exec.CommandContext(n.ctx, "ip", "netns", "pids", lab.NetnsName(n.e.prefix, labStoreHost)).Output()
	if err != nil {
		return nil, fmt.Errorf("find the lab's store: %w", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	if len(pids) == 0 {
		return nil, errors.New("the lab's store is not running")
	}
	return pids, nil
}

// Act 6: the history of the night, as the store kept it: it must hold
// each change the acts made, in order.
func (n *night) history() error {
	a := nightAddrs[0].String()
	if err := n.show("client", "history", a); err != nil {
		return err
	}
	out, err := n.output("client", n.exe, "history", a, "--json")
	if err != nil {
		return err
	}
	var h api.HistoryResponse
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		return fmt.Errorf("vip history --json: %w", err)
	}
	i := 0
	for _, ch := range h.Changes {
		if i < len(n.expect) && ch.Kind == string(n.expect[i].kind) && ch.Node == n.expect[i].node {
			i++
		}
	}
	var (
		err2  error
		names []string
	)
	for _, e := range n.expect {
		names = append(names, e.what)
	}
	if i < len(n.expect) {
		err2 = fmt.Errorf("vip history of %s has no record of %s after the ones before it", a, n.expect[i].what)
	}
	return n.proof(err2, "the store's history holds %s, in order", strings.Join(names, ", "))
}
