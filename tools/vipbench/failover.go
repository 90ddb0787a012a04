package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
	"github.com/vipctl/vip/tools/loadgen"
)

// The failover step (issue 32): keepalived and vip side by side, in one lab
// and one run. Each round kills the owner (kill -9 of keepalived on the
// VRRP master, then of vip's agent, neither restarted) while the client
// asks for the address on the wire, and reads from the client's capture
// how long after the kill the standby first answered, and what the dead
// owner's host sent after that. keepalived is Debian's, with unicast VRRP,
// advert_int 1 and its defaults otherwise; vip is the agent built from
// this checkout with its defaults, guarded by a real etcd.
const failoverStep = "failover"

// failoverConfig is the size of the step.
type failoverConfig struct {
	// Rounds is how many times each owner is killed, keepalived's and
	// vip's in turn.
	Rounds int
	// TTL is the agents' --lease-ttl; zero leaves vip's default.
	TTL time.Duration
	// Rate is how many ARP requests a second the client sends for the
	// address, through each round.
	Rate int
	// After is how long after the new owner's first answer the client's
	// capture is read for what the old owner's host still sends.
	After time.Duration
}

func (b *bench) failoverConfig() failoverConfig {
	c := failoverConfig{Rounds: 5, Rate: 100, After: 2 * time.Second}
	if b.o.short {
		c.Rounds = 2
	}
	return c
}

// ttl is the agents' lease TTL.
func (c failoverConfig) ttl() time.Duration {
	if c.TTL > 0 {
		return c.TTL
	}
	return fleet.DefaultTTL
}

// timeout bounds the step: a round of keepalived's takes about 10 s, one of
// vip's a TTL and 10 s; each is allowed several times that.
func (c failoverConfig) timeout() time.Duration {
	return 2*time.Minute + time.Duration(c.Rounds)*(90*time.Second+4*c.ttl())
}

