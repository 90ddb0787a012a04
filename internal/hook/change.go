package hook

import (
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/event"
)

// State is what this node is for an address, as a hook sees it: the
// events' own (event.State), which say it in their To.
type State = event.State

// The states in VIP_OLD_STATE and VIP_NEW_STATE.
const (
	// None: this node neither holds the address nor stands by for it.
	None = event.StateNone
	// Owner: this node answers for the address.
	Owner = event.StateOwner
	// Standby: this node takes the address if its owner's lease expires.
	Standby = event.StateStandby
	// Fenced: this node could not renew its lease and answers nothing,
	// keeping the claim to resume.
	Fenced = event.StateFenced
	// Lost: another node took the address while this one was fenced.
	Lost = event.StateLost
)

// Change is one change of state of one of this node's claims: what a hook
// runs for.
type Change struct {
	// Event says what happened, in words of vip's events: claim,
	// release, fence, resume, taken, standby, move or conflict.
	Event     string
	Addr      netip.Addr
	Interface string
	// Group is the address's group (vip claim --group), if any.
	Group    string
	Old, New State
	// Node is this node; Peer the one taking the address over or handing
	// it here, when known.
	Node   string
	Peer   string
	Reason string
	// Code is the event's reason as a code (event.Reason: standby-added,
	// owner-expired, moved-away, ...), for a hook to match on; empty for
	// a claim, release, fence or resume, which Event says whole.
	Code string
	Time time.Time
}

// Env is c as the hook's environment variables, added to the agent's own.
func (c Change) Env() []string {
	addr := ""
	if c.Addr.IsValid() {
		addr = c.Addr.String()
	}
	return []string{
		"VIP_EVENT=" + c.Event,
		"VIP_ADDR=" + addr,
		"VIP_INTERFACE=" + c.Interface,
		"VIP_GROUP=" + c.Group,
		"VIP_OLD_STATE=" + string(c.Old),
		"VIP_NEW_STATE=" + string(c.New),
		"VIP_NODE=" + c.Node,
		"VIP_PEER=" + c.Peer,
		"VIP_REASON=" + c.Reason,
		"VIP_REASON_CODE=" + c.Code,
		"VIP_TIME=" + c.Time.UTC().Format(time.RFC3339Nano),
	}
}
