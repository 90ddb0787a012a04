package agent

import (
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/netcheck"
)

// Plan is a validated claim request: what the engine is asked to do.
type Plan struct {
	Requests []announce.Request
	Options  announce.ClaimOptions
}

// PlanClaim checks r like the command line checks its flags and
// arguments, against the host's interfaces (sys), and returns the plan. Errors about the
// input satisfy errors.Is(err, netcheck.ErrInvalid).
func PlanClaim(r api.ClaimRequest, sys netcheck.System) (Plan, error) {
	var p Plan
	if len(r.Addrs) > api.MaxAddrs {
		return p, netcheck.Invalidf("%d addresses in one request: give at most %d", len(r.Addrs), api.MaxAddrs)
	}
	addrs, err := netcheck.ParseAddrs(r.Addrs)
	if err != nil {
		return p, err
	}
	opts := announce.ClaimOptions{Assign: r.Assign, Group: r.Group}
	if r.Group != "" {
		if err := api.CheckGroup(r.Group); err != nil {
			return p, err
		}
	}
	if opts.OnConflict, err = announce.ParseConflictPolicy(r.OnConflict); err != nil {
		return p, netcheck.Invalidf("on-conflict: %v", err)
	}
	if r.ProbeEvery != nil {
		switch pe := time.Duration(*r.ProbeEvery); {
		case pe < 0:
			return p, netcheck.Invalidf("probe-every %v is negative: give a period such as 10s, or 0 to turn probing off", pe)
		case pe == 0:
			opts.ProbesOff = true
		case pe < time.Second:
			return p, netcheck.Invalidf("probe-every %v is too short: give at least 1s", pe)
		default:
			opts.ProbeEvery = pe
		}
	}
	if r.Frames != "" {
		if opts.Frames, err = announce.ParseFrameKinds(r.Frames); err != nil {
			return p, netcheck.Invalidf("frames: %v", err)
		}
	}
	frames := opts.Frames
	if frames == 0 {
		frames = announce.DefaultFrameKinds
	}
	if r.Window != nil {
		switch w := time.Duration(*r.Window); {
		case w < 0:
			return p, netcheck.Invalidf("window %v is negative: give a duration such as 5s, or 0 for a single round", w)
		case w == 0:
			opts.SingleRound = true
		default:
			opts.Window = w
		}
	}
	var i, e time.Duration
	if r.Interval != nil {
		if i = time.Duration(*r.Interval); i < api.MinInterval {
			return p, netcheck.Invalidf("interval %v is too short: give at least %v (the default %v stays above Linux's 1 s neighbour locktime)", i, api.MinInterval, announce.DefaultInterval)
		}
	}
	if r.RefreshEvery != nil {
		e = time.Duration(*r.RefreshEvery)
	}
	switch {
	case e < 0:
		return p, netcheck.Invalidf("refresh-every %v is negative: give a period such as 30s, or 0 to turn it off", e)
	case e > 0 && e < time.Second:
		return p, netcheck.Invalidf("refresh-every %v is too short: give at least 1s", e)
	default:
		opts.Interval, opts.RefreshEvery = i, e
	}
	var picker *netcheck.Picker
	links := map[string]netcheck.Interface{}
	for _, a := range addrs {
		if a.Is4() && !frames.IPv4() {
			return p, netcheck.Invalidf("frames %s has no ARP kind, so %s would never be announced: add arp-request or arp-reply", frames, a)
		}
		if a.Is6() && !frames.IPv6() {
			return p, netcheck.Invalidf("frames %s has no NA kind, so %s would never be announced: add na or na-routers", frames, a)
		}
		name := r.Interface
		if name == "" {
			if picker == nil {
				if picker, err = netcheck.NewPicker(sys); err != nil {
					return p, err
				}
			}
			if name, err = picker.Pick(a); err != nil {
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
		p.Requests = append(p.Requests, announce.Request{Addr: a, Interface: name})
	}
	p.Options = opts
	return p, nil
}
