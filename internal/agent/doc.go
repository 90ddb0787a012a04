// Package agent is the vip agent: it holds claims that outlive the command
// that made them, serves the HTTP API of package api on a unix socket, keeps
// its claims in a state file beside the socket so that a new agent re-adopts
// them after a crash, and follows interface changes.
//
// Server is the HTTP side, over an Engine interface, so the handlers are
// tested with a fake engine. Run puts the real pieces together.
package agent
