package commands

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// maxGroupAddrs bounds the addresses of one group, as the store's one
// transaction per group does.
const maxGroupAddrs = fleet.MaxGroupAddrs

// addGroupFlag adds --group NAME to c, with usage saying what it does
// there.
func addGroupFlag(c *cobra.Command, group *string, usage string) {
	c.Flags().StringVar(group, "group", "", usage)
	_ = c.RegisterFlagCompletionFunc("group", cobra.NoFileCompletions)
}

// heldGroup is one group among a status's claims.
type heldGroup struct {
	name  string
	addrs []string
}

// groupsOf lists the groups of claims, by name, each with its addresses in
// the claims' order.
func groupsOf(claims []api.Claim) []heldGroup {
	var out []heldGroup
	at := map[string]int{}
	for _, c := range claims {
		if c.Group == "" {
			continue
		}
		i, ok := at[c.Group]
		if !ok {
			i = len(out)
			at[c.Group] = i
			out = append(out, heldGroup{name: c.Group})
		}
		out[i].addrs = append(out[i].addrs, c.Addr)
	}
	slices.SortFunc(out, func(x, y heldGroup) int { return strings.Compare(x.name, y.name) })
	return out
}

// groupMembers lists the addresses group has in the store now, or says
// there are none.
func groupMembers(ctx context.Context, c *store.Client, group string) ([]netip.Addr, error) {
	v, err := c.Fleet(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the group's addresses: %w", err)
	}
	var out []netip.Addr
	for _, cv := range v.Claims {
		if cv.Claim.Group == group || cv.Move != nil && store.OptionsGroup(cv.Move.Options) == group {
			out = append(out, cv.Claim.Addr)
		}
	}
	if len(out) == 0 {
		return nil, badInput("no address of group %s is in the store: vip fleet lists the groups", group)
	}
	return out, nil
}

// withGroupMembers is addrs with the other addresses of their groups in
// the store, in order, each once. It reads the whole fleet only when one
// of addrs is in a group.
func withGroupMembers(ctx context.Context, c *store.Client, addrs []netip.Addr) ([]netip.Addr, error) {
	v, err := c.FleetOf(ctx, addrs)
	if err != nil {
		return nil, err
	}
	groups := map[string]bool{}
	for _, a := range addrs {
		if cv, ok := v.ClaimOf(a); ok && cv.Claim.Group != "" {
			groups[cv.Claim.Group] = true
		}
	}
	if len(groups) == 0 {
		return addrs, nil
	}
	out := slices.Clone(addrs)
	for g := range groups {
		members, err := groupMembers(ctx, c, g)
		if err != nil {
			return nil, err
		}
		for _, m := range members {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}
