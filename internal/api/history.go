package api

import "time"

// HistoryChange is one change of the store's history, as vip history
// --json prints it: when (in the writer's clock) and at which revision of
// the store, what changed (kind, address or node, from where), and who
// asked and why.
type HistoryChange struct {
	Revision int64 `json:"revision"`
	// Rev is Revision under its old name (the one word of the response
	// that said rev beside revision), kept for one release: read
	// Revision.
	Rev       int64     `json:"rev"`
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	Addr      string    `json:"addr,omitempty"`
	Node      string    `json:"node"`
	From      string    `json:"from,omitempty"`
	Interface string    `json:"interface,omitempty"`
	Group     string    `json:"group,omitempty"`
	// By is the user and host that ran the command; Identity the user
	// the store authenticated the writer as; Reason the --reason given.
	By       string `json:"by,omitempty"`
	Identity string `json:"identity,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Asked and Released are a move's timeline before Time, when the
	// target took the address.
	Asked    time.Time `json:"asked,omitzero"`
	Released time.Time `json:"released,omitzero"`
	// FencedAt is when a fence began; Since is the same under its old
	// name, written until the next release.
	FencedAt time.Time `json:"fenced_at,omitzero"`
	Since    time.Time `json:"since,omitzero"`
	// Addrs are the addresses of a node-wide change, Count how many there
	// were (Addrs lists at most 256).
	Addrs   []string `json:"addrs,omitempty"`
	Count   int      `json:"count,omitempty"`
	Message string   `json:"message,omitempty"`
	// Summary says it in words, as vip history prints it.
	Summary string `json:"summary"`
}

// HistoryResponse is vip history --json: the changes, oldest first, read
// at the store's revision Revision; Skipped counts records vip could not
// read.
type HistoryResponse struct {
	Revision int64           `json:"revision"`
	Changes  []HistoryChange `json:"changes"`
	Skipped  int             `json:"skipped,omitempty"`
}
