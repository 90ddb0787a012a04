// Package api is the contract between the vip agent and its clients: the
// JSON requests and responses of the HTTP API served on the agent's unix
// socket, their validation (the same as on the command line, so the agent
// refuses bad input with the same sentence), and a client.
//
// The endpoints, all under /v1:
//
//	POST /v1/claims   ClaimRequest   -> ClaimResponse
//	POST /v1/refresh  AddrsRequest   -> RefreshResponse
//	POST /v1/release  AddrsRequest   -> ReleaseResponse
//	GET  /v1/status                  -> StatusResponse
//	GET  /v1/status?indent=true      -> StatusResponse indented by two spaces
//	GET  /v1/traffic                 -> TrafficResponse
//	GET  /v1/events                  -> a stream of Event, one JSON object a line
//
// With indent=true the status comes indented the way vip status --json
// prints it, which lets the command print the answer as it is; without, it
// is compact, like every other answer.
//
// Errors come back with a 4xx or 5xx status and an Error body.
package api
