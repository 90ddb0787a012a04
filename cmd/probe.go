package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/sniff"
)

// probeOptions are the flags and arguments of vip probe.
type probeOptions struct {
	Addrs     []string
	Interface string
	Count     int
	Wait      time.Duration
	JSON      bool
}

// ProbeResult lists who answered for one address.
type ProbeResult struct {
	Addr      string        `json:"addr"`
	Interface string        `json:"interface"`
	Claimers  []api.Claimer `json:"claimers"`
}

// newProbeCmd builds vip probe; runF, when set, runs instead of the probes,
// so tests check the flags apart.
func newProbeCmd(d *deps, runF func(context.Context, *probeOptions) error) *cobra.Command {
	o := &probeOptions{}
	c := &cobra.Command{
		Use:   "probe ADDR... [-i IFACE]",
		Short: "Ask the segment who answers for addresses, without claiming them",
		Long: `Probe sends RFC 5227 ARP probes (from 0.0.0.0) and duplicate-address-detection
neighbor solicitations (from ::) for each ADDR, as vip does for its claims, and
lists every MAC that answers. It claims nothing and needs no agent.

It exits 3 when anyone answers, so a script can check that an address is free
before it claims it, and that the old owner is silent after a failover.`,
		Example: `  sudo vip probe 192.0.2.10 -i eth0
  sudo vip probe 192.0.2.10 2001:db8::10 --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput("probe needs at least one address, like: vip probe 192.0.2.10 -i eth0")
			}
			return nil
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, args []string) error {
			o.Addrs = args
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runProbe(c.Context(), d, o)
		},
	}
	f := c.Flags()
	f.StringVarP(&o.Interface, "interface", "i", "", "interface to probe on (default: the one whose connected route holds ADDR)")
	_ = c.RegisterFlagCompletionFunc("interface", interfaceCompletion(net.Interfaces))
	f.IntVar(&o.Count, "count", 2, "probes per address")
	f.DurationVar(&o.Wait, "wait", time.Second, "how long to listen for answers after the last probe")
	f.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	return c
}

// probeSpacing separates the probes of one address.
const probeSpacing = 250 * time.Millisecond

func runProbe(ctx context.Context, d *deps, o *probeOptions) error {
	if o.Count < 1 || o.Count > 10 {
		return badInput("--count %d: give 1 to 10 probes", o.Count)
	}
	if o.Wait < 0 || o.Wait > time.Minute {
		return badInput("--wait %v: give a duration up to 1m", o.Wait)
	}
	plan, err := agent.PlanClaim(api.ClaimRequest{Addrs: o.Addrs, Interface: o.Interface}, d.sys)
	if err != nil {
		return err
	}
	log, err := d.logger()
	if err != nil {
		return err
	}
	det, err := sniff.NewDetector(sniff.DetectorConfig{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	byIface := map[string][]netip.Addr{}
	for _, r := range plan.Requests {
		byIface[r.Interface] = append(byIface[r.Interface], r.Addr)
	}
	var (
		links []*announce.Link
		runs  = make(chan error, len(byIface))
	)
	defer func() {
		for _, l := range links {
			l.Close()
		}
	}()
	started := 0
	for name, addrs := range byIface {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return fmt.Errorf("interface %s: %w", name, err)
		}
		l, err := announce.OpenLink(ifi, log)
		if err != nil {
			return fmt.Errorf("probe on %s: %w", name, err)
		}
		links = append(links, l)
		for _, a := range addrs {
			if err := det.Hold(a, ifi.HardwareAddr); err != nil {
				return err
			}
		}
		capture, err := sniff.Open(name, sniff.Options{})
		if err != nil {
			return fmt.Errorf("listen for answers on %s: %w", name, err)
		}
		started++
		go func() {
			runs <- capture.Run(ctx, det)
			capture.Close()
		}()
	}
	for i := range o.Count {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(probeSpacing):
			}
		}
		for _, l := range links {
			for _, a := range byIface[l.Name()] {
				if _, err := l.Probe(a); err != nil {
					return err
				}
			}
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.Wait):
	}
	cancel()
	var runErr error
	for range started {
		if err := <-runs; err != nil && !errors.Is(err, context.Canceled) {
			runErr = errors.Join(runErr, err)
		}
	}
	if runErr != nil {
		return fmt.Errorf("listen for answers: %w", runErr)
	}

	results := make([]ProbeResult, len(plan.Requests))
	answered := 0
	for i, r := range plan.Requests {
		results[i] = ProbeResult{Addr: r.Addr.String(), Interface: r.Interface, Claimers: []api.Claimer{}}
	}
	for _, cf := range det.Conflicts() {
		for i := range results {
			if results[i].Addr == cf.Addr.String() {
				results[i].Claimers = append(results[i].Claimers, api.Claimer{MAC: cf.MAC.String(), Kind: cf.Kind.String(), FirstSeen: cf.First, LastSeen: cf.Last, Count: cf.Count})
			}
		}
	}
	for _, r := range results {
		if len(r.Claimers) > 0 {
			answered++
		}
		slices.SortFunc(r.Claimers, func(a, b api.Claimer) int { return strings.Compare(a.MAC, b.MAC) })
	}
	if o.JSON {
		if err := writeJSON(d, map[string]any{"results": results}); err != nil {
			return err
		}
	} else {
		w := tabwriter.NewWriter(d.io.Out, 0, 4, 2, ' ', 0)
		for _, r := range results {
			if len(r.Claimers) == 0 {
				fmt.Fprintf(w, "%s\ton %s\tno answer\n", r.Addr, r.Interface)
			}
			for _, cl := range r.Claimers {
				fmt.Fprintf(w, "%s\ton %s\tanswered by %s\t(%s, %d frames)\n", r.Addr, r.Interface, cl.MAC, cl.Kind, cl.Count)
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if answered > 0 {
		return fmt.Errorf("%w: %d of %d addresses answered", errConflict, answered, len(results))
	}
	return nil
}
