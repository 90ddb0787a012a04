package api

import "time"

// FleetResponse is the whole fleet as the store holds it: every live node
// and every claim, with its standbys and any move under way. vip fleet
// --json prints it, and /v1/fleet serves it.
type FleetResponse struct {
	Revision int64        `json:"revision"`
	Nodes    []FleetNode  `json:"nodes"`
	Claims   []FleetClaim `json:"claims"`
	// Cordons are the nodes' cordons that hold, live nodes or not.
	Cordons []Cordon `json:"cordons,omitempty"`
	// Unregistered are the nodes that stand by for an address (a standby
	// record is bound to no lease, and outlives its agent's) but have no
	// registration: their agents are stopped, or could not reach the
	// store for longer than their leases, which expired; the store cannot
	// tell which. Such a node registers again, and takes back what it
	// held, once it reaches the store.
	Unregistered []string `json:"unregistered,omitempty"`
	// Skipped are keys under the prefix that are not vip records.
	Skipped []FleetSkipped `json:"skipped,omitempty"`
}

// Cordon is a node's cordon: it takes no address by move, take-over or
// standby while it holds, and keeps what it holds. Until, when set, is
// when it lifts by itself, and Left how long until then.
type Cordon struct {
	Node   string    `json:"node"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until,omitzero"`
	Left   *Duration `json:"left,omitempty"`
}

// CordonResponse is what vip cordon and vip uncordon print with --json:
// the cordon as written, or as it was when lifted (Lifted; nil when there
// was none).
type CordonResponse struct {
	Cordon *Cordon `json:"cordon,omitempty"`
	Lifted bool    `json:"lifted"`
	// Replaced is the cordon vip cordon wrote over, if any.
	Replaced *Cordon `json:"replaced,omitempty"`
	// Live says whether the node is alive in the store now: a node may be
	// cordoned before it comes back.
	Live bool `json:"live"`
	// Moves are the moves home of vip uncordon --return.
	Moves []MoveResult `json:"moves,omitempty"`
}

// FleetNode is a live agent.
type FleetNode struct {
	Node       string           `json:"node"`
	Version    string           `json:"version"`
	Host       string           `json:"host"`
	PID        int              `json:"pid"`
	Started    time.Time        `json:"started"`
	LeaseTTL   Duration         `json:"lease_ttl"`
	Interfaces []FleetInterface `json:"interfaces"`
	// RenewedAgo is how long before the read the node's last renewal
	// reached the store, and LeaseLeft what was left of its lease, as
	// etcd says them (to the second); absent when not read.
	RenewedAgo *Duration `json:"renewed_ago,omitempty"`
	LeaseLeft  *Duration `json:"lease_left,omitempty"`
	// Health is what the renewals say: live; stale, renewals stopped (the
	// node is dead, frozen or cut off from the store); fenced, stopped
	// so long that the node, if it runs, has fenced (answers nothing).
	Health string `json:"health,omitempty"`
}

// The health of a FleetNode.
const (
	HealthLive   = "live"
	HealthStale  = "stale"
	HealthFenced = "fenced"
)

// FleetInterface is one of a node's interfaces.
type FleetInterface struct {
	Name     string   `json:"name"`
	MAC      string   `json:"mac,omitempty"`
	Up       bool     `json:"up"`
	Prefixes []string `json:"prefixes,omitempty"`
}

// The states of a FleetClaim.
const (
	// FleetHolding: its owner's lease is alive. Written "held" until
	// the next release, which writes NextFleetHolding, a claim's word.
	FleetHolding = "held"
	FleetMoving  = "moving" // a move of it is under way
	// FleetTakingOver is a move a take-over asked for (vip claim
	// --take-over): its target takes it from the owner.
	FleetTakingOver = "taking-over"
	FleetFree       = "free" // nobody holds it: only standbys, or a move, name it
	// FleetUnknown is an address nobody holds in the store, none of
	// whose standbys is registered: its owner's lease expired, or it was
	// released, and the nodes that name it are stopped or cut off from
	// the store (see FleetResponse.Unregistered), so whether it is free
	// or about to be taken back cannot be read from the store.
	FleetUnknown = "unknown"
	// FleetUnrenewed and FleetFenced are a held address whose owner's
	// renewals stopped: it may answer still (unrenewed), or has fenced.
	// FleetUnrenewed is written "stale" until the next release, which
	// writes NextFleetUnrenewed ("stale" is also a node's health).
	FleetUnrenewed = "stale"
	FleetFenced    = "fenced"
)

