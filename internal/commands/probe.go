package commands

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/probe"
	"github.com/vipctl/vip/internal/store"
)

// probeOptions are the flags and arguments of vip probe.
type probeOptions struct {
	Addrs     []string
	Interface string
	Count     int
	Wait      time.Duration
	JSON      bool
	// Expect is whom the addresses should be answered by: a node of the
	// store, or a MAC.
	Expect string
	Store  storeOptions
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
before it claims it, and that the old owner is silent after a failover.

With --expect NODE or --expect MAC it checks the owner from the wire instead:
it exits 0 when exactly the expected owner answers for every address, and 3
otherwise, saying who did answer (nobody, another MAC, or the owner beside
another one). A NODE is looked up in the store (--store): any of the MACs
its agent registered counts, and every answering MAC a node has is named.`,
		Example: `  sudo vip probe 192.0.2.10 -i eth0
  sudo vip probe 192.0.2.10 2001:db8::10 --json
  sudo vip probe 192.0.2.10 2001:db8::10 --expect b --store etcd://192.0.2.5:2379`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput("probe needs at least one address, like: vip probe 192.0.2.10 -i eth0")
			}
			return nil
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, args []string) error {
			o.Addrs = args
			o.Store.parsed(c, storeFlagNames...)
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
	f.StringVar(&o.Expect, "expect", "", "exit 0 only when exactly this owner answers for each address: a node of the store (--store), or a MAC")
	_ = c.RegisterFlagCompletionFunc("expect", cobra.NoFileCompletions)
	o.Store.addFlags(c)
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
	exp, nodes, err := o.expected(ctx, d)
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
	if o.Expect != "" {
		unexpected := exp.Judge(results, nodes)
		if err := printProbe(d, o, results); err != nil {
			return err
		}
		if unexpected > 0 {
			return fmt.Errorf("%w: %d of %d addresses were not answered by %s alone: check the hosts that answered, listed above", errUnexpected, unexpected, len(results), exp.Name)
		}
		return nil
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
		return fmt.Errorf("%w: %d of %d addresses answered: check the hosts listed above before claiming them", errConflict, answered, len(results))
	}
	return nil
}

// printProbe prints who answered for each address, as JSON or a table.
func printProbe(d *deps, o *probeOptions, results []api.ProbeResult) error {
	if o.JSON {
		return writeJSON(d, api.ProbeResponse{Expect: o.Expect, Results: results})
	}
	w := tabwriter.NewWriter(d.io.Out, 0, 4, 2, ' ', 0)
	for _, r := range results {
		if r.AsExpected != nil {
			fmt.Fprintf(w, "%s\ton %s\t%s\n", r.Addr, r.Interface, r.Verdict)
			continue
		}
		if len(r.Claimers) == 0 {
			fmt.Fprintf(w, "%s\ton %s\tno answer\n", r.Addr, r.Interface)
		}
		for _, cl := range r.Claimers {
			fmt.Fprintf(w, "%s\ton %s\tanswered by %s\t(%s, %d frames)\n", r.Addr, r.Interface, cl.MAC, cl.Kind, cl.Count)
		}
	}
	return w.Flush()
}

// errUnexpected makes probe --expect exit 3: the addresses were not
// answered by the expected owner alone.
var errUnexpected = errors.New("unexpected owner")

// expected resolves --expect: a MAC stands for itself, a node for the MACs
// its agent registered in the store. With a store, nodes maps every MAC a
// live node registered to its name, so that whoever answers is named; for
// a MAC the store only names, so vip goes on without it when it is out of
// reach, and says so.
func (o *probeOptions) expected(ctx context.Context, d *deps) (probe.Expected, map[string]string, error) {
	if o.Expect == "" {
		if len(o.Store.given) > 0 {
			return probe.Expected{}, nil, o.Store.check()
		}
		return probe.Expected{}, nil, nil
	}
	if err := o.Store.check(); err != nil {
		return probe.Expected{}, nil, err
	}
	if mac, err := net.ParseMAC(o.Expect); err == nil {
		if len(mac) != 6 {
			return probe.Expected{}, nil, badInput("--expect %s is not an Ethernet MAC: give one of 6 bytes, such as 02:00:5e:00:53:01, or a node", o.Expect)
		}
		exp := probe.Expected{Name: mac.String(), MACs: []net.HardwareAddr{mac}}
		if o.Store.URL == "" {
			return exp, nil, nil
		}
		nodes, _, err := o.fleetMACs(ctx)
		if err != nil {
			fmt.Fprintf(d.io.ErrOut, "vip: answering MACs are not named by node: %v\n", err)
		}
		return exp, nodes, nil
	}
	if err := store.CheckNode(o.Expect); err != nil {
		return probe.Expected{}, nil, badInput("--expect %q is neither a MAC nor a node name: %v", o.Expect, err)
	}
	if o.Store.URL == "" {
		return probe.Expected{}, nil, badInput("--expect %s names a node, which vip looks up in the store: give --store etcd://HOST:PORT (or set %s), or expect a MAC", o.Expect, storeEnv)
	}
	nodes, live, err := o.fleetMACs(ctx)
	if err != nil {
		return probe.Expected{}, nil, err
	}
	exp := probe.Expected{Name: o.Expect}
	for mac, node := range nodes {
		if node == o.Expect {
			hw, _ := net.ParseMAC(mac)
			exp.MACs = append(exp.MACs, hw)
		}
	}
	if len(exp.MACs) == 0 {
		if len(live) == 0 {
			live = []string{"none"}
		}
		return exp, nil, badInput("--expect %s: no live node of that name in the store has registered a MAC (live nodes: %s)", o.Expect, strings.Join(live, ", "))
	}
	return exp, nodes, nil
}

// fleetMACs reads the fleet's live nodes from the store: each registered
// MAC (in net.HardwareAddr's form) to its node, and the nodes' names.
func (o *probeOptions) fleetMACs(ctx context.Context) (map[string]string, []string, error) {
	c, err := o.Store.open(ctx, "probe --expect")
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	v, err := c.Fleet(ctx)
	if err != nil {
		return nil, nil, err
	}
	nodes := map[string]string{}
	var live []string
	for _, n := range v.Nodes {
		live = append(live, n.Node)
		for _, ifc := range n.Interfaces {
			if hw, err := net.ParseMAC(ifc.MAC); err == nil {
				nodes[hw.String()] = n.Node
			}
		}
	}
	return nodes, live, nil
}
