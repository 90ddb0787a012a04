package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/announce/bpfresp"
	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/lab"
)

// The sandbox lab: one segment of network namespaces with documentation
// prefixes, never the host's own interfaces.
const (
	defaultLabName = "viplab"
	labVIP         = "192.0.2.10"
)

// labEnv names one lab: its namespace prefix and the directory of its
// agents' files.
type labEnv struct {
	prefix string
	dir    string
}

var labHosts = []lab.HostConfig{
	{Name: "a", IPv4: netip.MustParsePrefix("192.0.2.1/24"), IPv6: netip.MustParsePrefix("2001:db8::1/64")},
	{Name: "b", IPv4: netip.MustParsePrefix("192.0.2.2/24"), IPv6: netip.MustParsePrefix("2001:db8::2/64")},
	{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24"), IPv6: netip.MustParsePrefix("2001:db8::3/64")},
}

// socket is the agent socket of a lab host: `vip lab exec` points
// VIP_SOCKET at it, so vip inside a host talks to that host's agent.
func (e *labEnv) socket(host string) string {
	return filepath.Join(e.dir, e.prefix+"-"+host+".sock")
}

// labOptions are the flags and arguments of vip lab and its subcommands.
type labOptions struct {
	Dir, Name string
	// Action is the subcommand: up, down, exec or demo; Host and Argv are
	// exec's.
	Action string
	Host   string
	Argv   []string
	// Fleet is up's and demo's --fleet: a store and guarded agents too,
	// and for demo the night of maintenance on them.
	Fleet bool
}

// newLabCmd builds vip lab; runF, when set, runs instead of the
// subcommands, so tests check the flags apart.
func newLabCmd(d *deps, runF func(context.Context, *labOptions) error) *cobra.Command {
	o := &labOptions{Name: defaultLabName, Dir: "/run/vip"}
	run := func(c *cobra.Command, action string) error {
		o.Action = action
		if runF != nil {
			return runF(c.Context(), o)
		}
		return runLab(c.Context(), d, o)
	}
	c := &cobra.Command{
		Use:   "lab up|down|exec HOST -- CMD|demo",
		Short: "A sandbox segment in network namespaces, to rehearse claims and failovers safely",
		Long: `Lab builds a layer-2 segment out of network namespaces on this machine: a Linux
bridge as the switch and hosts a (192.0.2.1), b (192.0.2.2) and client
(192.0.2.3), with IPv6 2001:db8::/64 too. It uses documentation prefixes only
and never touches the host's own interfaces, so claims, failovers and split
brains can be tried without a real network.

Inside a lab host, vip talks to that host's own agent (VIP_SOCKET is set), which
vip claim starts on demand:

  sudo vip lab up
  sudo vip lab exec a -- vip claim 192.0.2.10
  sudo vip lab exec client -- arping -c 2 192.0.2.10
  sudo vip lab down

vip lab demo plays a short scripted failover. vip lab down removes everything
the lab made, its agents too, also after a crash.`,
		ValidArgsFunction: cobra.NoFileCompletions,
		// Without a run function cobra shows the help for any argument and
		// exits 0: a mistyped step would pass for done.
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return badInput("vip lab has no step %q: use up, down, exec or demo", args[0])
			}
			return c.Help()
		},
	}
	c.PersistentFlags().StringVar(&o.Dir, "dir", o.Dir, "directory for the lab agents' sockets, state and logs")
	c.PersistentFlags().StringVar(&o.Name, "name", o.Name, "name of the lab: the prefix of its namespaces")
	_ = c.PersistentFlags().MarkHidden("name")
	up := &cobra.Command{
		Use:   "up [--fleet]",
		Short: "Build the lab (a no-op when it is up)",
		Long: `Up builds the lab: hosts a, b and client on one bridge.

With --fleet it builds the fleet lab: a host c (192.0.2.4) too, Debian's etcd
as the store in a host of its own (store, 192.0.2.5), and a guarded agent on
a, b and c (vip agent --store, nodes a, b and c). Inside the lab VIP_STORE
points at the store, so vip claim there is guarded, and vip fleet, vip move,
vip drain and vip history work as on a real fleet. It needs etcd (sudo
apt-get install etcd-server; make deps installs it).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return run(c, "up") },
	}
	up.Flags().BoolVar(&o.Fleet, "fleet", false, "add a store (etcd) and guarded agents on a, b and c")
	down := &cobra.Command{
		Use:   "down",
		Short: "Remove the lab: its agents, namespaces, links and files",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return run(c, "down") },
	}
	execCmd := &cobra.Command{
		Use:   "exec HOST -- CMD [ARG...]",
		Short: "Run a command inside a lab host",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return badInput("exec needs a host and a command, like: vip lab exec a -- vip status")
			}
			return nil
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveDefault
			}
			names := make([]string, len(allLabHosts()))
			for i, h := range allLabHosts() {
				names[i] = h.Name
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			o.Host, o.Argv = args[0], args[1:]
			return run(c, "exec")
		},
	}
	demo := &cobra.Command{
		Use:   "demo [--fleet]",
		Short: "Play a scripted failover in the lab: a claims, b takes over, a releases",
		Long: `Demo plays a scripted failover in the lab: a claims 192.0.2.10, b claims it
too (a split brain both agents see), a releases it and b's gratuitous burst
moves the client's neighbour entry.

With --fleet it builds the fleet lab and plays a night of maintenance on it,
in six acts: a claims the group web (192.0.2.10 and 2001:db8::10, added to its
interface) with standbys b and c; a freezes and a standby takes over; the new
owner's agent is killed and the next standby takes over; a drain and the
return home; the store stops for 10 s; and vip history of the night. Each act
is proved by a capture on the client's side of the wire, which asks who has
each address every 100 ms: the new owner answers, and the old one not once
after the new one's first answer, also when it wakes; no address goes
unanswered for over a second while the store is stopped; the client's kernel
sends to the drained node's successor. Demo exits 3 at the first proof that
fails. It needs a machine where no lab is up, and leaves the fleet lab up.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return run(c, "demo") },
	}
	demo.Flags().BoolVar(&o.Fleet, "fleet", false, "play a night of maintenance on the fleet lab, each act proved by a capture on the client")
	c.AddCommand(up, down, execCmd, demo)
	return c
}

