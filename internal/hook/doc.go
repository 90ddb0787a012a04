// Package hook runs the operator's program on each change of state of this
// node's claims (vip agent --on-change): became owner, released, fenced,
// lost, taken over as a standby, moved away or here.
//
// Its parts, in the order a change goes through them:
//   - Tracker reads the agent's events and says which are changes of
//     state, with the state before (it keeps each address's last one) and
//     after, the node taking over and the reason. In a guarded agent the
//     engine's claim or release comes first and the fleet's explanation
//     (a standby took over, a move) a moment later: a claim or release
//     waits up to Settle for it, so that the hook runs once, knowing why.
//   - Follow is the loop between them: it reads a subscription and only
//     enqueues, so that a slow hook never delays the engine, whose
//     publisher drops what a subscriber does not read in time.
//   - Runner runs the program for each Change, one at a time per address
//     in the order of the changes, a few addresses at once, each run in a
//     process group of its own that is killed whole at its timeout. Its
//     queue per address is bounded: the oldest change not yet run is
//     dropped, and said so, rather than the caller ever waiting. A
//     failure (non-zero exit, timeout, no start) is logged with the
//     program's last output and reported as a hook-failed event, never
//     retried.
package hook
