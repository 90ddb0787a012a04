package fleet

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vip/internal/store"
)

// planMoves checks the request against the fleet as it is at now and
// picks each target interface. It changes nothing; any refusal refuses the
// whole move.
func planMoves(v store.View, req store.MoveRequest, now time.Time) ([]*pendingMove, error) {
	to, ok := v.NodeByName(req.To)
	if !ok {
		names := make([]string, len(v.Nodes))
		for i, n := range v.Nodes {
			names[i] = n.Node
		}
		live := "none"
		if len(names) > 0 {
			live = strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("%w: node %s is not alive in the store (live nodes: %s)", store.ErrRefused, req.To, live)
	}
	// The target's cordon as read: asking compares it, so that one
	// written since refuses the move too.
	var cordonRev int64
	if c, ok := v.CordonOf(req.To); ok {
		cordonRev = c.Rev
		if c.Active(now) && !req.Force {
			return nil, fmt.Errorf("%w: %s: uncordon it first (vip uncordon %s), or move there all the same with --force", store.ErrRefused, c.Describe(now), req.To)
		}
	}
	addrs := req.Addrs
	if req.All {
		if _, ok := v.NodeByName(req.From); !ok && !slices.ContainsFunc(v.Claims, func(cv store.ClaimView) bool { return cv.Claim.Node == req.From }) {
			return nil, fmt.Errorf("%w: node %s is not alive and holds nothing in the store", store.ErrRefused, req.From)
		}
		addrs = nil
		for _, cv := range v.Claims {
			if cv.Claim.Node == req.From {
				addrs = append(addrs, cv.Claim.Addr)
			}
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%w: node %s holds no address", store.ErrRefused, req.From)
		}
	}
	var out []*pendingMove
	var errs []error
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		m := &pendingMove{res: store.MoveResult{Addr: a, To: req.To}, cordonRev: cordonRev, takeOver: req.TakeOver, actor: req.Actor}
		m.opts, m.window = req.Options, req.TrafficWindow
		if ifname, own := to.OwnAddress(a); own {
			errs = append(errs, fmt.Errorf("%s is node %s's own address on %s, which its kernel answers for: a VIP cannot move there", a, req.To, ifname))
			continue
		}
		cur, held := v.ClaimOf(a)
		if from, ok := v.NodeByName(cur.Claim.Node); held && ok {
			if ifname, own := from.OwnAddress(a); own {
				errs = append(errs, fmt.Errorf("%s is node %s's own address on %s, which its kernel answers for: it is not vip's to hand over", a, from.Node, ifname))
				continue
			}
		}
		m.home = homeAfter(cur, held, req)
		if held {
			m.res.From = cur.Claim.Node
			m.claimRev = cur.CreateRev
			if m.opts == nil {
				m.opts = cur.Claim.Options
			}
			// The address stays in its group wherever it goes.
			m.group = cur.Claim.Group
			m.opts = withGroup(m.opts, m.group)
			if cur.Move != nil {
				errs = append(errs, fmt.Errorf("a move of %s to %s is already under way (asked at %s)", a, cur.Move.To, cur.Move.Asked.Format(time.RFC3339)))
				continue
			}
			if req.From != "" && cur.Claim.Node != req.From {
				errs = append(errs, fmt.Errorf("%s is held by %s, not %s", a, cur.Claim.Node, req.From))
				continue
			}
		} else {
			m.res.Unheld = true
		}
		ifname, err := PickInterface(to, a, req.Interface, cur.Claim.Interface)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.res.Interface = ifname
		if held && cur.Claim.Node == req.To && cur.Claim.Interface == ifname {
			m.res.Already = true
		}
		out = append(out, m)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", store.ErrRefused, errors.Join(errs...))
	}
	return out, nil
}

// homeAfter is the home an address has once moved as req asks: the one
// asked for, else the one it has, else the node it is taken from; none
// when that is the target (the address is back home) or nobody held it.
func homeAfter(cur store.ClaimView, held bool, req store.MoveRequest) string {
	home := req.Home
	switch {
	case home != "":
	case !held:
	case cur.Claim.Home != "":
		home = cur.Claim.Home
	default:
		home = cur.Claim.Node
	}
	if home == req.To {
		return ""
	}
	return home
}

// PickInterface chooses the target's interface for a: the one asked for,
// else the one whose prefix holds a, else the owner's interface by name.
func PickInterface(to store.Node, a netip.Addr, asked, owners string) (string, error) {
	names := make([]string, len(to.Interfaces))
	for i, ifc := range to.Interfaces {
		names[i] = ifc.Name
	}
	if asked != "" {
		if slices.Contains(names, asked) {
			return asked, nil
		}
		return "", fmt.Errorf("node %s has no interface %s (it has %s)", to.Node, asked, strings.Join(names, ", "))
	}
	for _, ifc := range to.Interfaces {
		for _, p := range ifc.Prefixes {
			if p.Masked().Contains(a) {
				return ifc.Name, nil
			}
		}
	}
	if owners != "" && slices.Contains(names, owners) {
		return owners, nil
	}
	return "", fmt.Errorf("node %s has no interface on a subnet of %s: name one with -i (it has %s)", to.Node, a, strings.Join(names, ", "))
}
