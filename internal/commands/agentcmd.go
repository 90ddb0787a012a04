package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/announce/bpfresp"
	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/api"
)

type agentOptions struct {
	Group       string
	Clean       bool
	Autostarted bool
	Rate        float64
	LogFile     string
	CPUProfile  string
	Capture     captureOptions
	Responder   responderOptions
	Metrics     metricsOptions
	Store       agentStoreOptions
	Hooks       hookOptions
	// OnStop is what a guarded agent does with its claims when it stops.
	OnStop string
	// Linger is how long a released address's traffic is still counted.
	Linger time.Duration
}

// newAgentCmd builds vip agent; runF, when set, runs instead of the agent,
// so tests check the flags apart.
func newAgentCmd(d *deps, runF func(context.Context, *agentOptions) error) *cobra.Command {
	o := &agentOptions{}
	c := &cobra.Command{
		Use:   "agent",
		Short: "Hold claims for the other commands, serving them on a unix socket",
		Long: `Agent holds the claims that vip claim, refresh and release manage, serves
them an HTTP API with JSON on a unix socket (--socket, default ` + api.DefaultSocket + `),
and follows interface changes: a claim waits while its interface is down or
gone, and its burst re-arms when the interface returns or changes MAC.

The agent records its claims in a state file beside the socket. After a crash
a new agent re-adopts them with a fresh burst; with --clean it only removes
what the crashed agent left (addresses it added, the state file) and exits.

SIGINT or SIGTERM releases every claim and removes the addresses the agent
added; a guarded agent (below) keeps its claims for a restart instead, unless
--on-stop hand-over. The socket is for root alone unless --group opens it to
one group.

With --store (or $VIP_STORE), every claim is guarded by an etcd store: the
agent holds one lease there, a claim is live only once its key is this
node's (--node, default the host name), and an agent that cannot renew its
lease stops answering for every guarded claim before the lease can expire
(the claim's state is then fenced). See vip claim --standby and --take-over,
vip move and vip fleet.

A guarded agent that stops (SIGTERM, as systemctl restart sends) keeps its
claims for a restart by default (--on-stop keep): it falls silent at once
but leaves its keys in the store and its claims in the state file, so that
an agent started again within the lease's TTL answers again with a fresh
burst and no standby takes over; one that stays away longer has its
addresses taken by their standbys when the lease expires, as after a crash.
--on-stop hand-over gives every address to its standby at once instead, for
a host about to be powered off.

With --on-change PROGRAM, the agent runs PROGRAM on each change of state of
this node's claims (became owner, released, fenced, lost, taken over as a
standby, moved away or here), with the address, the old and new state, this
node, the node taking over and the reason in VIP_* environment variables.
The runs never delay the agent: one at a time per address in the order of
the changes, each killed with its process group after --on-change-timeout;
a failing one is logged with its output and reported as a hook-failed
event, never retried.`,
		Example: `  sudo vip agent
  sudo vip agent --socket /run/vip/test.sock --group vip
  sudo vip agent --store etcd://192.0.2.5:2379 --node a
  sudo vip agent --on-change /etc/vip/on-change.sh --on-change-timeout 30s
  sudo vip agent --store etcds://192.0.2.5:2379 --store-ca ca.pem --store-cert a.pem --store-key a-key.pem`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, _ []string) error {
			o.Metrics.parsed(c)
			o.Responder.parsed(c)
			o.Store.parsed(c)
			o.Hooks.parsed(c)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runAgent(c.Context(), d, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Group, "group", "", "let members of GROUP use the agent besides root")
	f.BoolVar(&o.Clean, "clean", false, "remove what a crashed agent left behind and exit, without re-adopting its claims")
	f.Float64Var(&o.Rate, "rate", announce.DefaultRate, "cap on gratuitous frames per second, all addresses together")
	f.StringVar(&o.LogFile, "log-file", "", "append logs to this file instead of standard error")
	o.Capture.addFlags(c, "")
	o.Responder.addFlags(c, "")
	o.Metrics.addFlags(c, "")
	o.Store.addFlags(c)
	o.Hooks.addFlags(c)
	f.StringVar(&o.OnStop, "on-stop", string(agent.OnStopKeep), "what a guarded agent does with its claims when it stops: keep (for a restart within the lease's TTL) or hand-over (to the standbys at once)")
	_ = c.RegisterFlagCompletionFunc("on-stop", cobra.FixedCompletions([]string{string(agent.OnStopKeep), string(agent.OnStopHandOver)}, cobra.ShellCompDirectiveNoFileComp))
	f.DurationVar(&o.Linger, "linger", agent.DefaultLinger, "how long the eBPF responder keeps counting the traffic of an address after releasing it (what vip drain waits on), from 0 to 1h")
	_ = c.RegisterFlagCompletionFunc("linger", cobra.NoFileCompletions)
	f.BoolVar(&o.Autostarted, "autostarted", false, "exit once nothing is held and no client is attached")
	_ = f.MarkHidden("autostarted")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile (pprof) to this file, for performance work")
	_ = f.MarkHidden("cpuprofile")
	return c
}

func runAgent(ctx context.Context, d *deps, o *agentOptions) error {
	if o.Rate <= 0 {
		return badInput("--rate %v must be positive: give frames per second, such as %d", o.Rate, announce.DefaultRate)
	}
	if err := o.Metrics.check(); err != nil {
		return err
	}
	if err := o.Capture.check(); err != nil {
		return err
	}
	if err := o.Store.check(); err != nil {
		return err
	}
	if err := o.Hooks.check(); err != nil {
		return err
	}
	onStop, err := agent.ParseOnStop(o.OnStop)
	if err != nil {
		return &inputError{err: err}
	}
	responder, err := o.Responder.config()
	if err != nil {
		return err
	}
	if o.Linger < 0 || o.Linger > bpfresp.MaxLinger {
		return badInput("--linger %v: give how long a released address's traffic is counted, from 0 (not at all) to %v", o.Linger, bpfresp.MaxLinger)
	}
	responder.Linger = o.Linger
	if o.LogFile != "" {
		f, err := os.OpenFile(o.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("open the log file: %w", err)
		}
		defer f.Close()
		d.io.ErrOut = f
	}
	log, err := d.logger()
	if err != nil {
		return err
	}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return fmt.Errorf("create the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return agent.Run(ctx, agent.Config{
		Socket:      d.socket,
		Group:       o.Group,
		Clean:       o.Clean,
		Autostarted: o.Autostarted,
		Rate:        o.Rate,
		Filter:      o.Capture.Filter,
		WatchAll:    o.Capture.WatchAll,
		Responder:   responder,
		Metrics:     o.Metrics.config(),
		Store:       o.Store.config(),
		OnStop:      onStop,
		Hooks:       o.Hooks.config(),
		Version:     versionString(),
		Sys:         d.sys,
		Log:         log,
	})
}

