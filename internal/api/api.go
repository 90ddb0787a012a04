package api

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/event"
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
	// Reason is why, kept in the store's history with the change. By
	// names who asked, as user@host: the agent takes it from a client
	// running as root (the user behind sudo), and names any other client
	// by its socket's credentials.
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
	// Interface applies to every address; empty picks the interface whose
	// connected route holds each address.
	Interface string `json:"interface,omitempty"`
	// Window, Interval and Frames shape the gratuitous bursts. Each
	// setting here follows one rule: absent (nil, or an empty string)
	// takes the agent's default, and a value given means that value,
	// zero included. So a zero Window is a single round and a zero
	// Interval is refused as too short.
	Window   *Duration `json:"window,omitempty"`
	Interval *Duration `json:"interval,omitempty"`
	Frames   string    `json:"frames,omitempty"`
	// RefreshEvery re-arms the window on that period; absent or zero is
	// off, the default.
	RefreshEvery *Duration `json:"refresh_every,omitempty"`
	// Assign also adds each address to its interface.
	Assign bool `json:"assign,omitempty"`
	// OnConflict is what to do when another MAC answers for an address:
	// defend (default), warn or yield.
	OnConflict string `json:"on_conflict,omitempty"`
	// ProbeEvery is the period of probes for silent competing claimers;
	// absent takes the default (10s), zero is none.
	ProbeEvery *Duration `json:"probe_every,omitempty"`
	// Standby registers this node as a standby for the addresses (an
	// agent with a store only); TakeOver moves them here from whoever
	// holds them. At most one of the two.
	Standby  bool `json:"standby,omitempty"`
	TakeOver bool `json:"take_over,omitempty"`
	// Force, with TakeOver, moves them here even while this node is
	// cordoned (vip cordon).
	Force bool `json:"force,omitempty"`
	// Group makes the addresses one unit (see CheckGroup): all are
	// claimed or none, and they move and are released together.
	Group string `json:"group,omitempty"`
}

// ClaimResponse lists the claims as they are once live, and the addresses
// that were refused while the others were claimed. A request whose every
// address is refused gets an Error instead, unless every refusal is an
// address another node holds (code held): then Claims is empty and Refused
// names the node of each.
type ClaimResponse struct {
	Claims  []Claim   `json:"claims"`
	Refused []Refused `json:"refused,omitempty"`
}

// Refused is an address of a claim request that was not claimed.
type Refused struct {
	Addr  string `json:"addr"`
	Error string `json:"error"`
	// HeldBy and ClaimedAt name the node that holds the address in the
	// store and when it claimed it, when that is why (code held); Since
	// is ClaimedAt under its old name, written until the next release.
	HeldBy    string    `json:"held_by,omitempty"`
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
	Since     time.Time `json:"since,omitzero"`
	// Code is one of the Code values, as an Error would give it.
	Code string `json:"code"`
}

// AddrsRequest names addresses for refresh and release, or all of them.
type AddrsRequest struct {
	Addrs []string `json:"addrs,omitempty"`
	All   bool     `json:"all,omitempty"`
	// Group names the held addresses of that group instead (vip release
	// --group NAME); at most one of Addrs, All and Group.
	Group string `json:"group,omitempty"`
	// Reason and By are kept in the history, for a release (see
	// ClaimRequest).
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
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
	// Store is set when the agent's claims are guarded by a store.
	Store *Store `json:"store,omitempty"`
}

// Store describes the agent's place in the store.
type Store struct {
	Endpoints []string `json:"endpoints"`
	Prefix    string   `json:"prefix"`
	Node      string   `json:"node"`
	Lease     string   `json:"lease"`
	LeaseTTL  Duration `json:"lease_ttl"`
	// FenceAfter is how long after the last renewal sent the agent
	// fences; Renewed is that renewal.
	FenceAfter Duration  `json:"fence_after"`
	Renewed    time.Time `json:"renewed"`
	// Fenced is when the agent fenced; zero while it is not.
	Fenced time.Time `json:"fenced,omitzero"`
	// Unreachable says the store acknowledged no renewal for two renewal
	// periods (since Renewed): the agent answers on its last deadline,
	// then on failsafe (Failsafe), or fences.
	Unreachable bool `json:"unreachable,omitempty"`
	// Deadline is the answer deadline: no frame for a claim leaves after
	// it unless a renewal moves it (the last renewal acknowledged, plus
	// FenceAfter), checked where frames leave on CLOCK_BOOTTIME, shown
	// here as wall time. DeadlineLeft is how long until then, negative
	// once passed; Withheld counts the frames held back past it.
	// DeadlineClosed says the deadline is closed, not passed by itself:
	// the agent fenced, or the store has not yet granted its lease; it
	// answers nothing until a renewal is acknowledged (Deadline is then
	// zero).
	Deadline       time.Time `json:"deadline,omitzero"`
	DeadlineLeft   Duration  `json:"deadline_left"`
	DeadlineClosed bool      `json:"deadline_closed,omitempty"`
	Withheld       uint64    `json:"withheld"`
	// Cordon is this node's cordon while it holds (vip cordon).
	Cordon *Cordon `json:"cordon,omitempty"`
	// FailsafeEnabled says the agent runs with --failsafe; Failsafe is
	// set while it answers on failsafe.
	FailsafeEnabled bool      `json:"failsafe_enabled,omitempty"`
	Failsafe        *Failsafe `json:"failsafe,omitempty"`
	// FailsafeUnready, with the failsafe on, says why a store outage now
	// would find none: its set not in the store as its peers are yet
	// (written once the store answers), or a node that runs without it.
	FailsafeUnready string `json:"failsafe_unready,omitempty"`
	// Promised is the last-ending promise in force that this node made
	// to an owner answering on failsafe (or an earlier agent of it made):
	// it takes nothing through the store until it ends.
	Promised *Promise `json:"promised,omitempty"`
}