// The failover lab: etcd in store, the owners a and b, the asker client.
// Documentation prefixes only.
var failoverHosts = []lab.HostConfig{
	{Name: "store", IPv4: netip.MustParsePrefix("192.0.2.1/24")},
	{Name: "a", IPv4: netip.MustParsePrefix("192.0.2.11/24")},
	{Name: "b", IPv4: netip.MustParsePrefix("192.0.2.12/24")},
	{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.13/24")},
}

// The address each one moves: keepalived's and vip's are apart, so that
// nothing one leaves behind is counted for the other.
var (
	keepalivedAddr = netip.MustParseAddr("192.0.2.10")
	failoverAddr   = netip.MustParseAddr("192.0.2.20")
)

// killSpread is the period the kill is spread over: keepalived's
// advertisement interval (advert_int 1) and vip's renewal period at the
// default TTL (a sixth of it).
const killSpread = time.Second

// takeover is one owner's death as the client's wire saw it.
type takeover struct {
	Killed time.Time
	// First is the new owner's first answer to one of the client's
	// requests; LastOld the old owner's host's last frame saying it has
	// the address (later than First when it went on answering).
	First, LastOld time.Time
	// Late counts the frames from the old owner's host saying it has the
	// address (answers, announcements) in the After that follows First;
	// Answered the new owner's answers in that time (one a request).
	Late, Answered int
	After          time.Duration
}

// took is from the kill to the new owner's first answer.
func (t takeover) took() time.Duration { return t.First.Sub(t.Killed) }

// slack is from the old owner's last frame to the new owner's first answer:
// how long the address went unanswered, negative when both answered.
func (t takeover) slack() time.Duration { return t.First.Sub(t.LastOld) }

// failoverResult is what the step measured.
type failoverResult struct {
	Cfg failoverConfig
	// Keepalived is its version line; Responder what answered for vip
	// on the owner (its status's responder).
	Keepalived, Responder string
	KA, Vip               []takeover
}

// failoverLab is the step's lab and what runs in it.
type failoverLab struct {
	tb           *labTB
	cfg          failoverConfig
	vipBin       string
	a, b, client *lab.Host
	macA, macB   string
	storeURL     string
	// dir holds keepalived's configurations and pid files, each round's
	// agents' sockets and state: every keepalived started has it in its
	// command line, which is how strays are found.
	dir string
	run uint8 // the client's loadgen runs, one per round
}

// runFailover runs the whole step: lab, etcd, then the rounds, keepalived's
// and vip's in turn. It returns what it measured up to a failure, and the
// failure; every process it started is gone when it returns.
func runFailover(ctx context.Context, cfg failoverConfig, vipBin string, logf func(string, ...any)) (*failoverResult, error) {
	tb := newLabTB(logf)
	defer tb.Close()
	f := &failoverLab{tb: tb, cfg: cfg, vipBin: vipBin}
	res := &failoverResult{Cfg: cfg}
	if err := tb.Do(func() { f.up(ctx, res) }); err != nil {
		return res, err
	}
	for i := range cfg.Rounds {
		var tk takeover
		if err := tb.Do(func() { tk = f.keepalivedRound(ctx, i) }); err != nil {
			return res, fmt.Errorf("keepalived, round %d: %w", i+1, err)
		}
		res.KA = append(res.KA, tk)
		logf("  round %d, keepalived: backup's first answer %v after the kill; %d frames from the dead master's host in the %v after",
			i+1, tk.took().Round(time.Millisecond), tk.Late, tk.After)
		if err := tb.Do(func() { tk = f.vipRound(ctx, i, res) }); err != nil {
			return res, fmt.Errorf("vip, round %d: %w", i+1, err)
		}
		res.Vip = append(res.Vip, tk)
		logf("  round %d, vip: standby's first answer %v after the kill, %v after the old owner's last frame; %d frames from the old owner's host in the %v after",
			i+1, tk.took().Round(time.Millisecond), tk.slack().Round(time.Millisecond), tk.Late, tk.After)
	}
	return res, nil
}

// up builds the lab and starts etcd.
func (f *failoverLab) up(ctx context.Context, res *failoverResult) {
	t := f.tb
	labtest.RequireTool(t, "keepalived")
	labtest.RequireTool(t, "tcpdump")
	labtest.RequireTool(t, "etcd")
	out, err := exec.CommandContext(ctx, "keepalived", "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("keepalived --version: %v: %s", err, out)
	}
	res.Keepalived, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	l := labtest.New(t, failoverHosts...)
	f.a, f.b, f.client = l.Host("a"), l.Host("b"), l.Host("client")
	f.macA, f.macB = f.a.Links[0].MAC.String(), f.b.Links[0].MAC.String()
	f.dir = t.TempDir()
	// Whatever happens to a round, no keepalived of this run outlives it.
	t.Cleanup(func() {
		if pids := killKeepalived(f.dir); len(pids) > 0 {
			t.Errorf("killed keepalived processes %v, left running by the failover step", pids)
		}
	})
	etcd := etcdlab.StartEtcd(t, l.Host("store"))
	f.storeURL = "etcd://" + strings.TrimPrefix(etcd.Endpoint(), "http://")
}

// keepalivedRound starts keepalived on a (the master, priority 150) and b
// (the backup, priority 100, the default), kills a's, and reads the
// takeover from the client's wire; then it stops b's and takes the address
// off a, where kill -9 left it.
func (f *failoverLab) keepalivedRound(ctx context.Context, i int) takeover {
	t := f.tb
	start := func(h *lab.Host, master bool) *labtest.Proc {
		name := fmt.Sprintf("%s%d", h.Name, i)
		conf := filepath.Join(f.dir, name+".conf")
		if err := os.WriteFile(conf, []byte(keepalivedConf(h, f.peer(h), master)), 0o644); err != nil {
			t.Fatalf("write keepalived's configuration: %v", err)
		}
		// The VRRP process only (-P), in the foreground (-n), logging to
		// the console (-l -D) and not to syslog (-G), with its own pid
		// files (-p, -r): nothing of the host's keepalived is touched.
		return labtest.Start(t, h, "keepalived", "-n", "-l", "-D", "-G", "-P", "-f", conf,
			"-p", filepath.Join(f.dir, name+".pid"), "-r", filepath.Join(f.dir, name+"-vrrp.pid"))
	}
	kaA := start(f.a, true)
	kaA.WaitOutput(t, "Entering MASTER STATE", 20*time.Second)
	kaB := start(f.b, false)
	kaB.WaitOutput(t, "Entering BACKUP STATE", 20*time.Second)
	if !f.assigned(ctx, f.a, keepalivedAddr) {
		t.Fatalf("a's keepalived is master but %s is not on a's eth0", keepalivedAddr)
	}
	tk := f.measure(ctx, keepalivedAddr, f.macA, f.macB, func() {
		if strings.Contains(kaB.Output(), "Entering MASTER STATE") {
			t.Fatalf("b's keepalived became master before a's was killed:\n%s", kaB.Output())
		}
		// The whole process group, as kill -9 of the service would:
		// the parent and its VRRP child.
		kaA.Kill(t)
		if pids := killKeepalived(filepath.Join(f.dir, fmt.Sprintf("a%d.conf", i))); len(pids) > 0 {
			t.Fatalf("kill -9 of a's keepalived's process group left processes %v running", pids)
		}
	}, func() { kaB.WaitOutput(t, "Entering MASTER STATE", 20*time.Second) })
	// SIGTERM: b's keepalived takes its address off as it stops; a's was
	// killed, so the address is taken off by hand.
	if code := kaB.Stop(t); code != 0 {
		t.Fatalf("b's keepalived exited with %d on SIGTERM:\n%s", code, kaB.Output())
	}
	if _, err := f.a.Run(ctx, "ip", "addr", "del", keepalivedAddr.String()+"/32", "dev", "eth0"); err != nil {
		t.Fatalf("take the address off a after the round: %v", err)
	}
	for _, h := range []*lab.Host{f.a, f.b} {
		if f.assigned(ctx, h, keepalivedAddr) {
			t.Fatalf("%s is still on %s's eth0 after the round", keepalivedAddr, h.Name)
		}
	}
	return tk
}

// peer is the other owner.
func (f *failoverLab) peer(h *lab.Host) *lab.Host {
	if h == f.a {
		return f.b
	}
	return f.a
}

// keepalivedConf is h's configuration: one VRRP instance on eth0 with the
// other owner as its unicast peer, an advertisement a second, the address
// as a /32; the master at priority 150, the backup at the default.
func keepalivedConf(h, peer *lab.Host, master bool) string {
	state, prio := "BACKUP", ""
	if master {
		state, prio = "MASTER", "\tpriority 150\n"
	}
	return fmt.Sprintf(`global_defs {
	router_id vipbench-%s
}
vrrp_instance vipbench {
	state %s
	interface eth0
	virtual_router_id 51
%s	advert_int 1
	unicast_src_ip %s
	unicast_peer {
		%s
	}
	virtual_ipaddress {
		%s
	}
}
`, h.Name, state, prio, h.IPv4.Addr(), peer.IPv4.Addr(), keepalivedAddr)
}

// vipRound starts agents on a and b guarded by the store, has a claim the
// address and b stand by for it, kills a's agent and reads the takeover
// from the client's wire; then b releases the address and its agent stops.
func (f *failoverLab) vipRound(ctx context.Context, i int, res *failoverResult) takeover {
	t := f.tb
	dir := filepath.Join(f.dir, fmt.Sprintf("vip%d", i))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("make the agents' directory: %v", err)
	}
	start := func(h *lab.Host) (*labtest.Proc, *api.Client, string) {
		sock := filepath.Join(dir, h.Name+".sock")
		args := []string{"agent", "--socket", sock, "--store", f.storeURL, "--node", fmt.Sprintf("%s%d", h.Name, i), "--log-format", "json"}
		if f.cfg.TTL > 0 {
			args = append(args, "--lease-ttl", f.cfg.TTL.String())
		}
		p := labtest.Start(t, h, f.vipBin, args...)
		c := api.NewClient(sock)
		labtest.Eventually(t, 20*time.Second, func() (bool, string) {
			if p.Exited() {
				t.Fatalf("%s's agent exited:\n%s", h.Name, p.Output())
			}
			_, err := c.Status(ctx)
			return err == nil, fmt.Sprintf("%s's agent does not answer on %s: %v", h.Name, sock, err)
		})
		return p, c, sock
	}
	agentA, clientA, sockA := start(f.a)
	agentB, clientB, sockB := start(f.b)
	f.vip(ctx, f.a, sockA, "claim", failoverAddr.String())
	f.vip(ctx, f.b, sockB, "claim", failoverAddr.String(), "--standby")
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		st, err := clientB.Status(ctx)
		return err == nil && len(st.Claims) == 1 && st.Claims[0].State == api.StateStandby, fmt.Sprintf("b does not stand by for %s: %+v, %v", failoverAddr, st.Claims, err)
	})
	if st, err := clientA.Status(ctx); err == nil && len(st.Claims) == 1 {
		res.Responder = st.Claims[0].Responder
	}
	tk := f.measure(ctx, failoverAddr, f.macA, f.macB, func() { agentA.Kill(t) },
		func() { agentB.WaitOutput(t, "standby took over", 3*f.cfg.ttl()+20*time.Second) })
	f.vip(ctx, f.b, sockB, "release", failoverAddr.String())
	if code := agentB.StopOrKill(t, 10*time.Second); code != 0 {
		t.Fatalf("b's agent exited with %d on SIGTERM:\n%s", code, agentB.Output())
	}
	return tk
}