// addNoAutostartFlag adds --no-autostart, for the commands that start an
// agent when none answers (withAgent).
func addNoAutostartFlag(c *cobra.Command, no *bool) {
	c.Flags().BoolVar(no, "no-autostart", false, "fail (exit 4) rather than start an agent when none answers")
}

// withAgent runs call against the agent; when no agent answers it starts
// one (unless noAutostart), sending at rate, and runs call once more. It is
// the one way a command starts an agent on demand: claim and watch use it.
func (d *deps) withAgent(ctx context.Context, noAutostart bool, rate float64, call func() error) error {
	err := call()
	if !errors.Is(err, api.ErrUnreachable) || noAutostart {
		return err
	}
	if err := d.startAgent(ctx, rate); err != nil {
		return err
	}
	return call()
}

// agentStartTimeout bounds how long claim waits for an agent it started.
const agentStartTimeout = 10 * time.Second

// startAgent starts an agent in the background, in its own session with
// its logs in a file beside the socket, and waits until it answers.
func (d *deps) startAgent(ctx context.Context, rate float64) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the vip binary to start an agent: %w", err)
	}
	paths := agent.PathsFor(d.socket)
	if err := os.MkdirAll(filepath.Dir(paths.Log), 0o755); err != nil {
		return fmt.Errorf("start an agent: %w", err)
	}
	args := []string{"agent", "--autostarted", "--socket", d.socket, "--log-file", paths.Log,
		"--log-format", d.logFormat, "--log-level", d.logLevel, "--rate", fmt.Sprint(rate)}
	cmd := exec.Command(exe, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start an agent: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.NewTimer(agentStartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	c := d.client()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Status(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if !errors.Is(err, api.ErrUnreachable) {
			return fmt.Errorf("the agent started on %s does not answer: %w", d.socket, err)
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the agent started on %s exited (%v): see %s", d.socket, err, paths.Log)
		case <-deadline.C:
			return fmt.Errorf("the agent started on %s did not answer within %v: see %s", d.socket, agentStartTimeout, paths.Log)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
