package agent

import (
	"context"
	"net/netip"
	"slices"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/netcheck"
)

// groupCheck refuses, before anything changes, a claim of an address this
// agent holds (or stands by for) in another group than the one asked for:
// an address belongs to one group at most, and leaves it only when
// released. A claim without a group of an address held in one is refused
// too, so that no claim quietly takes it out of its group.
func groupCheck(held []announce.Status, reqs []announce.Request, group string) error {
	want := make(map[netip.Addr]bool, len(reqs))
	for _, r := range reqs {
		want[r.Addr] = true
	}
	for _, s := range held {
		if !want[s.Addr] || s.Options.Group == group {
			continue
		}
		if s.Options.Group == "" {
			// An address held alone joins the group claimed.
			continue
		}
		if group == "" {
			return netcheck.Invalidf("%s is in group %s: claim it with --group %s, or release the group first (vip release --group %s)", s.Addr, s.Options.Group, s.Options.Group, s.Options.Group)
		}
		return netcheck.Invalidf("%s is in group %s, not %s: an address is in one group at most; release it first (vip release --group %s)", s.Addr, s.Options.Group, group, s.Options.Group)
	}
	return nil
}

// groupAddrs returns the addresses of group among st, sorted.
func groupAddrs(st []announce.Status, group string) []netip.Addr {
	var out []netip.Addr
	for _, s := range st {
		if s.Options.Group == group {
			out = append(out, s.Addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// groupHeld returns the addresses of group that eng holds or stands by
// for, or an error naming the fix when there are none.
func groupHeld(eng Engine, group string) ([]netip.Addr, error) {
	addrs := groupAddrs(eng.Status(), group)
	if len(addrs) == 0 {
		return nil, netcheck.Invalidf("this agent holds no address of group %s: vip status lists the groups held", group)
	}
	return addrs, nil
}

// undoPartial releases what a group's claim took when the rest of the
// group was refused: a group is claimed whole or not at all. Addresses
// held before the claim (before) stay.
func undoPartial(ctx context.Context, eng Engine, st []announce.Status, before []announce.Status) {
	had := map[netip.Addr]bool{}
	for _, s := range before {
		had[s.Addr] = true
	}
	var fresh []netip.Addr
	for _, s := range st {
		if !had[s.Addr] {
			fresh = append(fresh, s.Addr)
		}
	}
	if len(fresh) > 0 {
		_, _, _ = eng.Release(ctx, fresh)
	}
}

// requestAddrs returns the addresses reqs ask for, in order.
func requestAddrs(reqs []announce.Request) []netip.Addr {
	out := make([]netip.Addr, len(reqs))
	for i, r := range reqs {
		out[i] = r.Addr
	}
	return out
}
