package api

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/netcheck"
)

// DefaultSocket is where the agent listens unless told otherwise.
const DefaultSocket = "/run/vip/vip.sock"

// SocketEnv names the environment variable that overrides DefaultSocket.
const SocketEnv = "VIP_SOCKET"

// MaxRequestBytes bounds a request body: room for well over 10,000
// addresses, and a refusal for anything larger.
const MaxRequestBytes = 4 << 20

// MaxAddrs bounds the addresses of one request.
const MaxAddrs = 65536

// MinInterval keeps a mistyped interval from flooding the segment.
const MinInterval = 10 * time.Millisecond

// Duration is a time.Duration written as text in JSON, such as "1.1s".
type Duration time.Duration

// MarshalText writes d like time.Duration's String.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses d with time.ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration: give one such as 5s or 1.1s", b)
	}
	*d = Duration(v)
	return nil
}

// ClaimRequest asks the agent to claim addresses (or refresh held ones).
type ClaimRequest struct {
	Addrs []string `json:"addrs"`
	// Interface applies to every address; empty picks the interface whose
	// connected route holds each address.
	Interface string `json:"interface,omitempty"`
	// Window, Interval and Frames shape the gratuitous bursts; zero takes
	// the agent's defaults.
	Window   *Duration `json:"window,omitempty"`
	Interval Duration  `json:"interval,omitempty"`
	Frames   string    `json:"frames,omitempty"`
	// RefreshEvery re-arms the window on that period; zero is off.
	RefreshEvery Duration `json:"refresh_every,omitempty"`
	// Assign also adds each address to its interface.
	Assign bool `json:"assign,omitempty"`
	// OnConflict is what to do when another MAC answers for an address:
	// defend (default), warn or yield.
	OnConflict string `json:"on_conflict,omitempty"`
	// ProbeEvery is the period of probes for silent competing claimers;
	// absent takes the default (10s), zero turns them off.
	ProbeEvery *Duration `json:"probe_every,omitempty"`
}

// ClaimResponse lists the claims as they are once live.
type ClaimResponse struct {
	Claims []Claim `json:"claims"`
}

// AddrsRequest names addresses for refresh and release, or all of them.
type AddrsRequest struct {
	Addrs []string `json:"addrs,omitempty"`
	All   bool     `json:"all,omitempty"`
}

// RefreshResponse says which addresses were refreshed and which were not
// held.
type RefreshResponse struct {
	Refreshed []string `json:"refreshed"`
	NotHeld   []string `json:"not_held"`
}

// ReleaseResponse says which addresses were released and which were not
// held.
type ReleaseResponse struct {
	Released []string `json:"released"`
	NotHeld  []string `json:"not_held"`
}

// StatusResponse describes the agent and every claim.
type StatusResponse struct {
	Agent    Agent         `json:"agent"`
	Claims   []Claim       `json:"claims"`
	Captures []CaptureStat `json:"captures,omitempty"`
}

// Agent describes the running agent.
type Agent struct {
	PID         int       `json:"pid"`
	Version     string    `json:"version"`
	Started     time.Time `json:"started"`
	Socket      string    `json:"socket"`
	StateFile   string    `json:"state_file"`
	Autostarted bool      `json:"autostarted"`
}

// Claim is one held address as clients see it.
type Claim struct {
	Addr        string    `json:"addr"`
	Interface   string    `json:"interface"`
	MAC         string    `json:"mac"`
	State       string    `json:"state"`
	ClaimedAt   time.Time `json:"claimed_at"`
	RefreshedAt time.Time `json:"refreshed_at"`
	// WindowEnd and WindowRemaining are set while a burst runs.
	WindowEnd        time.Time `json:"window_end,omitzero"`
	WindowRemaining  Duration  `json:"window_remaining,omitempty"`
	Answered         uint64    `json:"answered"`
	GratuitousFrames uint64    `json:"gratuitous_frames"`
	// Assigned is set when vip added the address to the interface.
	Assigned bool     `json:"assigned,omitempty"`
	Window   Duration `json:"window"`
	Interval Duration `json:"interval"`
	Frames   string   `json:"frames"`
	// RefreshEvery is the period of automatic refreshes, if any.
	RefreshEvery Duration `json:"refresh_every,omitempty"`
	// OnConflict is the claim's policy: defend, warn or yield.
	OnConflict string `json:"on_conflict,omitempty"`
	// Claimers are the other MACs seen answering for the address: a
	// split brain while any was seen recently (state "conflict").
	Claimers []Claimer `json:"claimers,omitempty"`
}

