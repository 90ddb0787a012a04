package store

import (
	"slices"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// API returns the cordon as clients see it at now.
func (c Cordon) API(now time.Time) *api.Cordon {
	out := &api.Cordon{Node: c.Node, Reason: c.Reason, By: c.By, Since: c.Since, Until: c.Until}
	if !c.Until.IsZero() {
		left := api.Duration(max(c.Until.Sub(now), 0))
		out.Left = &left
	}
	return out
}

// API returns the view as clients see it at now (vip fleet --json,
// /v1/fleet).
func (v View) API(now time.Time) api.FleetResponse {
	out := api.FleetResponse{Revision: v.Revision, Nodes: []api.FleetNode{}, Claims: []api.FleetClaim{}}
	registered := make(map[string]bool, len(v.Nodes))
	for _, n := range v.Nodes {
		registered[n.Node] = true
	}
	for _, n := range v.Nodes {
		fn := api.FleetNode{Node: n.Node, Version: n.Version, Host: n.Host, PID: n.PID, Started: n.Started,
			LeaseTTL: api.Duration(n.LeaseTTL), Interfaces: []api.FleetInterface{}}
		for _, ifc := range n.Interfaces {
			fi := api.FleetInterface{Name: ifc.Name, MAC: ifc.MAC, Up: ifc.Up}
			for _, p := range ifc.Prefixes {
				fi.Prefixes = append(fi.Prefixes, p.String())
			}
			fn.Interfaces = append(fn.Interfaces, fi)
		}
		if la, ok := v.Leases[n.Node]; ok {
			ago, left := api.Duration(la.RenewedAgo()), api.Duration(la.Left)
			fn.RenewedAgo, fn.LeaseLeft = &ago, &left
		}
		out.Nodes = append(out.Nodes, fn)
	}
	add := func(cv ClaimView) {
		c := api.FleetClaim{Addr: cv.Claim.Addr.String(), Node: cv.Claim.Node, Interface: cv.Claim.Interface,
			MAC: cv.Claim.MAC, ClaimedAt: cv.Claim.Since, Since: cv.Claim.Since, State: api.FleetHolding, Home: cv.Claim.Home, Group: cv.Claim.Group}
		if c.Group == "" && cv.Move != nil {
			c.Group = OptionsGroup(cv.Move.Options)
		}
		if c.Node == "" {
			// No owner: free only if a registered node stands by for
			// it. When none does, the store cannot say: a store that
			// was out of the agents' reach for longer than their
			// leases has lost every registration and claim, while the
			// agents run and take them back once they reach it.
			c.State = api.FleetUnknown
			if slices.ContainsFunc(cv.Standbys, func(s Standby) bool { return registered[s.Node] }) {
				c.State = api.FleetFree
			}
		}
		if cv.Move != nil {
			c.State, c.MovingTo = api.FleetMoving, cv.Move.To
			if cv.Move.TakeOver {
				c.State = api.FleetTakingOver
			}
		}
		for _, s := range cv.Standbys {
			if s.Node != cv.Claim.Node {
				c.Standbys = append(c.Standbys, s.Node)
			}
			if !registered[s.Node] && !slices.Contains(out.Unregistered, s.Node) {
				out.Unregistered = append(out.Unregistered, s.Node)
			}
		}
		out.Claims = append(out.Claims, c)
	}
	for _, cv := range v.Claims {
		add(cv)
	}
	for _, cv := range v.Free {
		add(cv)
	}
	slices.Sort(out.Unregistered)
	for _, c := range v.Cordons {
		if c.Active(now) {
			out.Cordons = append(out.Cordons, *c.API(now))
		}
	}
	for _, s := range v.Skipped {
		out.Skipped = append(out.Skipped, api.FleetSkipped(s))
	}
	return out
}

// API returns the result as clients see it, its timeline in milliseconds
// since the move was asked.
func (r MoveResult) API() api.MoveResult {
	ms := func(t time.Time) *float64 {
		if t.IsZero() {
			return nil
		}
		return api.Millis(t.Sub(r.Asked))
	}
	out := api.MoveResult{Addr: r.Addr.String(), From: r.From, To: r.To, Interface: r.Interface, Asked: r.Asked,
		ReleasedMS: ms(r.Released), TakenMS: ms(r.Taken), LiveMS: ms(r.Live), Waited: r.Waited, Unheld: r.Unheld, Already: r.Already,
		OK: r.Done(), Error: r.Error}
	if t := r.Traffic; t != nil {
		out.Traffic = &api.MoveTraffic{Counted: t.Counted, Packets: t.Packets, Bytes: t.Bytes, Window: api.Duration(t.Window)}
	}
	return out
}

// API returns the change as vip history --json prints it.
func (c Change) API() api.HistoryChange {
	out := api.HistoryChange{Revision: c.Rev, Rev: c.Rev, Time: c.Time, Kind: string(c.Kind), Node: c.Node, From: c.From,
		Interface: c.Interface, Group: c.Group, By: c.By, Identity: c.Identity, Reason: c.Reason, Asked: c.Asked,
		Released: c.Released, FencedAt: c.Since, Since: c.Since, Count: c.Count, Message: c.Message, Summary: c.Describe()}
	if c.Addr.IsValid() {
		out.Addr = c.Addr.String()
	}
	for _, a := range c.Addrs {
		out.Addrs = append(out.Addrs, a.String())
	}
	return out
}