// Promise is this node's word to an owner answering on failsafe: it takes
// none of that owner's addresses before Until.
type Promise struct {
	Owner string    `json:"owner"`
	Until time.Time `json:"until"`
}

// Failsafe is an agent answering past its lease's deadline because the
// store is unreachable and every other node of the fleet said it does not
// reach it either and promised to take none of its addresses: since when,
// and who acknowledged the last round, when. An owner alone (its set
// names no other node) answers with no one to ask until AloneUntil.
type Failsafe struct {
	Since      time.Time `json:"since"`
	AckedBy    []string  `json:"acked_by"`
	AckedAt    time.Time `json:"acked_at"`
	AloneUntil time.Time `json:"alone_until,omitzero"`
}

// The states of a Claim: the engine's (announcing, holding, waiting,
// conflict), and those a guarded agent adds for the claims it keeps out of
// the engine (fenced, lost, standby). Status, the metrics, vip and the
// live view all say them in these words.
const (
	StateAnnouncing = "announcing" // a gratuitous window is running
	StateHolding    = "holding"    // answering; no window running
	StateWaiting    = "waiting"    // its interface is down or gone
	// StateConflict is a claim while another MAC was seen answering for
	// its address within the engine's conflict hold.
	StateConflict = "conflict"
	StateFenced   = "fenced"  // the agent cannot renew its lease: it answers nothing
	StateLost     = "lost"    // another node holds it in the store now
	StateStandby  = "standby" // taken when its owner's lease expires
)

// Claim is one held address as clients see it.
type Claim struct {
	Addr        string    `json:"addr"`
	Interface   string    `json:"interface"`
	MAC         string    `json:"mac"`
	State       string    `json:"state"` // one of the State constants
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
	// Group is the unit the address belongs to, if any.
	Group string `json:"group,omitempty"`
	// Note says what the store says of the claim, when it says anything
	// (fenced since when, lost to which node, standby for whom).
	Note string `json:"note,omitempty"`
	// Claimers are the other MACs seen answering for the address: a
	// split brain while any was seen recently (state "conflict").
	Claimers []Claimer `json:"claimers,omitempty"`
	// Responder says what answers for the address: "ebpf (tcx)" (or
	// another hook) in the kernel, "socket" in vip, "kernel" for an
	// address assigned to the interface; empty while the claim waits.
	Responder string `json:"responder,omitempty"`
	// Traffic is what arrives for the address, where the responder
	// counts it (eBPF); absent where it is unknown.
	Traffic *ClaimTraffic `json:"traffic,omitempty"`
}

// ClaimTraffic is the traffic arriving for a held address: packets and
// bytes whose IPv4 or IPv6 destination it is, since it was claimed, and
// their rates over the latest second or more.
type ClaimTraffic struct {
	Packets          uint64  `json:"packets"`
	Bytes            uint64  `json:"bytes"`
	PacketsPerSecond float64 `json:"packets_per_second"`
	BytesPerSecond   float64 `json:"bytes_per_second"`
}