// Claimer is a MAC other than ours that answers for a held address.
type Claimer struct {
	MAC       string    `json:"mac"`
	Kind      string    `json:"kind"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Count     uint64    `json:"count"`
}

// TrafficResponse is the who-has traffic seen on the wire, per target.
type TrafficResponse struct {
	Entries  []Traffic     `json:"entries"`
	Captures []CaptureStat `json:"captures"`
	// Evicted counts targets dropped from the bounded table.
	Evicted uint64 `json:"evicted"`
}

// Traffic is the who-has traffic for one target address.
type Traffic struct {
	Addr      string  `json:"addr"`
	Requests  uint64  `json:"requests"`
	Rate      float64 `json:"rate"` // requests per second, recent
	Askers    []Asker `json:"askers"`
	LastAsker Asker   `json:"last_asker"`
	// AnsweredBy lists the MACs seen answering for the address.
	AnsweredBy []Answerer `json:"answered_by"`
	Held       bool       `json:"held"`
	LastSeen   time.Time  `json:"last_seen"`
}

// Asker is a host asking who has an address.
type Asker struct {
	MAC   string `json:"mac"`
	Addr  string `json:"addr,omitempty"`
	Count uint64 `json:"count,omitempty"`
}

// Answerer is a MAC seen answering for an address.
type Answerer struct {
	MAC   string `json:"mac"`
	Count uint64 `json:"count"`
}

// CaptureStat counts what one interface's capture saw.
type CaptureStat struct {
	Interface   string `json:"interface"`
	Received    uint64 `json:"received"`
	Dropped     uint64 `json:"dropped"`
	Undecodable uint64 `json:"undecodable"`
	// Scope says which frames reach the agent: "held", only those about
	// the addresses held on the interface (the kernel drops the others);
	// "held-userspace", the same, but more addresses are held than the
	// kernel's filter can name, so the kernel hands over all neighbour
	// traffic; "all", who-has traffic for any address (vip agent
	// --all-traffic). Empty until the capture is set up.
	Scope string `json:"scope,omitempty"`
	Error string `json:"error,omitempty"`
}

// Event is one entry of the agent's event stream.
type Event = announce.Event

// Error is the body of every error response.
type Error struct {
	Error string `json:"error"`
	// Code is one of the Code values.
	Code string `json:"code"`
}

// Error codes.
const (
	CodeBadInput  = "bad_input" // 400: the request is malformed or names bad input
	CodeForbidden = "forbidden" // 403: the peer may not use the agent
	CodeNotFound  = "not_found" // 404: no such endpoint
	CodeConflict  = "conflict"  // 409: the address is held on another interface
	CodeTooLarge  = "too_large" // 413: the request is over MaxRequestBytes
	CodeInternal  = "internal"  // 500: the agent failed
	CodeShutdown  = "shutting_down"
)

// ClaimFromStatus converts the engine's status of a claim for clients.
func ClaimFromStatus(s announce.Status, now time.Time, defaults announce.EngineConfig) Claim {
	cv := newClaimConverter(now, defaults)
	return cv.claim(&s)
}

// ClaimsFromStatus converts the engine's status of every claim for
// clients, as ClaimFromStatus does one.
func ClaimsFromStatus(st []announce.Status, now time.Time, defaults announce.EngineConfig) []Claim {
	cv := newClaimConverter(now, defaults)
	out := make([]Claim, len(st))
	for i := range st {
		out[i] = cv.claim(&st[i])
	}
	return out
}

// claimConverter formats each frame set once rather than once per claim:
// thousands of claims share a handful.
type claimConverter struct {
	now        time.Time
	defaults   announce.EngineConfig
	frames     announce.Frames
	framesText string
}

func newClaimConverter(now time.Time, defaults announce.EngineConfig) *claimConverter {
	return &claimConverter{now: now, defaults: defaults, frames: defaults.Frames, framesText: defaults.Frames.String()}
}

func (cv *claimConverter) framesString(f announce.Frames) string {
	if f != cv.frames {
		cv.frames, cv.framesText = f, f.String()
	}
	return cv.framesText
}

func (cv *claimConverter) claim(s *announce.Status) Claim {
	c := Claim{
		Addr:             s.Addr.String(),
		Interface:        s.Interface,
		MAC:              s.MAC,
		State:            s.State,
		ClaimedAt:        s.ClaimedAt,
		RefreshedAt:      s.RefreshedAt,
		WindowEnd:        s.WindowEnd,
		Answered:         s.Answered,
		GratuitousFrames: s.GratuitousFrames,
		Assigned:         s.AddedAddress,
		Window:           Duration(cv.defaults.Burst.Window),
		Interval:         Duration(cv.defaults.Burst.Interval),
		RefreshEvery:     Duration(s.Options.RefreshEvery),
		OnConflict:       string(s.Options.OnConflict),
	}
	if c.OnConflict == "" {
		c.OnConflict = string(announce.PolicyDefend)
	}
	for _, cl := range s.Claimers {
		c.Claimers = append(c.Claimers, Claimer{MAC: cl.MAC.String(), Kind: cl.Kind, FirstSeen: cl.FirstSeen, LastSeen: cl.LastSeen, Count: cl.Count})
	}
	if w := s.Options.Window; w > 0 {
		c.Window = Duration(w)
	}
	if i := s.Options.Interval; i > 0 {
		c.Interval = Duration(i)
	}
	f := cv.defaults.Frames
	if s.Options.Frames != 0 {
		f = s.Options.Frames
	}
	c.Frames = cv.framesString(f)
	if !s.WindowEnd.IsZero() && s.WindowEnd.After(cv.now) {
		c.WindowRemaining = Duration(s.WindowEnd.Sub(cv.now).Round(time.Millisecond))
	}
	return c
}

// Plan is a validated claim request: what the engine is asked to do.
type Plan struct {
	Requests []announce.Request
	Options  announce.ClaimOptions
}

// Validate checks r like the command line checks its flags and arguments,
// against the host's interfaces, and returns the plan. Errors about the
// input satisfy errors.Is(err, netcheck.ErrInvalid).
func (r ClaimRequest) Validate(sys netcheck.System) (Plan, error) {
	var p Plan
	if len(r.Addrs) > MaxAddrs {
		return p, netcheck.Invalidf("%d addresses in one request: give at most %d", len(r.Addrs), MaxAddrs)
	}
	addrs, err := netcheck.ParseAddrs(r.Addrs)
	if err != nil {
		return p, err
	}
	opts := announce.ClaimOptions{Assign: r.Assign}
	if opts.OnConflict, err = announce.ParseConflictPolicy(r.OnConflict); err != nil {
		return p, netcheck.Invalidf("on-conflict: %v", err)
	}
	if r.ProbeEvery != nil {
		switch pe := time.Duration(*r.ProbeEvery); {
		case pe < 0:
			return p, netcheck.Invalidf("probe-every %v is negative: give a period such as 10s, or 0 to turn probing off", pe)
		case pe == 0:
			opts.ProbeEvery = -1
		case pe < time.Second:
			return p, netcheck.Invalidf("probe-every %v is too short: give at least 1s", pe)
		default:
			opts.ProbeEvery = pe
		}
	}
	if r.Frames != "" {
		if opts.Frames, err = announce.ParseFrames(r.Frames); err != nil {
			return p, netcheck.Invalidf("frames: %v", err)
		}
	}
	frames := opts.Frames
	if frames == 0 {
		frames = announce.DefaultFrames
	}
	if r.Window != nil {
		switch w := time.Duration(*r.Window); {
		case w < 0:
			return p, netcheck.Invalidf("window %v is negative: give a duration such as 5s, or 0 for a single round", w)
		case w == 0:
			opts.Window = time.Nanosecond // shorter than any interval: one round
		default:
			opts.Window = w
		}
	}
	switch i, e := time.Duration(r.Interval), time.Duration(r.RefreshEvery); {
	case i != 0 && i < MinInterval:
		return p, netcheck.Invalidf("interval %v is too short: give at least %v (the default %v stays above Linux's 1 s neighbour locktime)", i, MinInterval, announce.DefaultInterval)
	case e < 0:
		return p, netcheck.Invalidf("refresh-every %v is negative: give a period such as 30s, or 0 to turn it off", e)
	case e > 0 && e < time.Second:
		return p, netcheck.Invalidf("refresh-every %v is too short: give at least 1s", e)
	default:
		opts.Interval, opts.RefreshEvery = i, e
	}
	var picker *netcheck.Picker
	links := map[string]netcheck.Link{}
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

// ParseAddrsRequest checks the addresses of a refresh or release request.
// With All set, no addresses may be given.
func ParseAddrsRequest(r AddrsRequest) ([]netip.Addr, error) {
	if r.All {
		if len(r.Addrs) > 0 {
			return nil, netcheck.Invalidf("give addresses or all, not both")
		}
		return nil, nil
	}
	if len(r.Addrs) > MaxAddrs {
		return nil, netcheck.Invalidf("%d addresses in one request: give at most %d", len(r.Addrs), MaxAddrs)
	}
	out := make([]netip.Addr, 0, len(r.Addrs))
	for _, s := range r.Addrs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, netcheck.Invalidf("%q is not an IP address", s)
		}
		out = append(out, a.Unmap())
	}
	if len(out) == 0 {
		return nil, netcheck.Invalidf("no address given: name at least one, or all")
	}
	return out, nil
}

// Strings formats addresses for a response.
func Strings(addrs []netip.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}
