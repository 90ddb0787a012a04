package cmd

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/netcheck"
)

// claimOptions are the flags and arguments of vip claim.
type claimOptions struct {
	Addrs        []string
	Interface    string
	Foreground   bool
	Window       time.Duration
	Interval     time.Duration
	Frames       string
	Rate         float64
	RefreshEvery time.Duration
}

// minInterval keeps a mistyped --interval from flooding the segment.
const minInterval = 10 * time.Millisecond

func newClaimCmd(d *deps, runF func(context.Context, *claimOptions) error) *cobra.Command {
	o := &claimOptions{}
	c := &cobra.Command{
		Use:   "claim ADDR... [-i IFACE] --foreground",
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

Without -i, vip picks the interface whose connected route holds ADDR, and
fails when none or several do.

With --foreground, vip holds the addresses until it gets SIGINT or SIGTERM,
then stops answering and exits 0.`,
		Example: `  sudo vip claim 192.0.2.10 -i eth0 --foreground
  sudo vip claim 192.0.2.10 2001:db8::10 --foreground --log-format json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput("claim needs at least one address, like: vip claim 192.0.2.10 -i eth0 --foreground")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			o.Addrs = args
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runClaim(c.Context(), d, o)
		},
	}
	f := c.Flags()
	f.StringVarP(&o.Interface, "interface", "i", "", "interface to claim on (default: the one whose connected route holds ADDR)")
	f.BoolVar(&o.Foreground, "foreground", false, "hold the addresses in this process until SIGINT or SIGTERM")
	f.DurationVar(&o.Window, "window", announce.DefaultWindow, "how long gratuitous rounds go on after the latest claim or refresh (0: a single round)")
	f.DurationVar(&o.Interval, "interval", announce.DefaultInterval, "time between two gratuitous rounds of an address (above Linux's 1 s neighbour locktime)")
	f.StringVar(&o.Frames, "frames", announce.DefaultFrames.String(), "gratuitous frame kinds per round: arp-request, arp-reply, na, na-routers")
	f.Float64Var(&o.Rate, "rate", announce.DefaultRate, "cap on gratuitous frames per second, all addresses together")
	f.DurationVar(&o.RefreshEvery, "refresh-every", 0, "re-arm every window on this period, for switches that forget faster than hosts (0: off)")
	return c
}

// claimPlan is a validated claim: what the engine is asked to do.
type claimPlan struct {
	requests []announce.Request
	cfg      announce.EngineConfig
}

// plan validates o against the host's interfaces without changing anything.
func (o *claimOptions) plan(sys netcheck.System) (claimPlan, error) {
	var p claimPlan
	addrs, err := netcheck.ParseAddrs(o.Addrs)
	if err != nil {
		return p, err
	}
	frames, err := announce.ParseFrames(o.Frames)
	if err != nil {
		return p, badInput("--frames: %v", err)
	}
	switch {
	case o.Window < 0:
		return p, badInput("--window %v is negative: give a duration such as 5s, or 0 for a single round", o.Window)
	case o.Interval < minInterval:
		return p, badInput("--interval %v is too short: give at least %v (the default %v stays above Linux's 1 s neighbour locktime)", o.Interval, minInterval, announce.DefaultInterval)
	case o.Rate <= 0:
		return p, badInput("--rate %v must be positive: give frames per second, such as %d", o.Rate, announce.DefaultRate)
	case o.RefreshEvery < 0:
		return p, badInput("--refresh-every %v is negative: give a period such as 30s, or 0 to turn it off", o.RefreshEvery)
	case o.RefreshEvery > 0 && o.RefreshEvery < time.Second:
		return p, badInput("--refresh-every %v is too short: give at least 1s", o.RefreshEvery)
	}
	links := map[string]netcheck.Link{}
	for _, a := range addrs {
		if a.Is4() && !frames.IPv4() {
			return p, badInput("--frames %s has no ARP kind, so %s would never be announced: add arp-request or arp-reply", frames, a)
		}
		if a.Is6() && !frames.IPv6() {
			return p, badInput("--frames %s has no NA kind, so %s would never be announced: add na or na-routers", frames, a)
		}
		name := o.Interface
		if name == "" {
			if name, err = netcheck.PickInterface(sys, a); err != nil {
				return p, err
			}
		}
		l, ok := links[name]
		if !ok {
			if l, err = netcheck.CheckInterface(sys, name); err != nil {
				return p, err
			}
			links[name] = l
		}
		if err := netcheck.CheckAddrOnLink(a, l); err != nil {
			return p, err
		}
		p.requests = append(p.requests, announce.Request{Addr: a, Interface: name})
	}
	window := o.Window
	if window == 0 {
		window = time.Nanosecond // shorter than any interval: one round
	}
	p.cfg = announce.EngineConfig{
		Burst:        announce.SchedulerConfig{Window: window, Interval: o.Interval, Rate: o.Rate},
		Frames:       frames,
		RefreshEvery: o.RefreshEvery,
	}
	return p, nil
}

func runClaim(ctx context.Context, d *deps, o *claimOptions) error {
	if !o.Foreground {
		return badInput("pass --foreground: claims that outlive the command need the vip agent, which this version does not have yet")
	}
	p, err := o.plan(d.sys)
	if err != nil {
		return err
	}
	log, err := d.logger()
	if err != nil {
		return err
	}
	p.cfg.Log = log
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return holdForeground(ctx, d, p)
}

// holdForeground runs an engine for the plan until ctx ends, then releases
// every claim.
func holdForeground(ctx context.Context, d *deps, p claimPlan) error {
	eng := announce.NewEngine(p.cfg)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	stopEngine := func() error {
		cancel()
		return <-done
	}
	st, err := eng.Claim(ctx, p.requests)
	if err != nil {
		stopEngine()
		if ctx.Err() != nil {
			return nil // interrupted before the claim went live: nothing is held
		}
		return err
	}
	printClaims(d, st)
	<-ctx.Done()
	if err := stopEngine(); err != nil {
		return fmt.Errorf("release on exit: %w", err)
	}
	return nil
}

func printClaims(d *deps, st []announce.Status) {
	w := tabwriter.NewWriter(d.io.Out, 0, 4, 2, ' ', 0)
	for _, s := range st {
		fmt.Fprintf(w, "claimed\t%s\ton %s\tas %s\n", s.Addr, s.Interface, s.MAC)
	}
	w.Flush()
}
