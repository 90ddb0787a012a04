package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// DefaultPrefix is where vip keeps its records unless --store-prefix says
// otherwise.
const DefaultPrefix = "/vip/"

// The kinds of record, each under its own part of the prefix.
const (
	nodesDir    = "nodes/"
	claimsDir   = "claims/"
	standbyDir  = "standby/"
	movesDir    = "moves/"
	inboxDir    = "inbox/"
	cordonsDir  = "cordons/"
	lingerDir   = "lingering/"
	historyDir  = "history/"
	failsafeDir = "failsafe/"
)

// maxRecordBytes bounds a value vip will decode: anything larger under the
// prefix is not one of vip's records.
const maxRecordBytes = 64 << 10

// Interface is one of a node's interfaces as its agent registers it.
type Interface struct {
	Name string `json:"name"`
	MAC  string `json:"mac,omitempty"`
	Up   bool   `json:"up"`
	// Prefixes are the interface's own addresses with their lengths, so
	// that a move can tell which interface reaches an address.
	Prefixes []netip.Prefix `json:"prefixes,omitempty"`
}

// Node is a live agent's registration.
type Node struct {
	Versioned
	Node       string      `json:"node"`
	Version    string      `json:"version"`
	Host       string      `json:"host"`
	PID        int         `json:"pid"`
	BootID     string      `json:"boot_id,omitempty"`
	Started    time.Time   `json:"started"`
	LeaseTTL   Duration    `json:"lease_ttl"`
	Interfaces []Interface `json:"interfaces"`
	// Stopped is when the agent stopped for a restart (vip agent
	// --on-stop keep), leaving its lease and keys to its successor on
	// the host: zero while it runs, and for an agent that died.
	Stopped time.Time `json:"stopped,omitzero"`
	// FailsafeKey is the public half of the agent's failsafe key (base64
	// Ed25519), and Failsafe where it answers failsafe questions
	// (ADDR:PORT, UDP): empty when its failsafe is off.
	FailsafeKey string `json:"failsafe_key,omitempty"`
	Failsafe    string `json:"failsafe,omitempty"`
	// FailsafeDH is the public half of the X25519 key the failsafe key
	// derives (base64; failsafe.Keyring): two nodes that both have one
	// agree a key and authenticate their questions and answers with it,
	// not with signatures. Empty from an older vip.
	FailsafeDH string `json:"failsafe_dh,omitempty"`
	// Lease is the agent's lease, read from the key (not stored in it);
	// CreateRev the revision the key was created at.
	Lease     int64 `json:"lease,omitempty"`
	CreateRev int64 `json:"-"`
	// Unreadable is a record that did not decode (read, not stored),
	// kept by the failsafe's reads as a node that cannot promise: an
	// owner's set names it by its revision all the same.
	Unreadable bool `json:"-"`
}

// FailsafeSet is who an owner with the failsafe asks while the store is
// unreachable, for its lease Lease: every node whose record it read at
// revision Rev, which is every live node whose record was created at Rev
// or before (Names). No lease binds it: it outlives the owner's lease, so
// that a node that is not in it knows, once that lease is gone, that the
// owner did not ask it and may still answer on the others' promises.
//
// It names its nodes by revision, not by name, from format 2 on
// (FailsafeFormat): a set of names, rewritten by every owner at every
// node that joined, was O(N) bytes written N times by N owners for a
// fleet forming. An owner writes a Rev no lower than the last it wrote
// while the key stands, so that a node the set names stays named: a take
// compares that no set was created since it read them, and a set
// rewritten since does not fail it (Guard). Nodes is format 1's list of
// names, read from an older vip's set, never written.
type FailsafeSet struct {
	Versioned
	Node  string   `json:"node"`
	Lease int64    `json:"lease"`
	Rev   int64    `json:"rev"`
	Nodes []string `json:"nodes,omitempty"`
	// AloneMS, in a set that names no other node, is how long after its
	// lease ends, however it ends, the owner may still answer on
	// failsafe alone, in milliseconds: a node that finds the lease gone
	// takes nothing through the store for that long.
	AloneMS int64 `json:"alone_ms,omitempty"`
	// ModRev and CreateRev are the key's, read (not stored).
	ModRev    int64 `json:"-"`
	CreateRev int64 `json:"-"`
	// Unreadable is a set that did not decode (read, not stored): it
	// holds every other node's takes until it is cleared.
	Unreadable bool `json:"-"`
}

