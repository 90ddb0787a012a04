package cmd

import (
	"context"
	"fmt"
	"net"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/probe"
)

// probeOptions are the flags and arguments of vip probe.
type probeOptions struct {
	Addrs     []string
	Interface string
	Count     int
	Wait      time.Duration
	JSON      bool
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
	results, err := probe.Run(ctx, plan.Requests, probe.Config{Count: o.Count, Wait: o.Wait, Log: log})
	if err != nil {
		return err
	}
	if err := printProbe(d, o, results); err != nil {
		return err
	}
	answered := 0
	for _, r := range results {
		if len(r.Claimers) > 0 {
			answered++
		}
	}
	if answered > 0 {
		return fmt.Errorf("%w: %d of %d addresses answered", errConflict, answered, len(results))
	}
	return nil
}

// printProbe prints who answered for each address, as JSON or a table.
func printProbe(d *deps, o *probeOptions, results []api.ProbeResult) error {
	if o.JSON {
		return writeJSON(d, api.ProbeResponse{Results: results})
	}
	w := tabwriter.NewWriter(d.io.Out, 0, 4, 2, ' ', 0)
	for _, r := range results {
		if len(r.Claimers) == 0 {
			fmt.Fprintf(w, "%s\ton %s\tno answer\n", r.Addr, r.Interface)
		}
		for _, cl := range r.Claimers {
			fmt.Fprintf(w, "%s\ton %s\tanswered by %s\t(%s, %d frames)\n", r.Addr, r.Interface, cl.MAC, cl.Kind, cl.Count)
		}
	}
	return w.Flush()
}