// FleetClaim is an address in the store: its owner, standbys and move.
type FleetClaim struct {
	Addr      string `json:"addr"`
	Node      string `json:"node,omitempty"`
	Interface string `json:"interface,omitempty"`
	MAC       string `json:"mac,omitempty"`
	// ClaimedAt is when its owner claimed or took it; Since is the
	// same under its old name, written until the next release.
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
	Since     time.Time `json:"since,omitzero"`
	State     string    `json:"state"`
	Standbys  []string  `json:"standbys,omitempty"`
	MovingTo  string    `json:"moving_to,omitempty"`
	// Home is the node the address was moved or taken from, while it is
	// away from it (vip uncordon --return takes it back).
	Home string `json:"home,omitempty"`
	// Group is the address's group (vip claim --group), if any.
	Group string `json:"group,omitempty"`
}

// FleetSkipped is a key that could not be read as a vip record.
type FleetSkipped struct {
	Key   string `json:"key"`
	Error string `json:"error"`
}

// MoveRequest asks for addresses to move to a node (POST /v1/move).
type MoveRequest struct {
	Addrs []string `json:"addrs,omitempty"`
	// All with From moves every address From holds (what vip drain does
	// after its cordon).
	All bool `json:"all,omitempty"`
	// Group moves every address of that group, wherever it is held.
	Group     string   `json:"group,omitempty"`
	From      string   `json:"from,omitempty"`
	To        string   `json:"to"`
	Interface string   `json:"interface,omitempty"`
	Timeout   Duration `json:"timeout,omitempty"`
	// TrafficWindow, when set, has the target count the traffic arriving
	// for each address over that long once it is live, and the move wait
	// for the count.
	TrafficWindow Duration `json:"traffic_window,omitempty"`
	// Force moves to a cordoned node all the same.
	Force bool `json:"force,omitempty"`
	// Home, when set, is the home the moved addresses take.
	Home string `json:"home,omitempty"`
	// Reason and By are kept in the history (see ClaimRequest).
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
}

// MoveResponse says how each address's move went.
type MoveResponse struct {
	Moves []MoveResult `json:"moves"`
}

// MoveTraffic is what arrived for a moved address at its new owner over the
// window after it was live. Counted is false where the new owner cannot
// count it (it answers on sockets, not in the kernel).
type MoveTraffic struct {
	Counted bool     `json:"counted"`
	Packets uint64   `json:"packets"`
	Bytes   uint64   `json:"bytes"`
	Window  Duration `json:"window"`
}