func runLab(ctx context.Context, d *deps, o *labOptions) error {
	env := &labEnv{prefix: o.Name, dir: o.Dir}
	switch o.Action {
	case "up":
		_, err := env.up(ctx, d, o.Fleet)
		return err
	case "down":
		return env.down(d)
	case "exec":
		return env.exec(ctx, d, o.Host, o.Argv)
	case "demo":
		if o.Fleet {
			return env.demoFleet(ctx, d)
		}
		return env.demo(ctx, d)
	}
	return fmt.Errorf("vip lab %s: no such subcommand", o.Action)
}

func (e *labEnv) exists(ctx context.Context) (bool, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return false, fmt.Errorf("list network namespaces (is iproute2 installed, and are you root?): %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == lab.NetnsName(e.prefix, "sw") {
			return true, nil
		}
	}
	return false, nil
}

func (e *labEnv) up(ctx context.Context, d *deps, fleet bool) (bool, error) {
	if os.Geteuid() != 0 {
		return false, fmt.Errorf("the lab makes network namespaces, which needs root: run it with sudo")
	}
	up, err := e.exists(ctx)
	if err != nil {
		return false, err
	}
	switch {
	case up && fleet && !e.isFleet():
		return false, fmt.Errorf("the lab is up without a store: remove it with \"%s\", then run \"%s\"", labHint("down"), labHint("up --fleet"))
	case up && e.isFleet():
		fmt.Fprintf(d.io.Out, "the fleet lab is already up: agents on a, b and c, the store at %s\n", labStoreURL)
		return false, nil
	case up:
		fmt.Fprintln(d.io.Out, "the lab is already up: hosts a, b and client on 192.0.2.0/24 and 2001:db8::/64")
		return false, nil
	case fleet:
		return true, e.upFleet(ctx, d)
	}
	if _, err := lab.Up(ctx, lab.Config{Prefix: e.prefix, Hosts: labHosts}); err != nil {
		return false, err
	}
	fmt.Fprintln(d.io.Out, "lab up: a 192.0.2.1, b 192.0.2.2, client 192.0.2.3 (and 2001:db8::1, ::2, ::3) on one bridge")
	fmt.Fprintf(d.io.Out, "try: %s; remove it with: %s\n", labHint("exec a -- vip claim 192.0.2.10"), labHint("down"))
	return true, nil
}