// OwnAddress says on which interface a is one of the node's own addresses
// (an address of its interfaces as the node registered them, which its
// kernel answers for): not vip's to hand over, nor to move there.
func (n Node) OwnAddress(a netip.Addr) (ifname string, ok bool) {
	for _, ifc := range n.Interfaces {
		for _, p := range ifc.Prefixes {
			if p.Addr() == a {
				return ifc.Name, true
			}
		}
	}
	return "", false
}

// Claim is the record of an address's one owner.
type Claim struct {
	Versioned
	Addr      netip.Addr `json:"addr"`
	Node      string     `json:"node"`
	Interface string     `json:"interface"`
	MAC       string     `json:"mac,omitempty"`
	Since     time.Time  `json:"since"`
	// Options are the claim's settings as the owning agent encodes them,
	// so that a move or a standby takes the address with the same ones.
	Options json.RawMessage `json:"options,omitempty"`
	// Home is the node the address was moved or taken from, where it
	// lives when it is at home (vip uncordon --return takes it back);
	// empty while it is there, or was never moved.
	Home string `json:"home,omitempty"`
	// Group is the unit the address belongs to (vip claim --group): its
	// addresses have one owner, taken, moved and released together in
	// one transaction. Empty for an address on its own.
	Group string `json:"group,omitempty"`
	// Lease is the owner's lease, read from the key.
	Lease int64 `json:"lease,omitempty"`
}

// Standby is a node registered to take an address when its owner's lease
// expires.
type Standby struct {
	Versioned
	Addr      netip.Addr      `json:"addr"`
	Node      string          `json:"node"`
	Interface string          `json:"interface"`
	Since     time.Time       `json:"since"`
	Options   json.RawMessage `json:"options,omitempty"`
	// Group is the claim's group: a standby of a group takes all of
	// its addresses in one transaction, or none.
	Group string `json:"group,omitempty"`
	Lease int64  `json:"lease,omitempty"`
}

// Move is a move under way. The mover writes it; the owner adds Released
// in the transaction that deletes its claim; the target adds Live once it
// answers, or Error when it could not take the address, and deletes it.
type Move struct {
	Versioned
	Addr      netip.Addr      `json:"addr"`
	To        string          `json:"to"`
	Interface string          `json:"interface"`
	From      string          `json:"from,omitempty"`
	ID        string          `json:"id"`
	Asked     time.Time       `json:"asked"`
	Options   json.RawMessage `json:"options,omitempty"`
	Released  time.Time       `json:"released,omitzero"`
	// Taken is when the target took the key: the time of its history
	// record of the move. Live is when it answered.
	Taken time.Time `json:"taken,omitzero"`
	Live  time.Time `json:"live,omitzero"`
	Error string    `json:"error,omitempty"`
	// TrafficWindow, when set, asks the target to count the traffic that
	// arrives for the address over that long once it is live, and to
	// write it in Traffic before it deletes the record.
	TrafficWindow Duration `json:"traffic_window,omitempty"`
	Traffic       *Traffic `json:"traffic,omitempty"`
	// Home is what the target records as the address's home (see
	// Claim.Home): empty when To is its home.
	Home string `json:"home,omitempty"`
	// TakeOver says a take-over asked for it; Actor who asked and why:
	// what the target records in the history when it takes the address.
	TakeOver bool `json:"take_over,omitempty"`
	Actor
}

// Traffic is what arrived for an address at its new owner in the window
// after a move. Counted is false where the owner cannot count it (its
// responder is the sockets').
type Traffic struct {
	Counted bool     `json:"counted"`
	Packets uint64   `json:"packets"`
	Bytes   uint64   `json:"bytes"`
	Window  Duration `json:"window"`
}

