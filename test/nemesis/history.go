package nemesis

import (
	"net/netip"
	"time"
)

// FrameKind says what a frame on the client's wire is to the checker.
type FrameKind uint8

const (
	// Request is a probe: an ARP request or a neighbor solicitation from
	// the client, carrying its sequence number.
	Request FrameKind = iota + 1
	// Reply answers a probe: an ARP reply or a neighbor advertisement
	// sent to the probe's sequence address.
	Reply
	// Announcement claims the address unasked: a gratuitous ARP request or
	// reply, or an unsolicited neighbor advertisement.
	Announcement
	// Accept is a TCP connection accepted on the address: a SYN-ACK sent
	// from it, by a service on a host that has it on an interface
	// (--assign). It answers no probe and fills no silence, but, like an
	// answer, may come only from the node that holds the key.
	Accept
)

// String names the kind as the report does.
func (k FrameKind) String() string {
	switch k {
	case Request:
		return "request"
	case Reply:
		return "reply"
	case Announcement:
		return "announcement"
	case Accept:
		return "connection accepted"
	}
	return "unknown"
}

// Frame is one ARP or NDP frame about a VIP, or a TCP connection accepted
// on it, as the client's capture saw it. At is the capture's kernel receive timestamp, on the same wall clock
// as the store's history (one kernel runs every lab host).
type Frame struct {
	At   time.Time
	Addr netip.Addr
	// MAC is the Ethernet source address, in net.HardwareAddr's form.
	MAC  string
	Kind FrameKind
	// Seq is the probe's sequence number (Request and Reply only).
	Seq uint32
}

// Claim is one change of an address's claim key in the store: Node took
// it at revision Rev, or the key was deleted (Node empty). Seen is the
// wall time the recorder's watch delivered it, no earlier than the commit.
// The checker brackets the commit more closely with the ticks' revisions,
// and with Written: the time the record itself says it was made at (its
// Since), which its writer reads before it sends the transaction, on the
// lab's one clock (zero: unknown, or a deletion).
type Claim struct {
	Seen    time.Time
	Rev     int64
	Addr    netip.Addr
	Node    string
	Written time.Time
}

// Injection is one fault the nemesis injected, from its start to the moment
// the system was seen settled after the heal; Target is the node (or etcd
// member) it hit.
type Injection struct {
	Kind    Kind
	Target  string
	Start   time.Time
	Healed  time.Time
	Settled time.Time
	// During is an operator's action run in the middle of the fault, or
	// zero.
	During Kind
	Note   string
}

// Exclusion is a window in which no node can be expected to answer for
// Addr (every address when Addr is the zero value), such as the store down
// or the address released on purpose: silence inside it is no failure.
type Exclusion struct {
	Addr       netip.Addr
	Start, End time.Time
	Why        string
}

// Silence is a window in which Node must send nothing for any VIP, no
// answer, announcement or accepted connection, whoever holds the key: a
// fault that must have fenced it (an owner on failsafe whose acknowledger
// became unreachable, nemesis.OutageAckCut).
type Silence struct {
	Node       string
	Start, End time.Time
	Why        string
}

// Window is a span of time, such as one in which the store can commit no
// change (History.Quiet).
type Window struct {
	Start, End time.Time
}

// Tick is one of the recorder's own writes to the store, sent at Sent and
// acknowledged at Done, committed at revision Rev. Revisions order every
// commit, so a change at a revision between two ticks' was committed after
// the earlier one was sent and before the later one was acknowledged: the
// ticks bracket the time of every change, whatever the watch's delay.
type Tick struct {
	Sent, Done time.Time
	Rev        int64
}

// History is everything a run recorded, all the checker reads.
type History struct {
	// Addrs are the VIPs probed.
	Addrs []netip.Addr
	// Nodes maps each agent's MAC to its node name.
	Nodes      map[string]string
	Frames     []Frame
	Claims     []Claim
	Injections []Injection
	Excluded   []Exclusion
	Silent     []Silence
	Ticks      []Tick
	// Quiet are the windows in which the store could commit nothing:
	// every member frozen or stopped, or too few for a quorum.
	Quiet []Window
	// Sent counts each address's probes as the prober sent them, where the
	// capture does not see its requests (a packet socket that bypasses
	// the queueing layer bypasses the capture's tap too).
	Sent map[netip.Addr]int
	// Start and End bound the probing.
	Start, End time.Time
}