// vip runs a vip command on h against the agent at sock.
func (f *failoverLab) vip(ctx context.Context, h *lab.Host, sock string, args ...string) {
	if _, err := h.Run(ctx, f.vipBin, append(args, "--socket", sock)...); err != nil {
		f.tb.Fatalf("vip on %s: %v", h.Name, err)
	}
}

// measure has the client ask for addr and capture the answers, waits for
// the owner at oldMAC to answer, kills it with kill, waits for the takeover
// with taken (an event of the standby's), and After past the new owner's
// first answer; it reads the takeover from the capture.
func (f *failoverLab) measure(ctx context.Context, addr netip.Addr, oldMAC, newMAC string, kill, taken func()) takeover {
	t := f.tb
	capture := labtest.Capture(t, f.client, "eth0", "arp")
	stop := f.ask(ctx, addr)
	defer stop()
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		claims := arpFor(capture.Snapshot(t), addr, f.client.IPv4.Addr())
		return slices.ContainsFunc(claims, func(c arpClaim) bool { return c.answer && c.mac == oldMAC }),
			fmt.Sprintf("%s (%s) does not answer for %s before the kill", f.a.Name, oldMAC, addr)
	})
	// The kill lands at a random point of keepalived's advertisement
	// period and of vip's renewal period: a fixed delay from the answer
	// just seen would put it at about the same point every round, and
	// every round would measure the same end of each one's range.
	select {
	case <-time.After(rand.N(killSpread)):
	case <-ctx.Done():
		t.Fatalf("%v", context.Cause(ctx))
	}
	killed := time.Now()
	kill()
	taken()
	// The window after the new owner's first answer, which follows the
	// event just seen within a request or two; then the capture is read
	// until it holds the whole window.
	select {
	case <-time.After(f.cfg.After):
	case <-ctx.Done():
		t.Fatalf("%v", context.Cause(ctx))
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		claims := arpFor(capture.Snapshot(t), addr, f.client.IPv4.Addr())
		i := slices.IndexFunc(claims, func(c arpClaim) bool { return c.answer && c.mac == newMAC && c.at.After(killed) })
		return i >= 0 && claims[len(claims)-1].at.After(claims[i].at.Add(f.cfg.After)),
			fmt.Sprintf("the capture does not hold %v of answers after %s's first", f.cfg.After, newMAC)
	})
	stop()
	tk, err := takeoverOf(arpFor(capture.Packets(t), addr, f.client.IPv4.Addr()), oldMAC, newMAC, killed, f.cfg.After)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	return tk
}