// Claimer is a MAC other than ours that answers for a held address.
type Claimer struct {
	MAC string `json:"mac"`
	// Node is the fleet's node whose interface has MAC, where vip knows
	// it (vip probe with a store).
	Node      string    `json:"node,omitempty"`
	Kind      string    `json:"kind"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Count     uint64    `json:"count"`
}

// WhoHasResponse is the who-has table: the requests (ARP who-has,
// neighbor solicitations) seen on the wire, per target. "Traffic" is the
// packets that arrive for a held address (ClaimTraffic), not this.
type WhoHasResponse struct {
	Entries  []WhoHas      `json:"entries"`
	Captures []CaptureStat `json:"captures"`
	// Evicted counts targets dropped from the bounded table.
	Evicted uint64 `json:"evicted"`
}

// WhoHas is the who-has table's entry for one target address.
type WhoHas struct {
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
	// --watch-all). Empty until the capture is set up.
	Scope string `json:"scope,omitempty"`
	// FromResponder counts the held addresses of the interface whose
	// requests the who-has table counts from the in-kernel responder,
	// which answers them and remembers who asked, rather than from this
	// capture: it keeps only the frames that claim them (rivals), so
	// that it does not wake for every request (or, on XDP, never sees
	// them). Their requests are in the table all the same, within a
	// second.
	FromResponder int `json:"from_responder,omitempty"`
	// AfterIngress says the capture reads the frames the host's stack
	// receives, after tc ingress, where the in-kernel responder has
	// answered the requests for held addresses already, rather than
	// tapping every frame before it (which cost each answer a tenth to a
	// third of a microsecond).
	AfterIngress bool   `json:"after_ingress,omitempty"`
	Error        string `json:"error,omitempty"`
}

// Event is one entry of the agent's event stream: what happened to a
// claim or an interface (package event holds its one definition).
type Event = event.Event

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
	// CodeOtherInterface: 409, the address is held on another interface
	// of this host. Written "conflict" until the next release, which
	// writes NextCodeOtherInterface ("conflict" is also a competing
	// claimer's state); clients read both.
	CodeOtherInterface = "conflict"
	CodeHeld           = "held"      // 409: another node holds the address in the store
	CodeFenced         = "fenced"    // 503: the agent cannot renew its lease in the store
	CodeNoStore        = "no_store"  // 409: the request needs an agent with --store
	CodeTooLarge       = "too_large" // 413: the request is over MaxRequestBytes
	// The store refused the agent: its credentials (502), a permission
	// of its user (502), or it does not answer (504).
	CodeCredentials      = "credentials"
	CodeDenied           = "denied"
	CodeStoreUnreachable = "store_unreachable"
	CodeInternal         = "internal" // 500: the agent failed
	CodeShutdown         = "shutting_down"
)

// ParseAddrsRequest checks the addresses of a refresh or release request.
// With All set, no addresses may be given.
func ParseAddrsRequest(r AddrsRequest) ([]netip.Addr, error) {
	if r.Group != "" {
		if len(r.Addrs) > 0 || r.All {
			return nil, netcheck.Invalidf("give addresses, all or a group, one of the three")
		}
		return nil, CheckGroup(r.Group)
	}
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
			return nil, netcheck.Invalidf("%q is not an IP address: give one such as 192.0.2.10 or 2001:db8::10", s)
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

// MaxGroupLen bounds a group's name.
const MaxGroupLen = 64

// CheckGroup says whether name can name a group: 1 to 64 letters, digits,
// dots, dashes and underscores, starting with a letter or digit, so that
// it reads the same in a table, a store key and an environment variable.
func CheckGroup(name string) error {
	bad := len(name) == 0 || len(name) > MaxGroupLen
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '.' || r == '-' || r == '_'):
		default:
			bad = true
		}
	}
	if bad {
		return netcheck.Invalidf("group %q is not a group name: give 1 to %d letters, digits, dots, dashes or underscores, starting with a letter or digit, such as web-1", name, MaxGroupLen)
	}
	return nil
}

// FailsafeSetsResponse is vip failsafe --json: every owner's failsafe set
// (vip agent --failsafe) as the store has it.
type FailsafeSetsResponse struct {
	Sets []FailsafeSet `json:"sets"`
}

// FailsafeSet is the set of nodes an owner asks when the store is
// unreachable. While its owner's lease lives, it only says whom the owner
// would ask. Once the lease is gone (Lapsed), the owner may still answer on
// failsafe on the promises of Nodes, so the live nodes outside it (Holds)
// take nothing through the store until a node of the set clears it, or an
// operator does (vip failsafe clear) when the owner and its set are gone
// for good.
type FailsafeSet struct {
	Node  string `json:"node"`
	Lease string `json:"lease"`
	// Nodes are the live nodes the set names (the store keeps the
	// revision its owner read them at: a node that left since is not
	// listed, although the owner, cut off, would ask it too).
	Nodes  []string `json:"nodes"`
	Lapsed bool     `json:"lapsed"`
	Holds  []string `json:"holds,omitempty"`
	// NamedBefore, in a lapsed set, are the live nodes it named under an
	// earlier record of theirs (they joined again since): they keep the
	// promises they made the owner, and clear the set as its other
	// nodes do.
	NamedBefore []string `json:"named_before,omitempty"`
	// AloneMS, in a set that names no other node, is how long after its
	// lease ends the owner may still answer on failsafe alone.
	AloneMS int64 `json:"alone_ms,omitempty"`
	// Cleared is set by vip failsafe clear for the set it deleted.
	Cleared bool `json:"cleared,omitempty"`
}
