// Package agent is the vip agent: it holds claims that outlive the command
// that made them, serves the HTTP API of package api on a unix socket, keeps
// its claims in a state file beside the socket so that a new agent re-adopts
// them after a crash, and follows interface changes.
//
// Its parts:
//   - Run is the agent, putting the pieces together: the socket's lock
//     and its peer credentials (Paths, GroupAllow, SelfAllow), the
//     state file, re-adoption, the server, and an autostarted agent's exit
//     once it holds nothing and nobody asks.
//   - Runtime is a claim engine at work with what watches for it: the
//     interface changes it follows (FollowInterfaces) and its Sniffer. The
//     agent runs one, and so does a foreground vip claim; ServeMetrics
//     serves a Runtime's Prometheus metrics.
//   - Sniffer watches the wire of every interface with a claim: it fills
//     the who-has table, tells the engine of competing claimers,
//     and reports ownership changes of other addresses as events.
//   - With a store configured, Run joins the fleet (package fleet) so that
//     every claim is guarded by the agent's lease, re-adopts a dead
//     agent's claims through the store, and keeps the node's registration
//     to this host's interfaces less the addresses vip says are its own.
//   - Server is the HTTP side, over the Engine, Watcher and Fleet
//     interfaces, so the handlers are tested with fakes. PlanClaim checks
//     a claim request against this host as the command line checks its
//     flags; EngineStatus and ClaimsFromStatus give the engine's state as
//     API types (EngineStatus writes its JSON a claim at a time, as it
//     goes).
//   - ResponderConfig sets what answers for the held addresses: the
//     in-kernel eBPF responder or the sockets (--responder).
package agent
