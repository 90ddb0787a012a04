package fleet

import (
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/internal/store"
)

// MaxTrafficWindow bounds a move's traffic window: the mover waits for it.
const MaxTrafficWindow = time.Minute

// ParseMoveRequest checks a move request as vip move's flags and the
// agent's POST /v1/move give it (addresses, or all of one node's; the
// nodes' names; the timeout and the traffic window) and returns it as the
// mover takes it. An error wraps netcheck.ErrInvalid and names the fix.
func ParseMoveRequest(r api.MoveRequest) (store.MoveRequest, error) {
	out := store.MoveRequest{All: r.All, From: r.From, To: r.To, Interface: r.Interface,
		Timeout: time.Duration(r.Timeout), TrafficWindow: time.Duration(r.TrafficWindow), Force: r.Force, Home: r.Home, Group: r.Group,
		Actor: store.Actor{Reason: r.Reason, By: r.By}}
	if err := store.CheckReason(r.Reason); err != nil {
		return out, netcheck.Invalidf("%v", err)
	}
	switch {
	case r.To == "":
		return out, netcheck.Invalidf("name the node to move to with --to NODE, like: vip move 192.0.2.10 --to b")
	case r.Group != "" && (r.All || len(r.Addrs) > 0):
		return out, netcheck.Invalidf("give addresses, --all --from NODE or --group NAME, one of the three")
	case r.All && len(r.Addrs) > 0:
		return out, netcheck.Invalidf("give addresses or --all --from NODE, not both")
	case r.All && r.From == "":
		return out, netcheck.Invalidf("--all moves every address of one node: name it with --from NODE")
	case !r.All && len(r.Addrs) == 0 && r.Group == "":
		return out, netcheck.Invalidf("name at least one address to move, or --all --from NODE")
	case out.Timeout < 0:
		return out, netcheck.Invalidf("--timeout %s is negative: give how long to wait, such as 30s, or 0 for the default", out.Timeout)
	case out.TrafficWindow < 0 || out.TrafficWindow > MaxTrafficWindow:
		return out, netcheck.Invalidf("--traffic-window %s must be from 0 (do not count) to %s", out.TrafficWindow, "1m")
	}
	if r.Group != "" {
		if err := api.CheckGroup(r.Group); err != nil {
			return out, err
		}
	}
	for _, n := range []string{r.To, r.From, r.Home} {
		if n == "" {
			continue
		}
		if err := store.CheckNode(n); err != nil {
			return out, netcheck.Invalidf("%v: name a node as vip fleet lists it", err)
		}
	}
	if len(r.Addrs) > api.MaxAddrs {
		return out, netcheck.Invalidf("%d addresses in one move: give at most %d", len(r.Addrs), api.MaxAddrs)
	}
	for _, s := range r.Addrs {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return out, netcheck.Invalidf("%q is not an IP address: give one such as 192.0.2.10 or 2001:db8::10", s)
		}
		out.Addrs = append(out.Addrs, a.Unmap())
	}
	return out, nil
}