// Cordon keeps new claims off a node: no move, take-over or standby's
// takeover makes it the owner of an address while the cordon holds (a
// forced move excepted), and what it holds stays until it is drained.
type Cordon struct {
	Versioned
	Node   string    `json:"node"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	Since  time.Time `json:"since"`
	// Until, when set, is when the cordon lifts itself. Its key lives
	// under a lease that ends then, so that it goes with nobody
	// connected; readers take it as lifted from Until on all the same,
	// since etcd renews every lease in full when its leader changes.
	Until time.Time `json:"until,omitzero"`
	// Rev is the key's modification revision, read from the key: a
	// takeover and a move compare it, so that a cordon written since they
	// looked refuses them.
	Rev int64 `json:"-"`
}

// Active says whether the cordon holds at now.
func (c Cordon) Active(now time.Time) bool { return c.Until.IsZero() || now.Before(c.Until) }

// Describe says what the cordon is in a phrase: since when, why, by whom
// and for how long more.
func (c Cordon) Describe(now time.Time) string {
	var parts []string
	if c.Reason != "" {
		parts = append(parts, fmt.Sprintf("reason %q", c.Reason))
	}
	if c.By != "" {
		parts = append(parts, "by "+c.By)
	}
	if c.Until.IsZero() {
		parts = append(parts, "until uncordoned")
	} else {
		parts = append(parts, fmt.Sprintf("%s left", c.Until.Sub(now).Round(time.Second)))
	}
	return fmt.Sprintf("node %s is cordoned since %s (%s)", c.Node, c.Since.Local().Format("2006-01-02 15:04:05"), strings.Join(parts, ", "))
}

// Keys names the records under one prefix.
type Keys struct{ Prefix string }

// NewKeys returns the keys under prefix, which must start and end with a
// slash (CheckPrefix).
func NewKeys(prefix string) Keys { return Keys{Prefix: prefix} }

// CheckPrefix says whether prefix can hold vip's records.
func CheckPrefix(prefix string) error {
	if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") || len(prefix) > 256 {
		return fmt.Errorf("--store-prefix %q must start and end with a slash, such as %s", prefix, DefaultPrefix)
	}
	return nil
}

// Node is the key of a node's registration.
func (k Keys) Node(node string) string { return k.Prefix + nodesDir + node }

// Failsafe is the key of node's failsafe set (FailsafeSet); Failsafes
// the prefix of them all.
func (k Keys) Failsafe(node string) string { return k.Prefix + failsafeDir + node }
func (k Keys) Failsafes() string           { return k.Prefix + failsafeDir }

// Claim is the key of addr's owner.
func (k Keys) Claim(a netip.Addr) string { return k.Prefix + claimsDir + a.String() }

// Standby is the key of node's standby for addr.
func (k Keys) Standby(a netip.Addr, node string) string {
	return k.Prefix + standbyDir + a.String() + "/" + node
}

// Move is the key of a move of addr.
func (k Keys) Move(a netip.Addr) string { return k.Prefix + movesDir + a.String() }

// Inbox is the key that tells node of a move of addr that concerns it: the
// mover writes one for the target and one for the owner, the owner one for
// the target once it let go. Each agent watches its own inbox alone, so a
// move reaches two agents, not the whole fleet. Its value is empty.
func (k Keys) Inbox(node string, a netip.Addr) string {
	return k.Prefix + inboxDir + node + "/" + a.String()
}

// Cordon is the key of node's cordon.
func (k Keys) Cordon(node string) string { return k.Prefix + cordonsDir + node }

// Lingering is the key of node's Lingering record.
func (k Keys) Lingering(node string) string { return k.Prefix + lingerDir + node }

// InboxOf is the directory of node's inbox.
func (k Keys) InboxOf(node string) string { return k.Prefix + inboxDir + node + "/" }

// Nodes, Claims, Standbys and Moves are the directories of each kind.
func (k Keys) Nodes() string    { return k.Prefix + nodesDir }
func (k Keys) Claims() string   { return k.Prefix + claimsDir }
func (k Keys) Standbys() string { return k.Prefix + standbyDir }
func (k Keys) Moves() string    { return k.Prefix + movesDir }
func (k Keys) Cordons() string  { return k.Prefix + cordonsDir }

// Kind says what a key under the prefix names.
type Kind int

// The kinds of key.
const (
	KindUnknown Kind = iota
	KindNode
	KindClaim
	KindStandby
	KindMove
	KindInbox
	KindCordon
	KindLingering
	KindFailsafe
)

// Parsed is a key under the prefix, split.
type Parsed struct {
	Kind Kind
	Addr netip.Addr
	Node string
}

// Parse splits key. A key vip did not write gives an error that says so.
func (k Keys) Parse(key string) (Parsed, error) {
	rest, ok := strings.CutPrefix(key, k.Prefix)
	if !ok {
		return Parsed{}, fmt.Errorf("key %q is not under %s", key, k.Prefix)
	}
	switch {
	case strings.HasPrefix(rest, nodesDir), strings.HasPrefix(rest, cordonsDir), strings.HasPrefix(rest, lingerDir), strings.HasPrefix(rest, failsafeDir):
		kind, dir := KindNode, nodesDir
		switch {
		case strings.HasPrefix(rest, cordonsDir):
			kind, dir = KindCordon, cordonsDir
		case strings.HasPrefix(rest, lingerDir):
			kind, dir = KindLingering, lingerDir
		case strings.HasPrefix(rest, failsafeDir):
			kind, dir = KindFailsafe, failsafeDir
		}
		n := rest[len(dir):]
		if err := CheckNode(n); err != nil {
			return Parsed{}, err
		}
		return Parsed{Kind: kind, Node: n}, nil
	case strings.HasPrefix(rest, claimsDir), strings.HasPrefix(rest, movesDir):
		kind, dir := KindClaim, claimsDir
		if strings.HasPrefix(rest, movesDir) {
			kind, dir = KindMove, movesDir
		}
		a, err := netip.ParseAddr(rest[len(dir):])
		if err != nil || a.Zone() != "" {
			return Parsed{}, fmt.Errorf("key %q does not end in an IP address", key)
		}
		return Parsed{Kind: kind, Addr: a}, nil
	case strings.HasPrefix(rest, inboxDir):
		n, as, ok := strings.Cut(rest[len(inboxDir):], "/")
		a, err := netip.ParseAddr(as)
		if !ok || err != nil || CheckNode(n) != nil {
			return Parsed{}, fmt.Errorf("key %q is not %sNODE/ADDR", key, k.Prefix+inboxDir)
		}
		return Parsed{Kind: KindInbox, Addr: a, Node: n}, nil
	case strings.HasPrefix(rest, standbyDir):
		as, n, ok := strings.Cut(rest[len(standbyDir):], "/")
		a, err := netip.ParseAddr(as)
		if !ok || err != nil || CheckNode(n) != nil {
			return Parsed{}, fmt.Errorf("key %q is not %sADDR/NODE", key, k.Standbys())
		}
		return Parsed{Kind: KindStandby, Addr: a, Node: n}, nil
	}
	return Parsed{}, fmt.Errorf("key %q is none of vip's records", key)
}

// CheckNode says whether name can name a node: a host name's characters.
func CheckNode(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("a node name must be 1 to 253 characters")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return fmt.Errorf("node name %q may hold only letters, digits, '-', '.' and '_'", name)
		}
	}
	return nil
}

// OptionsGroup is the group named in a claim's encoded options (what
// Claim.Options, Standby.Options and Move.Options hold), if any.
func OptionsGroup(opts json.RawMessage) string {
	var o struct {
		Group string `json:"group"`
	}
	if len(opts) == 0 || json.Unmarshal(opts, &o) != nil {
		return ""
	}
	return o.Group
}