func (e *labEnv) down(d *deps) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("removing the lab's namespaces needs root: run it with sudo")
	}
	var errs []error
	// Stop every process left in a lab namespace (agents first get SIGTERM
	// and release their claims), then remove the namespaces.
	for _, h := range append([]lab.HostConfig{{Name: "sw"}}, allLabHosts()...) {
		ns := lab.NetnsName(e.prefix, h.Name)
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			continue // no such namespace
		}
		var pids []int
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		}
		deadline := time.Now().Add(3 * time.Second)
		for _, pid := range pids {
			for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // waiting on another process's exit: no event to wait on
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	errs = append(errs, e.cleanPrograms()...)
	if err := lab.Clean(e.prefix); err != nil {
		errs = append(errs, err)
	}
	for _, h := range allLabHosts() {
		p := agent.PathsFor(e.socket(h.Name))
		for _, f := range []string{p.Socket, p.Lock, p.State, p.Log, p.Key} {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	// The fleet lab's store: its data and its log.
	for _, f := range []string{e.storeDir(), e.storeDir() + ".log"} {
		if err := os.RemoveAll(f); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintln(d.io.Out, "lab down: no namespace, link, agent or file of it is left")
	return nil
}

// cleanPrograms detaches the vip eBPF programs left on the lab hosts'
// interfaces, before their namespaces go. The processes that attached them
// are stopped by now and nothing is pinned, so this finds none unless
// something outlived its process; it is here so that nothing can.
func (e *labEnv) cleanPrograms() []error {
	var errs []error
	for _, h := range allLabHosts() {
		path := filepath.Join("/run/netns", lab.NetnsName(e.prefix, h.Name))
		if _, err := os.Stat(path); err != nil {
			continue // no such namespace
		}
		err := lab.InNetns(path, func() error {
			ifs, err := net.Interfaces()
			if err != nil {
				return err
			}
			var errs []error
			for _, ifi := range ifs {
				if ifi.Flags&net.FlagLoopback == 0 {
					errs = append(errs, bpfresp.Cleanup(ifi.Name))
				}
			}
			return errors.Join(errs...)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("remove vip's eBPF programs from lab host %s: %w", h.Name, err))
		}
	}
	return errs
}

// labCommand returns a command that runs name inside a lab host, with
// VIP_SOCKET pointing at the host's agent.
func (e *labEnv) command(ctx context.Context, host string, name string, args ...string) (*exec.Cmd, error) {
	fleet := e.isFleet()
	hosts := labHosts
	if fleet {
		hosts = allLabHosts()
	}
	if !slices.ContainsFunc(hosts, func(h lab.HostConfig) bool { return h.Name == host }) {
		if fleet {
			return nil, badInput("no lab host %q: the hosts are a, b, c, client and store", host)
		}
		return nil, badInput("no lab host %q: the hosts are a, b and client (and c and store with vip lab up --fleet)", host)
	}
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", lab.NetnsName(e.prefix, host), name}, args...)...)
	cmd.Env = append(os.Environ(), "VIP_SOCKET="+e.socket(host))
	if fleet {
		cmd.Env = append(cmd.Env, storeEnv+"="+labStoreURL)
	}
	return cmd, nil
}

// exitError carries a child's exit code through to vip's.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("the command exited %d", e.code) }

func (e *labEnv) exec(ctx context.Context, d *deps, host string, argv []string) error {
	if up, err := e.exists(ctx); err != nil {
		return err
	} else if !up {
		return fmt.Errorf("the lab is not up: start it with \"%s\"", labHint("up"))
	}
	name := argv[0]
	if name == "vip" {
		if exe, err := os.Executable(); err == nil {
			name = exe // this very vip, whatever PATH holds
		}
	}
	cmd, err := e.command(ctx, host, name, argv[1:]...)
	if err != nil {
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = d.io.In, d.io.Out, d.io.ErrOut
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.ExitCode()}
	}
	return err
}

// labDemo plays the failover in the lab and narrates it.
func (e *labEnv) demo(ctx context.Context, d *deps) error {
	if e.isFleet() {
		return fmt.Errorf("the fleet lab is up, and the demo plays a split brain on the plain one: remove it with \"%s\" first", labHint("down"))
	}
	if _, err := e.up(ctx, d, false); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	sc := &labScript{e: e, d: d, ctx: ctx, exe: exe}
	say, run := sc.say, sc.output
	show := sc.show
	macOf := func(host string) string {
		out, _ := run(host, "cat", "/sys/class/net/eth0/address")
		return strings.TrimSpace(out)
	}
	neigh := func() string {
		out, _ := run("client", "ip", "neigh", "show", labVIP, "dev", "eth0")
		f := strings.Fields(out)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "lladdr" {
				return f[i+1]
			}
		}
		return "(none)"
	}
	waitFor := func(what string, timeout time.Duration, cond func() bool) error {
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				return fmt.Errorf("the demo waited %v for %s", timeout, what)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		return nil
	}
	macA, macB := macOf("a"), macOf("b")

	say("a claims %s (its agent starts on demand)", labVIP)
	if err := show("a", "claim", labVIP); err != nil {
		return fmt.Errorf("a's claim: %w", err)
	}
	say("the client sends to %s: its kernel resolves the address", labVIP)
	_, _ = run("client", "bash", "-c", "echo hello > /dev/udp/"+labVIP+"/9")
	if err := waitFor("the client to resolve "+labVIP, 5*time.Second, func() bool { return neigh() == macA }); err != nil {
		return err
	}
	say("client's neighbour entry: %s is at %s, a's MAC", labVIP, neigh())

	say("b claims %s too: a split brain, which both agents see", labVIP)
	if err := show("b", "claim", labVIP); err != nil {
		return fmt.Errorf("b's claim: %w", err)
	}
	conflict := func(host string) bool {
		out, _ := run(host, exe, "status")
		return strings.Contains(out, "conflict")
	}
	if err := waitFor("both agents to see the competing claimer", 5*time.Second, func() bool { return conflict("a") && conflict("b") }); err != nil {
		return err
	}
	_ = show("a", "status")
	_ = show("b", "status")

	say("a releases %s", labVIP)
	if err := show("a", "release", labVIP); err != nil {
		return fmt.Errorf("a's release: %w", err)
	}
	// The client's entry still names a, whose answers it last heard, and
	// nothing tells b that a let go: b's own window may be over by now.
	// Claiming again re-arms it (the window counts from the latest claim),
	// which is what an operator does on the host that keeps the address.
	say("b claims %s again: its gratuitous window starts again, so every neighbour learns b", labVIP)
	if err := show("b", "claim", labVIP); err != nil {
		return fmt.Errorf("b's claim: %w", err)
	}
	if err := waitFor("the client's entry to move to b", 10*time.Second, func() bool { return neigh() == macB }); err != nil {
		return err
	}
	say("client's neighbour entry: %s is at %s, b's MAC: b's gratuitous ARP moved it", labVIP, neigh())

	say("waiting until b has seen no competing claimer for 10 s (vip status --check)")
	if err := waitFor("a clean failover", 20*time.Second, func() bool {
		_, err := run("b", exe, "status", "--check")
		return err == nil
	}); err != nil {
		return err
	}
	_ = show("b", "status")
	say(fmt.Sprintf("failover clean. Explore with: %s; remove it all with: %s", labHint("exec b -- vip events"), labHint("down")))
	return nil
}

// labHint is how to run "vip lab ARGS" the way this vip was run: by the
// path typed (./vip from a checkout, vip from PATH), and through sudo only
// when this run came through sudo (SUDO_USER), not when root typed it.
func labHint(args string) string {
	self := "vip"
	if a0 := os.Args[0]; strings.Contains(a0, "/") && filepath.Base(a0) == "vip" {
		self = a0
	}
	if os.Getenv("SUDO_USER") != "" {
		self = "sudo " + self
	}
	return self + " lab " + args
}

// labScript runs a demo's steps in the lab's hosts and narrates them.
type labScript struct {
	e   *labEnv
	d   *deps
	ctx context.Context
	exe string // this vip
}

func (s *labScript) say(format string, args ...any) {
	fmt.Fprintf(s.d.io.Out, "== "+format+"\n", args...)
}

// output runs name in host and returns what it printed.
func (s *labScript) output(host, name string, args ...string) (string, error) {
	cmd, err := s.e.command(s.ctx, host, name, args...)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// show runs vip in host and prints its output, each line after the host's
// name.
func (s *labScript) show(host string, args ...string) error {
	out, err := s.output(host, s.exe, args...)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		fmt.Fprintf(s.d.io.Out, "   %s> %s\n", host, line)
	}
	if err != nil {
		return fmt.Errorf("vip %s on %s: %w", strings.Join(args, " "), host, err)
	}
	return nil
}