// ask sends the client's ARP requests for addr at the configured rate until
// stop is called (stop may be called again).
func (f *failoverLab) ask(ctx context.Context, addr netip.Addr) (stop func()) {
	f.run++
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := loadgen.Run(cctx, loadgen.Config{
			Netns: netnsPath(f.client), Interface: "eth0",
			Target: addr, Sender: f.client.IPv4.Addr(),
			Rate: f.cfg.Rate, Count: min(loadgen.MaxCount, f.cfg.Rate*600), Wait: 100 * time.Millisecond,
			Run: f.run,
		})
		done <- err
	}()
	var stopped bool
	return func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			f.tb.Errorf("the client's requests for %s: %v", addr, err)
		}
	}
}

// assigned reports whether addr is on h's eth0.
func (f *failoverLab) assigned(ctx context.Context, h *lab.Host, addr netip.Addr) bool {
	out, err := h.Run(ctx, "ip", "-o", "addr", "show", "dev", "eth0")
	if err != nil {
		f.tb.Fatalf("%v", err)
	}
	return strings.Contains(out, " "+addr.String()+"/")
}

// killKeepalived sends SIGKILL to every keepalived whose command line holds
// mark (the step's directory, or one keepalived's configuration file), and
// returns their ids.
func killKeepalived(mark string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if err != nil || filepath.Base(argv0) != "keepalived" || !strings.Contains(string(cmdline), mark) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// arpClaim is an ARP frame on the client's wire whose sender says it has
// the address: an answer to the client's request, or an announcement.
type arpClaim struct {
	at     time.Time
	mac    string // the Ethernet source
	answer bool
}

// arpFor returns, in capture order, the ARP frames in pkts whose sender
// has addr, each an answer when it is a reply to asker. (The capture has
// no requests: the client sends them from a packet socket that bypasses
// the taps.)
func arpFor(pkts []gopacket.Packet, addr, asker netip.Addr) []arpClaim {
	var claims []arpClaim
	for _, pk := range pkts {
		eth, _ := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		arp, _ := pk.Layer(layers.LayerTypeARP).(*layers.ARP)
		if eth == nil || arp == nil {
			continue
		}
		sender, _ := netip.AddrFromSlice(arp.SourceProtAddress)
		target, _ := netip.AddrFromSlice(arp.DstProtAddress)
		if sender == addr {
			claims = append(claims, arpClaim{at: pk.Metadata().Timestamp, mac: eth.SrcMAC.String(), answer: arp.Operation == layers.ARPReply && target == asker})
		}
	}
	return claims
}

// takeoverOf reads one takeover from the client's capture: the new owner's
// first answer after killed, the old owner's last frame, and the old
// owner's frames and the new owner's answers in the after that follows the
// first answer.
func takeoverOf(claims []arpClaim, oldMAC, newMAC string, killed time.Time, after time.Duration) (takeover, error) {
	tk := takeover{Killed: killed, After: after}
	for _, c := range claims {
		switch {
		case c.mac == oldMAC:
			tk.LastOld = c.at
		case c.mac == newMAC && c.answer && tk.First.IsZero() && c.at.After(killed):
			tk.First = c.at
		}
	}
	switch {
	case tk.LastOld.IsZero():
		return tk, fmt.Errorf("the old owner (%s) never said it had the address", oldMAC)
	case tk.First.IsZero():
		return tk, fmt.Errorf("the new owner (%s) never answered after the kill", newMAC)
	}
	end := tk.First.Add(after)
	in := func(at time.Time) bool { return at.After(tk.First) && !at.After(end) }
	for _, c := range claims {
		switch {
		case !in(c.at):
		case c.mac == oldMAC:
			tk.Late++
		case c.mac == newMAC && c.answer:
			tk.Answered++
		}
	}
	return tk, nil
}