// MoveResult is one address's move, its timeline in milliseconds since it
// was asked, in the mover's clock.
type MoveResult struct {
	Addr      string    `json:"addr"`
	From      string    `json:"from,omitempty"`
	To        string    `json:"to"`
	Interface string    `json:"interface"`
	Asked     time.Time `json:"asked"`
	// ReleasedMS is when the old owner's key was gone; TakenMS when the
	// target took it (the time its history record says); LiveMS when the
	// target answered. Each is absent (nil) when it did not happen.
	ReleasedMS *float64 `json:"released_ms,omitempty"`
	TakenMS    *float64 `json:"taken_ms,omitempty"`
	LiveMS     *float64 `json:"live_ms,omitempty"`
	// Waited says the old owner did not answer: the move waited for its
	// lease to expire.
	Waited bool `json:"waited,omitempty"`
	// Traffic is what arrived for the address at the target in the
	// window after it was live (vip move --traffic-window), when asked.
	Traffic *MoveTraffic `json:"traffic,omitempty"`
	// Unheld says nobody held the address: the move was a claim.
	Unheld bool `json:"unheld,omitempty"`
	// Already says the target held it already.
	Already bool   `json:"already,omitempty"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// DrainResponse is what vip drain prints with --json: the node's cordon,
// each move, and per address what still reached the node after it.
type DrainResponse struct {
	Node   string       `json:"node"`
	Cordon *Cordon      `json:"cordon,omitempty"`
	Moves  []MoveResult `json:"moves"`
	// Quiet is the time without traffic asked for (--quiet); zero when
	// the drain did not wait.
	Quiet Duration `json:"quiet"`
	// Addrs are the moved addresses as the node counted them after.
	Addrs []DrainAddr `json:"addrs,omitempty"`
	// Done says every moved address is quiet (or the drain did not wait).
	Done bool `json:"done"`
}

// DrainAddr is what reached the drained node for one address after it let
// it go: packets sent to its MAC, the last one's time (the node's clock),
// and who sent them (hosts whose caches still name it).
type DrainAddr struct {
	Addr string `json:"addr"`
	To   string `json:"to"`
	// Counted says the node counted the address after its release.
	Counted bool `json:"counted"`
	// Quiet says nothing new reached it for the quiet asked for (at the
	// drained node; each of Formers says its own).
	Quiet   bool          `json:"quiet"`
	Packets uint64        `json:"packets"`
	Bytes   uint64        `json:"bytes"`
	Last    time.Time     `json:"last,omitzero"`
	Senders []DrainSender `json:"senders,omitempty"`
	// MoreSenders is how many senders the node left out, and MorePackets
	// how many packets they sent. Packets less these and the senders'
	// came from senders the node no longer remembers (Unremembered).
	MoreSenders int    `json:"more_senders,omitempty"`
	MorePackets uint64 `json:"more_packets,omitempty"`
	// Formers are the other nodes that let the address go before the
	// drain and still count what reaches it: hosts whose caches name
	// them get no answer. The drain is done only once each is quiet too.
	Formers []DrainFormer `json:"formers,omitempty"`
}

// DrainFormer is what reached a former owner of a drained address since
// the drain first read its count.
type DrainFormer struct {
	Node    string        `json:"node"`
	Quiet   bool          `json:"quiet"`
	Packets uint64        `json:"packets"`
	Last    time.Time     `json:"last,omitzero"`
	Senders []DrainSender `json:"senders,omitempty"`
}

// Unremembered is how many of the packets came from senders the node no
// longer remembered when it counted them (it keeps a bounded number of
// senders; the address's own count is exact). A count from an agent that
// did not say what the senders it left out sent (MoreSenders without
// MorePackets) tells nothing of it: zero.
func (a DrainAddr) Unremembered() uint64 {
	if a.MoreSenders > 0 && a.MorePackets == 0 {
		return 0
	}
	told := a.MorePackets
	for _, s := range a.Senders {
		told += s.Packets
	}
	// The senders are read before the address's count, so their sum is
	// the smaller but for a packet counted between the two reads.
	return a.Packets - min(told, a.Packets)
}

// DrainSender is one host that sent to the drained node for an address.
type DrainSender struct {
	MAC     string    `json:"mac"`
	From    string    `json:"from"`
	Packets uint64    `json:"packets"`
	Last    time.Time `json:"last"`
}

// StandbyResponse is what vip standby prints with --json: for each
// address, whether the node stands by for it now.
type StandbyResponse struct {
	Node  string          `json:"node"`
	Addrs []StandbyChange `json:"addrs"`
}

// StandbyChange is one address's standby on the node: added (with its
// interface), removed, or as it was (Already).
type StandbyChange struct {
	Addr      string `json:"addr"`
	Interface string `json:"interface,omitempty"`
	Standby   bool   `json:"standby"`
	Already   bool   `json:"already,omitempty"`
}
