package commands

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/internal/store"
)

// standbyOptions are the flags and arguments of vip standby.
type standbyOptions struct {
	Addrs     []string
	On        string
	Interface string
	Remove    bool
	Force     bool
	JSON      bool
	// Reason is why, kept in the history with each standby changed.
	Reason string
	Store  storeOptions
}

func newStandbyCmd(d *deps, runF func(context.Context, *standbyOptions) error) *cobra.Command {
	o := &standbyOptions{}
	c := &cobra.Command{
		Use:   "standby ADDR... --on NODE [--remove]",
		Short: "Make a node a standby for addresses, or no more, from any host",
		Long: `Standby adds NODE to the standbys of each address in the store (--store, or
$VIP_STORE), from any host that reaches it; with --remove it takes NODE out.
A standby takes its address when the owner's lease expires (the owner died,
or was cut off and fenced), with the owner's claim options, on -i or on its
interface whose subnet holds the address.

An address's standbys are a set that lasts: no lease binds them, so they
survive a standby's restart, a move (the old owner joins the set in the
target's place) and a takeover (the standby that took the address stays in
the set, and stands by again once the address leaves it). vip claim ADDR
--standby on the node itself adds it too, and vip release ADDR there takes it
out. The node's agent hears of the change at once (through its inbox in the
store) or when it next starts. NODE must be alive unless --force, and must
not hold the address.`,
		Example: `  vip standby 192.0.2.10 2001:db8::10 --on b
  vip standby 192.0.2.10 --on c -i eth1
  vip standby 192.0.2.10 --on c --remove`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput("name the addresses, like: vip standby 192.0.2.10 --on b")
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
			return runStandby(c.Context(), d, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.On, "on", "", "the node that stands by (required)")
	f.StringVarP(&o.Interface, "interface", "i", "", "the node's interface for the addresses (default: the one whose subnet holds each)")
	f.BoolVar(&o.Remove, "remove", false, "take the node out of the addresses' standbys")
	f.BoolVar(&o.Force, "force", false, "make a node that is not alive now a standby")
	f.BoolVar(&o.JSON, "json", false, "print the standbys changed as JSON")
	addReasonFlag(c, &o.Reason, "why the standbys change")
	o.Store.addFlags(c)
	for _, name := range []string{"on", "interface"} {
		_ = c.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
	}
	return c
}

func (o *standbyOptions) check() ([]netip.Addr, error) {
	if o.On == "" {
		return nil, badInput("name the node that stands by with --on NODE, like: vip standby 192.0.2.10 --on b")
	}
	if err := store.CheckNode(o.On); err != nil {
		return nil, badInput("--on: %v: name a node as vip fleet lists it", err)
	}
	if err := checkReason(o.Reason); err != nil {
		return nil, err
	}
	if o.Remove && o.Interface != "" {
		return nil, badInput("-i names the interface of a standby added, and --remove takes one out: drop one of them")
	}
	addrs, err := netcheck.ParseAddrs(o.Addrs)
	if err != nil {
		return nil, &inputError{err: err}
	}
	if len(addrs) > api.MaxAddrs {
		return nil, badInput("%d addresses at once: give at most %d", len(addrs), api.MaxAddrs)
	}
	return addrs, nil
}

func runStandby(ctx context.Context, d *deps, o *standbyOptions) error {
	addrs, err := o.check()
	if err != nil {
		return err
	}
	c, err := o.Store.open(ctx, "standby")
	if err != nil {
		return err
	}
	defer c.Close()
	// A group has one set of standbys: naming one of its addresses
	// names all of them.
	if addrs, err = withGroupMembers(ctx, c, addrs); err != nil {
		return fmt.Errorf("node %s's standbys: %w", o.On, err)
	}
	resp := api.StandbyResponse{Node: o.On}
	if o.Remove {
		gone, err := c.DeleteStandbys(ctx, o.On, addrs, c.LocalActor(o.Reason))
		if err != nil {
			return fmt.Errorf("take node %s out of the standbys: %w", o.On, err)
		}
		for _, a := range addrs {
			resp.Addrs = append(resp.Addrs, api.StandbyChange{Addr: a.String(), Already: !slices.Contains(gone, a)})
		}
		return printStandbys(d, o, resp)
	}
	v, err := c.FleetOf(ctx, addrs)
	if err != nil {
		return fmt.Errorf("make node %s a standby: %w", o.On, err)
	}
	node, live := v.NodeByName(o.On)
	if !live && !o.Force {
		return badInput("node %s is not alive in the store (live nodes: %s): check the name, or give --force to make it a standby for when it comes back", o.On, liveNodes(ctx, c))
	}
	var recs []store.Standby
	now := time.Now().UTC()
	for _, a := range addrs {
		cv, ok := v.ClaimOf(a)
		switch {
		case !ok || cv.Claim.Node == "":
			return badInput("nobody holds %s in the store: claim it first (vip claim on its owner), then name its standbys; nothing changed", a)
		case cv.Claim.Node == o.On:
			return badInput("node %s holds %s: a standby is another node, ready to take it (after a move away, the old owner stands by by itself); nothing changed", o.On, a)
		}
		ifname := o.Interface
		if live {
			if ifname, err = fleet.PickInterface(node, a, o.Interface, cv.Claim.Interface); err != nil {
				return badInput("%s: %v; nothing changed", a, err)
			}
		} else if ifname == "" {
			ifname = cv.Claim.Interface
		}
		i := slices.IndexFunc(cv.Standbys, func(s store.Standby) bool { return s.Node == o.On })
		if i >= 0 && cv.Standbys[i].Interface == ifname && string(cv.Standbys[i].Options) == string(cv.Claim.Options) {
			resp.Addrs = append(resp.Addrs, api.StandbyChange{Addr: a.String(), Interface: ifname, Standby: true, Already: true})
			continue
		}
		recs = append(recs, store.Standby{Addr: a, Node: o.On, Interface: ifname, Since: now, Options: cv.Claim.Options, Group: cv.Claim.Group})
		resp.Addrs = append(resp.Addrs, api.StandbyChange{Addr: a.String(), Interface: ifname, Standby: true})
	}
	if err := c.PutStandbys(ctx, recs, c.LocalActor(o.Reason)); err != nil {
		return fmt.Errorf("make node %s a standby: %w", o.On, err)
	}
	return printStandbys(d, o, resp)
}

func printStandbys(d *deps, o *standbyOptions, r api.StandbyResponse) error {
	if o.JSON {
		return writeJSON(d, r)
	}
	for _, a := range r.Addrs {
		var line string
		switch {
		case a.Standby && a.Already:
			line = fmt.Sprintf("%s: node %s stands by already (%s)", a.Addr, r.Node, a.Interface)
		case a.Standby:
			line = fmt.Sprintf("%s: node %s stands by (%s): it takes the address if its owner's lease expires", a.Addr, r.Node, a.Interface)
		case a.Already:
			line = fmt.Sprintf("%s: node %s was not a standby", a.Addr, r.Node)
		default:
			line = fmt.Sprintf("%s: node %s stands by no more", a.Addr, r.Node)
		}
		if _, err := fmt.Fprintln(d.io.Out, line); err != nil {
			return err
		}
	}
	return nil
}
