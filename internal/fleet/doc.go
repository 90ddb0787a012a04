// Package fleet guards an agent's claims with a lease in the coordination
// store (package store has the layout), so that no two hosts ever answer
// for one address.
//
// A Member is the agent's place in the fleet. It holds one lease, renewed
// every TTL/6, and registers the node under it, with the host's interfaces
// and their own addresses; when those change (InterfacesChanged) it writes
// the registration again, if it is still its own. A claim goes live only once
// a transaction has created the address's key, bound to that lease; a key
// another node holds refuses the claim with a HeldError. A release stops
// answering first and deletes the key after, so whoever takes the address
// next never overlaps with this host.
//
// Fencing: the store expires a lease TTL after the last renewal reached it.
// The member counts from the moment it sent its last renewal that
// succeeded, which is earlier, and revokes every guarded claim from the
// engine (no more answers, no gratuitous frames, added addresses removed)
// once TTL minus a margin has passed without another: the margin (a quarter
// of the TTL, at least the renewal period plus half a second) covers a
// renewal in flight and clocks that run at slightly different rates. The
// fenced claims stay in status as "fenced"; when the store answers again, a
// key still this node's resumes with a fresh burst, a free one is taken
// again, and one that another node took is reported lost to it.
//
// Moves and standbys are carried by the store's watch: a Mover (vip move,
// a take-over) plans the move and writes a move record that names the
// target; the owner releases, then deletes its key and marks the move
// released in one transaction; the target takes the key once it is gone and
// marks the move live once it answers. A standby takes an address whose key
// vanished with its owner's lease (the owner dead or fenced, never a
// planned release or move), and a transaction picks exactly one standby.
//
// Every one of those transactions, the mover's too, goes through a Ledger,
// the store as the member sees it (ledger.go; over etcd in ledger_etcd.go), and every timer
// and time the member keeps runs on its Config.Clock: the member is the one
// owner of a claim's life, and its tests drive it over a store of memory on
// a fake clock (member_test.go), with the lab tests against a real etcd on
// top.
package fleet
