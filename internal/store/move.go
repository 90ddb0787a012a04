package store

// The records of a move, and its outcome. The protocol itself, the
// mover's transactions and the owner's and the target's, is package
// fleet's (fleet.Mover, fleet.Member).

import (
	"encoding/json"
	"errors"
	"net/netip"
	"time"
)

// MoveRequest asks for addresses to move to a node.
type MoveRequest struct {
	// Addrs are the addresses to move; with All, every address From holds.
	Addrs []netip.Addr
	All   bool
	// Group moves every address of that group (with Addrs, their groups'
	// addresses come too: a group moves whole).
	Group string
	From  string
	To    string
	// Interface is the target's interface; empty picks the one whose
	// prefix holds each address, else the one the owner uses.
	Interface string
	// Timeout bounds the whole move; zero waits as long as the owners'
	// leases make necessary (MoveTimeout).
	Timeout time.Duration
	// Options, when set, are the claim options the target claims with;
	// otherwise it takes the owner's.
	Options json.RawMessage
	// TrafficWindow, when set, has the target count the traffic arriving
	// for each address over that long once it is live, and Move wait for
	// it: the proof that traffic follows the move.
	TrafficWindow time.Duration
	// Force moves to a cordoned node all the same.
	Force bool
	// Home, when set, is the home the addresses take (Claim.Home);
	// otherwise a moved address keeps its home, or makes the node it
	// leaves its home if it has none.
	Home string
	// TakeOver says the move is vip claim --take-over's, for the history.
	TakeOver bool
	// Actor is who asked, and why, for the history.
	Actor Actor
}

// MoveResult is how one address's move went, in the mover's own clock
// (so that no two hosts' clocks are compared).
type MoveResult struct {
	Addr      netip.Addr `json:"addr"`
	From      string     `json:"from,omitempty"`
	To        string     `json:"to"`
	Interface string     `json:"interface"`
	Asked     time.Time  `json:"asked"`
	// Released is when the old owner's key was gone: deleted by it after
	// it stopped answering, or expired with its lease (Waited).
	Released time.Time `json:"released,omitzero"`
	// Taken is when the target took the key, Live when it answered. Each
	// time is the move record's, written where it happened (the owner's
	// release, the target's take), as the history records them: the
	// mover's own clock only for what no record says (an owner that did
	// not answer, whose key expired).
	Taken time.Time `json:"taken,omitzero"`
	Live  time.Time `json:"live,omitzero"`
	// Waited says the old owner did not answer, so the move waited for
	// its lease to expire.
	Waited bool `json:"waited,omitempty"`
	// Traffic is what arrived at the target in the window after it was
	// live, when the move asked for it.
	Traffic *Traffic `json:"traffic,omitempty"`
	// Unheld says nobody held the address: the move was a claim on To.
	Unheld bool `json:"unheld,omitempty"`
	// Already says To held it already: nothing changed.
	Already bool   `json:"already,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Done reports whether the address is live on the target.
func (r MoveResult) Done() bool { return r.Error == "" && (r.Already || !r.Live.IsZero()) }

// MoveTimeout is how long a move waits by default: an owner that does not
// answer is waited for until its lease expires, twice over, plus time to
// claim.
func MoveTimeout(ttl time.Duration) time.Duration { return 2*ttl + 10*time.Second }

// ErrRefused marks a move refused before anything changed.
var ErrRefused = errors.New("move refused")
