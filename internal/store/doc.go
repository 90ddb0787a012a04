// Package store is vip's view of the coordination store, etcd v3: where the
// fleet's records live under a prefix, how each is encoded, and the
// client, with the fleet's view that vip fleet reads.
//
// The layout under the prefix (default /vip/):
//
//	nodes/NODE          a live agent: version, interfaces and MACs (its lease)
//	claims/ADDR         the one owner of ADDR: node, interface, MAC, since (its lease)
//	standby/ADDR/NODE   a node ready to take ADDR when its owner's lease expires
//	moves/ADDR          a move under way: to NODE, asked when, released when
//	inbox/NODE/ADDR     a move that concerns NODE (its target or owner)
//
// Every record but a move is bound to its agent's one lease, so a dead or
// cut-off agent's records vanish together when the lease expires, and a
// transaction that creates a key only if it is absent decides every
// contest: no two nodes ever own a key. The agent side, which turns those
// keys into answers on the wire and fences itself when it cannot renew its
// lease, is package fleet, and so is every transaction on these keys,
// a move's included (fleet.Mover); this package links nothing of the
// engine, so vip fleet and vip move stay small clients.
package store
