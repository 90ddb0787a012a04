// Package event is the one definition of an event that the engine publishes
// and the agent's clients read: what happened to a claim or an interface. It
// is types alone, so that a client (the live view, vip events) reads events
// without linking the engine.
package event

import (
	"fmt"
	"net/netip"
	"time"
)

// Kind names what an Event reports.
type Kind string

// The kinds of Event, as `vip events` prints them.
const (
	Claim   Kind = "claim"
	Refresh Kind = "refresh"
	Release Kind = "release"
	// Suspend reports claims stopped at once by the fleet's fence, kept
	// to resume when it lifts. Its kind on the wire is still "revoke"
	// for this release, as scripts may match it; the next one writes
	// "suspend" ("revoke" is also an etcd lease's end).
	Suspend    Kind = "revoke"
	BurstStart Kind = "burst-start"
	BurstEnd   Kind = "burst-end"
	Interface  Kind = "interface"
	Conflict   Kind = "conflict"
	// OwnerChange reports an address this host does not hold moving to
	// another MAC, or flip-flopping back.
	OwnerChange Kind = "owner-change"
	// Missed tells a slow subscriber how many events it missed. Its kind
	// on the wire is still "lost" for this release, as scripts may match
	// it; the next one writes "missed" ("lost" is a claim's state: taken
	// by another node).
	Missed Kind = "lost"
	// Fence reports an agent that could not renew its lease in the store
	// stopping every guarded claim. Resume reports claims taken back
	// rather than claimed anew: with an address, one claim of this host
	// taken again after the agent's restart (from the state file), after
	// a fence, or after a move that gave up; without one, the fleet's
	// summary once the store answers again after a fence.
	Fence  Kind = "fence"
	Resume Kind = "resume"
	// Taken reports a claim another node took while this one was fenced.
	Taken Kind = "taken"
	// Move reports an address moving to or from this node; Standby one
	// this node took as a standby when its owner's lease expired.
	Move    Kind = "move"
	Standby Kind = "standby"
	// Cordon reports this node cordoned (it takes no address by move,
	// take-over or standby) or uncordoned.
	Cordon Kind = "cordon"
	// Withheld counts frames not sent because a guarded agent's answer
	// deadline had passed (its lease not renewed in time); Stall reports
	// an agent that did not run past that deadline (frozen or starved)
	// once it runs again: for how long, whether its lease expired, and
	// who holds its addresses now. A withheld event's Count is the frames
	// held back since the last one; a stall's, the addresses lost.
	Withheld Kind = "withheld"
	Stall    Kind = "stall"
	// Failsafe reports an owner that answers past its lease's deadline
	// while the store is unreachable, every other node having promised
	// to take none of its addresses meanwhile (state "failsafe"), and
	// its end once the store is back (state "store").
	Failsafe Kind = "failsafe"
	// HookFailed reports a hook (vip agent --on-change) that exited
	// non-zero, ran past its timeout or could not start, and changes
	// that no hook will see (dropped from a full queue, missed by a
	// slow reader); it is never retried.
	HookFailed Kind = "hook-failed"
)

// The names the next release writes for the kinds renamed in this one
// (Suspend, Missed). This release reads them too (ThisRelease), so that its
// clients understand an agent of the next release in a fleet being
// upgraded.
const (
	SuspendNext Kind = "suspend"
	MissedNext  Kind = "missed"
)

// ThisRelease returns k under this release's name: the kinds the next
// release renames come back under the names this one writes.
func (k Kind) ThisRelease() Kind {
	switch k {
	case SuspendNext:
		return Suspend
	case MissedNext:
		return Missed
	}
	return k
}

// Event is one thing that happened to a claim or an interface.
type Event struct {
	Time      time.Time  `json:"time"`
	Kind      Kind       `json:"kind"`
	Addr      netip.Addr `json:"addr,omitzero"`
	Interface string     `json:"interface,omitempty"`
	MAC       string     `json:"mac,omitempty"`
	State     string     `json:"state,omitempty"`
	// Rounds and Frames count a finished burst; Count the events lost.
	Rounds int `json:"rounds,omitempty"`
	Frames int `json:"frames,omitempty"`
	Count  int `json:"count,omitempty"`
	// To, on an event that changes this node's place for Addr, is that
	// place after it: one of the states below. Peer is the other side of
	// the change when known: the node that held the address or takes it
	// (a standby's former owner, a move's source or target, the node that
	// took it while this one was down), or a competing claimer's MAC.
	// They are what programs read (hooks); Message is for people.
	// From is the place before it, and Reason says why, as a code (the
	// Reason constants), so that one kind's several transitions (a
	// standby added, set, removed, or taking over; a move away, here, or
	// given up) are told apart without reading Message.
	From   State  `json:"from,omitempty"`
	To     State  `json:"to,omitempty"`
	Peer   string `json:"peer,omitempty"`
	Reason Reason `json:"reason,omitempty"`
	// Message says in words what happened, for logs and terminals.
	Message string `json:"message,omitempty"`
}

// Reason is why an event changed this node's place for an address: a
// stable code for programs, beside the event's Message for people.
type Reason string

// The reasons.
const (
	// ReasonStandbyAdded: made a standby by vip claim --standby.
	ReasonStandbyAdded Reason = "standby-added"
	// ReasonStandbySet: made a standby in the store (vip standby).
	ReasonStandbySet Reason = "standby-set"
	// ReasonStandbyRemoved: removed from the standbys (vip standby --remove).
	ReasonStandbyRemoved Reason = "standby-removed"
	// ReasonOwnerExpired: took the address as a standby, its owner's
	// lease having expired.
	ReasonOwnerExpired Reason = "owner-expired"
	// ReasonMovedAway: let go of the address for a move; it stands by.
	ReasonMovedAway Reason = "moved-away"
	// ReasonMovedHere: took the address a move brought here.
	ReasonMovedHere Reason = "moved-here"
	// ReasonMoveGaveUp: kept the address, the move having given up
	// before it was handed over.
	ReasonMoveGaveUp Reason = "move-gave-up"
	// ReasonTakenWhileFenced: another node took the address while this
	// one was fenced.
	ReasonTakenWhileFenced Reason = "taken-while-fenced"
	// ReasonTakenWhileDown: another node took the address while this
	// node's agent was down (found when the next one started).
	ReasonTakenWhileDown Reason = "taken-while-down"
	// ReasonYielded: released to a competing claimer (--on-conflict
	// yield).
	ReasonYielded Reason = "yielded"
)

// State is this node's place for an address, as an event's To says it.
type State string

// The states.
const (
	StateNone    State = "none"
	StateOwner   State = "owner"
	StateStandby State = "standby"
	StateFenced  State = "fenced"
	StateLost    State = "lost"
)

// Summary describes the event in words, without its time: kind, address,
// interface, MAC, counts and message, each when present.
func (ev Event) Summary() string {
	s := string(ev.Kind)
	if ev.Addr.IsValid() {
		s += " " + ev.Addr.String()
	}
	if ev.Interface != "" {
		s += " on " + ev.Interface
	}
	if ev.MAC != "" {
		s += " mac " + ev.MAC
	}
	if ev.Rounds > 0 {
		s += fmt.Sprintf(" rounds=%d frames=%d", ev.Rounds, ev.Frames)
	}
	if ev.Count > 0 {
		s += fmt.Sprintf(" count=%d", ev.Count)
	}
	if ev.Message != "" {
		s += ": " + ev.Message
	}
	return s
}
