// Package api is the contract between the vip agent and its clients: the
// JSON requests and responses of the HTTP API served on the agent's unix
// socket, the syntax checks of what a client may send, and a client. It links
// nothing of the engine, the capture or netlink (a test holds it to that), so
// a client such as the live view carries none of them: checking a request
// against this host's interfaces, and converting the engine's state into
// these types, are the agent's (agent.PlanClaim, agent.ClaimsFromStatus).
//
// The endpoints, all under /v1:
//
//	POST /v1/claims   ClaimRequest   -> ClaimResponse
//	POST /v1/refresh  AddrsRequest   -> RefreshResponse
//	POST /v1/release  AddrsRequest   -> ReleaseResponse
//	GET  /v1/status                  -> StatusResponse
//	GET  /v1/status?indent=true      -> StatusResponse indented by two spaces
//	GET  /v1/whohas                  -> WhoHasResponse (also at /v1/traffic, this release)
//	GET  /v1/whohas?sort=ORDER       -> WhoHasResponse by rate (the default), requests,
//	                                    last-seen or addr
//	GET  /v1/events                  -> a stream of Event, one JSON object a line
//	GET  /v1/fleet                   -> FleetResponse
//	POST /v1/move     MoveRequest    -> MoveResponse
//
// /v1/fleet and /v1/move need an agent whose claims are guarded in a store
// (started with --store); any other agent answers them with a 409 and
// CodeNoStore.
//
// With indent=true the status comes indented the way vip status --json
// prints it, which lets the command print the answer as it is; without, it
// is compact, like every other answer.
//
// Errors come back with a 4xx or 5xx status and an Error body.
//
// ProbeResponse is no endpoint's: it is what vip probe --json prints, a
// command that needs no agent, defined here with the rest of vip's JSON.
package api
