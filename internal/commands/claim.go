package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/assign"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/tui"
)

// claimOptions are the flags and arguments of vip claim.
type claimOptions struct {
	Addrs        []string
	File         string
	Interface    string
	Group        string
	Foreground   bool
	NoAutostart  bool
	JSON         bool
	Window       time.Duration
	Interval     time.Duration
	Frames       string
	Rate         float64
	RefreshEvery time.Duration
	Assign       bool
	OnConflict   string
	ProbeEvery   time.Duration
	Standby      bool
	TakeOver     bool
	// Reason is why, for the history.
	Reason string
	// Force, with TakeOver, takes the addresses to this node even while
	// it is cordoned.
	Force     bool
	Capture   captureOptions
	Responder responderOptions
	Metrics   metricsOptions
	// given holds the burst and probe flags the user gave (shapeFlags):
	// the request carries those alone, so that the agent decides every
	// default, and an explicit --window 0 (a single round) or
	// --probe-every 0 (off) is told from the default.
	given map[string]bool
}

// shapeFlags are the claim's flags whose defaults the agent decides.
var shapeFlags = []string{"window", "interval", "frames", "refresh-every", "probe-every"}

func newClaimCmd(d *deps, runF func(context.Context, *claimOptions) error) *cobra.Command {
	o := &claimOptions{}
	c := &cobra.Command{
		Use:   "claim ADDR... [-i IFACE] [-f FILE]",
		Short: "Make this host the owner of IPv4 or IPv6 addresses on a segment",
		Long: `Claim makes this host the owner of each ADDR on the segment of IFACE: it
answers ARP requests and neighbor solicitations for ADDR with the interface's
MAC address, RFC 5227 probes and duplicate address detection included, and
sends a burst of gratuitous advertisements so that switches and neighbours
learn the new owner.

The burst sends its first round at once, then one round every --interval for
--window counted from the latest claim or refresh. Each IPv4 round is an ARP
announcement (request form) and a gratuitous ARP reply; each IPv6 round an
unsolicited neighbor advertisement to all nodes with the override flag.
Claiming an address already held is a refresh: it re-arms the window.

The claim is held by the vip agent, so it outlives this command: claim returns
once every address is live (answering, first gratuitous round sent) and prints
one line per address. When no agent answers on the socket, claim starts one in
the background (it exits once it holds nothing), unless --no-autostart.

With --foreground, vip holds the addresses in this process instead, until
SIGINT or SIGTERM, then stops answering and exits 0.

Without -i, vip picks the interface whose connected route holds ADDR, and
fails when none or several do.

When the agent is guarded by a store (vip agent --store), an address is live
only once its key in the store is this node's. An address another node holds
is not applied, and claim exits 5 naming the node: move it here with vip move,
or take it with --take-over (a move to this node, which waits until the owner
has stopped answering). --standby instead adds this node to the address's
standbys, to take it when its owner's lease expires (dead or cut off from the
store); the set lasts through restarts, moves and takeovers (vip standby).`,
		Example: `  sudo vip claim 192.0.2.10 -i eth0
  sudo vip claim 192.0.2.10 2001:db8::10 --assign
  sudo vip claim -f vips.txt -i eth0
  sudo vip claim 192.0.2.10 -i eth0 --foreground --log-format json
  sudo vip claim 192.0.2.10 --standby
  sudo vip claim 192.0.2.10 2001:db8::10 --group web
  sudo vip claim 192.0.2.10 --take-over`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 && o.File == "" {
				return badInput("claim needs at least one address, like: vip claim 192.0.2.10 -i eth0")
			}
			return nil
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, args []string) error {
			o.Addrs = args
			for _, name := range shapeFlags {
				if c.Flags().Changed(name) {
					if o.given == nil {
						o.given = map[string]bool{}
					}
					o.given[name] = true
				}
			}
			o.Metrics.parsed(c)
			o.Responder.parsed(c)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runClaim(c.Context(), d, o)
		},
	}
	f := c.Flags()
	f.StringVarP(&o.Interface, "interface", "i", "", "interface to claim on (default: the one whose connected route holds ADDR)")
	_ = c.RegisterFlagCompletionFunc("interface", interfaceCompletion(net.Interfaces))
	f.StringVarP(&o.File, "file", "f", "", "read addresses from FILE, one or more a line, # for comments, a line [NAME] starting the addresses of group NAME (- for standard input)")
	addGroupFlag(c, &o.Group, "make the addresses one group: claimed whole or not at all, moved, taken over and released together")
	f.BoolVar(&o.Foreground, "foreground", false, "hold the addresses in this process until SIGINT or SIGTERM, without the agent")
	addNoAutostartFlag(c, &o.NoAutostart)
	f.BoolVar(&o.JSON, "json", false, "print the claims as JSON")
	f.DurationVar(&o.Window, "window", announce.DefaultWindow, "how long gratuitous rounds go on after the latest claim or refresh (0: a single round)")
	f.DurationVar(&o.Interval, "interval", announce.DefaultInterval, "time between two gratuitous rounds of an address (above Linux's 1 s neighbour locktime)")
	f.StringVar(&o.Frames, "frames", announce.DefaultFrameKinds.String(), "gratuitous frame kinds per round: arp-request, arp-reply, na, na-routers")
	f.Float64Var(&o.Rate, "rate", announce.DefaultRate, "cap on gratuitous frames per second, all addresses together (--foreground, or an agent claim starts)")
	f.DurationVar(&o.RefreshEvery, "refresh-every", 0, "re-arm the window on this period, for switches that forget faster than hosts (0: off)")
	f.BoolVar(&o.Assign, "assign", false, "also add the address to the interface (/32 or /128) so local services receive its traffic; removed at release")
	f.StringVar(&o.OnConflict, "on-conflict", string(announce.PolicyDefend), "when another MAC answers for the address: defend (re-arm the burst, at most every 10s), warn, or yield (release it)")
	f.DurationVar(&o.ProbeEvery, "probe-every", announce.DefaultProbeEvery, "probe for silent competing claimers on this period (0: off)")
	f.BoolVar(&o.Standby, "standby", false, "stand by for the addresses: take them when their owner's lease expires (an agent with --store)")
	addReasonFlag(c, &o.Reason, "why the addresses are claimed (an agent with --store)")
	f.BoolVar(&o.TakeOver, "take-over", false, "move the addresses here from the node that holds them, once it has stopped answering (an agent with --store)")
	f.BoolVar(&o.Force, "force", false, "with --take-over: take the addresses here even while this node is cordoned (vip cordon)")
	o.Capture.addFlags(c, " (--foreground)")
	o.Responder.addFlags(c, " (--foreground)")
	o.Metrics.addFlags(c, " (--foreground)")
	_ = c.RegisterFlagCompletionFunc("on-conflict", cobra.FixedCompletions([]string{"defend", "warn", "yield"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("frames", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return announce.FrameNames(), cobra.ShellCompDirectiveNoFileComp
	})
	return c
}

// requests builds the API requests the flags describe: one for the
// addresses given and those of -f before any [NAME] line, then one for
// each [NAME] section of -f, the group NAME.
func (o *claimOptions) requests(stdin io.Reader) ([]api.ClaimRequest, error) {
	addrs := append([]string(nil), o.Addrs...)
	var sections []addrSection
	if o.File != "" {
		more, secs, err := readAddrFile(o.File, stdin)
		if err != nil {
			return nil, err
		}
		addrs, sections = append(addrs, more...), secs
	}
	if len(sections) > 0 && o.Group != "" {
		return nil, badInput("give --group NAME or [NAME] sections in %s, not both", o.File)
	}
	var out []api.ClaimRequest
	if len(addrs) > 0 {
		r, err := o.requestOf(addrs, o.Group)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	for _, sec := range sections {
		r, err := o.requestOf(sec.addrs, sec.group)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// requestOf is the request for addrs, in group (or none).
func (o *claimOptions) requestOf(addrs []string, group string) (api.ClaimRequest, error) {
	if o.Rate <= 0 {
		return api.ClaimRequest{}, badInput("--rate %v must be positive: give frames per second, such as %d", o.Rate, announce.DefaultRate)
	}
	if o.Standby && o.TakeOver {
		return api.ClaimRequest{}, badInput("--standby waits for the owner to go, --take-over moves the addresses here now: give one of them")
	}
	if o.Force && !o.TakeOver {
		return api.ClaimRequest{}, badInput("--force goes with --take-over, to take addresses to a cordoned node: give both, or neither")
	}
	if err := checkReason(o.Reason); err != nil {
		return api.ClaimRequest{}, err
	}
	if group != "" {
		if err := api.CheckGroup(group); err != nil {
			return api.ClaimRequest{}, &inputError{err: err}
		}
		if len(addrs) > maxGroupAddrs {
			return api.ClaimRequest{}, badInput("group %s has %d addresses: a group holds at most %d", group, len(addrs), maxGroupAddrs)
		}
	}
	r := api.ClaimRequest{
		Reason:     o.Reason,
		By:         store.LocalUser(),
		Addrs:      addrs,
		Interface:  o.Interface,
		Assign:     o.Assign,
		OnConflict: o.OnConflict,
		Standby:    o.Standby,
		TakeOver:   o.TakeOver,
		Force:      o.Force,
		Group:      group,
	}
	given := func(name string, v time.Duration) *api.Duration {
		if !o.given[name] {
			return nil
		}
		d := api.Duration(v)
		return &d
	}
	r.Window, r.Interval = given("window", o.Window), given("interval", o.Interval)
	r.RefreshEvery, r.ProbeEvery = given("refresh-every", o.RefreshEvery), given("probe-every", o.ProbeEvery)
	if o.given["frames"] {
		r.Frames = o.Frames
	}
	return r, nil
}

func runClaim(ctx context.Context, d *deps, o *claimOptions) error {
	reqs, err := o.requests(d.io.In)
	if err != nil {
		return err
	}
	// Syntax first, here, so a typo never starts an agent.
	for _, req := range reqs {
		if _, err := netcheck.ParseAddrs(req.Addrs); err != nil {
			return err
		}
	}
	req := reqs[0]
	if len(reqs) > 1 {
		if o.Foreground {
			return badInput("%s has [group] sections, which the agent claims (a group each): drop --foreground", o.File)
		}
		return claimEach(ctx, d, o, reqs)
	}
	if o.Foreground {
		switch {
		case o.Standby || o.TakeOver:
			return badInput("--standby and --take-over need an agent guarded by a store (vip agent --store): drop --foreground")
		case os.Getenv(storeEnv) != "":
			return guardedForeground()
		}
		return claimForeground(ctx, d, o, req)
	}
	if o.Capture.given() {
		// The agent's capture is the agent's: set it where it starts.
		return badInput("--filter and --watch-all shape the capture of a --foreground claim; for claims held by the agent, give them to vip agent")
	}
	if o.Responder.given {
		return badInput("--responder and --responder-hook choose what answers for a --foreground claim; for claims held by the agent, give them to vip agent")
	}
	if o.Metrics.given {
		return badInput("--metrics serves the metrics of a --foreground claim; for claims held by the agent, give it to vip agent")
	}
	resp, err := claimViaAgent(ctx, d, o, req)
	if err != nil {
		return err
	}
	if err := printClaims(d, o.JSON, resp); err != nil {
		return err
	}
	noteAssigned(d, req.Assign, resp.Claims)
	return refusedError(len(req.Addrs), resp.Refused)
}

// claimEach claims reqs (the groups of an address file) one request after
// another, each group whole or not at all, and prints them as one claim.
func claimEach(ctx context.Context, d *deps, o *claimOptions, reqs []api.ClaimRequest) error {
	var (
		all   api.ClaimResponse
		asked int
	)
	for _, req := range reqs {
		resp, err := claimViaAgent(ctx, d, o, req)
		if err != nil {
			if len(all.Claims) > 0 {
				// What was claimed before stays, and says so.
				_ = printClaims(d, o.JSON, all)
			}
			return err
		}
		all.Claims = append(all.Claims, resp.Claims...)
		all.Refused = append(all.Refused, resp.Refused...)
		asked += len(req.Addrs)
	}
	if err := printClaims(d, o.JSON, all); err != nil {
		return err
	}
	// Once for all: each request's would name every request's claims.
	noteAssigned(d, o.Assign, all.Claims)
	return refusedError(asked, all.Refused)
}

// refusedError is the error of a claim that the agent took only in part,
// naming how many were refused (each was printed with its reason): exit 5
// when every refusal is an address another node holds, else exit 1.
func refusedError(asked int, refused []api.Refused) error {
	if len(refused) == 0 {
		return nil
	}
	held := 0
	for _, r := range refused {
		if r.Code == api.CodeHeld {
			held++
		}
	}
	switch {
	case held == len(refused) && held >= asked:
		return fmt.Errorf("every address asked for is %w: move each here with vip move as named above, or use --take-over", errHeld)
	case held == len(refused):
		return fmt.Errorf("%d of %d addresses are %w, and the others claimed: move each here with vip move as named above, or use --take-over", held, asked, errHeld)
	}
	return fmt.Errorf("%d of %d addresses were refused, and the others claimed: check each reason above", len(refused), asked)
}

func claimViaAgent(ctx context.Context, d *deps, o *claimOptions, req api.ClaimRequest) (api.ClaimResponse, error) {
	c := d.client()
	var resp api.ClaimResponse
	err := d.withAgent(ctx, o.NoAutostart, o.Rate, func() (err error) {
		resp, err = c.Claim(ctx, req)
		return err
	})
	return resp, err
}

func claimForeground(ctx context.Context, d *deps, o *claimOptions, req api.ClaimRequest) error {
	plan, err := agent.PlanClaim(req, d.sys)
	if err != nil {
		return err
	}
	if err := o.Metrics.check(); err != nil {
		return err
	}
	if err := o.Capture.check(); err != nil {
		return err
	}
	responder, err := o.Responder.config()
	if err != nil {
		return err
	}
	// In a terminal the claim shows the live view, and the logs go to a
	// file so as not to tear it; elsewhere they go to standard error.
	view := isTerminal(d.io.Out) && !o.JSON
	var logPath string
	errOut := d.io.ErrOut
	if view {
		f, err := os.CreateTemp("", "vip-claim-*.log")
		if err != nil {
			return fmt.Errorf("create a log file for the live view: %w", err)
		}
		defer f.Close()
		logPath = f.Name()
		d.io.ErrOut = f
	}
	log, err := d.logger()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg := announce.EngineConfig{Burst: announce.SchedulerConfig{Rate: o.Rate}, Log: log}
	responder.Configure(&cfg)
	if o.Assign {
		a, err := assign.New(nil)
		if err != nil {
			return fmt.Errorf("open netlink to add addresses: %w", err)
		}
		defer a.Close()
		cfg.Assigner = a
	}
	rt, err := agent.Start(cfg, agent.SnifferConfig{Filter: o.Capture.Filter, WatchAll: o.Capture.WatchAll}, log)
	if err != nil {
		return fmt.Errorf("start the claim's engine: %w", err)
	}
	eng, sniffer, stopEngine := rt.Engine, rt.Sniffer, rt.Stop
	if o.Metrics.Addr != "" {
		stopMetrics, err := o.Metrics.serve(rt, log)
		if err != nil {
			_ = stopEngine()
			return err
		}
		defer stopMetrics()
	}
	st, err := eng.Claim(ctx, plan.Requests, plan.Options)
	if err != nil {
		// A foreground claim is all or nothing: it has no agent to keep
		// the part that went through, nor a later command to report to.
		_ = stopEngine()
		if ctx.Err() != nil {
			return nil // interrupted before the claim went live: nothing is held
		}
		return err
	}
	if view {
		err := showForeground(ctx, d, eng, sniffer, log)
		if rerr := stopEngine(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("release on exit: %w", rerr))
		}
		fmt.Fprintf(errOut, "vip: released; the claim's log is in %s\n", logPath)
		return err
	}
	claims := agent.ClaimsFromStatus(st, time.Now())
	if err := printClaims(d, o.JSON, api.ClaimResponse{Claims: claims}); err != nil {
		_ = stopEngine()
		return err
	}
	noteAssigned(d, req.Assign, claims)
	<-ctx.Done()
	if err := stopEngine(); err != nil {
		return fmt.Errorf("release on exit: %w", err)
	}
	return nil
}

// showForeground shows the live view of a foreground claim until the
// operator quits it or ctx ends. The view talks to the engine through the
// agent's own API, served on a private socket for the life of the view.
func showForeground(ctx context.Context, d *deps, eng *announce.Engine, sniffer *agent.Sniffer, log *slog.Logger) error {
	dir, err := os.MkdirTemp("", "vip-claim-")
	if err != nil {
		return fmt.Errorf("make a private socket for the live view: %w", err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "vip.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("make a private socket for the live view: %w", err)
	}
	srv := agent.NewServer(agent.ServerConfig{
		Engine: eng, Watcher: sniffer, Sys: d.sys, Allow: agent.SelfAllow(), Log: log,
		Info: api.Agent{PID: os.Getpid(), Version: versionString(), Started: time.Now(), Socket: sock},
	})
	sctx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	defer func() {
		stopServe()
		<-served
	}()
	in := d.io.In
	if !isTerminal(in) {
		in = nil
	}
	return tui.Run(ctx, tui.ClientBackend(api.NewClient(sock)), tui.Options{Socket: "this claim (foreground)", In: in, Out: d.io.Out})
}

// noteAssigned says which addresses --assign found already on their
// interface: vip leaves those there at release. Only a claim made now
// tells: a standby adds nothing until it takes its address, and a refresh
// adds nothing either (a claim made without --assign stays so), so for
// those not being Assigned says nothing of the interface.
func noteAssigned(d *deps, assign bool, claims []api.Claim) {
	if !assign {
		return
	}
	for _, c := range claims {
		if !c.Assigned && c.State != api.StateStandby && c.RefreshedAt.Equal(c.ClaimedAt) {
			fmt.Fprintf(d.io.ErrOut, "vip: %s was already on %s, so vip did not add it and will not remove it\n", c.Addr, c.Interface)
		}
	}
}

func printClaims(d *deps, asJSON bool, resp api.ClaimResponse) error {
	if asJSON {
		return writeJSON(d, resp)
	}
	w := tabwriter.NewWriter(d.io.Out, 0, 4, 2, ' ', 0)
	for _, r := range resp.Refused {
		// The agent's sentence names the node, since when and the ways
		// on; the row beside the claimed ones says which address.
		fmt.Fprintf(d.io.ErrOut, "vip: refused %s: %s\n", r.Addr, r.Error)
		if r.Code == api.CodeHeld {
			since := ""
			if !r.ClaimedAt.IsZero() {
				since = "since " + r.ClaimedAt.Local().Format(time.DateTime)
			}
			fmt.Fprintf(w, "held\t%s\tby %s\t%s\n", r.Addr, r.HeldBy, since)
		}
	}
	for _, c := range resp.Claims {
		verb := "claimed"
		switch {
		case c.State == api.StateStandby:
			verb = "standby"
		case !c.RefreshedAt.Equal(c.ClaimedAt):
			verb = "refreshed"
		}
		note := ""
		if c.Note != "" {
			note = "\t(" + c.Note + ")"
		}
		// A standby answers nothing yet: it has no MAC to name.
		as := "as " + c.MAC
		if c.MAC == "" {
			as = "until its owner's lease expires"
		}
		fmt.Fprintf(w, "%s\t%s\ton %s\t%s%s\n", verb, c.Addr, c.Interface, as, note)
	}
	return w.Flush()
}
