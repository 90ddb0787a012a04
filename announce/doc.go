// Package announce makes this host the owner of addresses on a layer-2
// segment: it answers who-has requests for them and tells the segment, with
// gratuitous advertisements, where they now live.
//
// The parts, each in a file of its own:
//
//   - The Engine (engine.go) holds the claims: it opens a Port per
//     interface, keeps the record in a Book, follows interface changes,
//     reacts to competing claimers (conflict.go) and publishes Events.
//   - The Scheduler (scheduler.go) is the single sender of every gratuitous
//     round and probe, on an injected clock and under one rate cap, so each
//     address has exactly one sender however many are held.
//   - A Port is one interface as the engine uses it. Link is the Port over
//     packet sockets, composed of three parts: a socketResponder answers
//     (responder.go, answer.go), a sender writes rounds and probes
//     (sender.go), and groups keeps the IPv6 multicast memberships
//     (groups.go). The answering part is the one an in-kernel responder can
//     replace.
//
// Words, used with one meaning each in the code, the flags, the JSON and the
// documentation:
//
//   - claim: this host holding an address on an interface, answering for it
//     and announcing it; also the record of that (Claim). Claiming an address
//     already held is a refresh.
//   - refresh: re-arming a claim's window from now, without changing who
//     holds it.
//   - release: giving a claim up: no more answers, no more rounds.
//   - answer: a unicast ARP reply or solicited neighbor advertisement to one
//     who-has request for a held address.
//   - round: one set of gratuitous frames for one address, the kinds of a
//     FrameKinds set that fit its family (two ARP frames, or one or two NAs).
//   - burst: the rounds of one window, one every interval.
//   - window: how long a burst goes on, counted from the latest claim or
//     refresh (5 s by default); a window shorter than the interval is one
//     round.
//   - interval: the time between two rounds of one address (1.1 s).
//   - probe: a request that whoever else holds the address answers (an
//     RFC 5227 ARP probe, a DAD solicitation), sent to find silent competing
//     claimers.
//   - claimer, competing claimer: another MAC seen answering for an address
//     held here: a split brain. Its claim state is conflict while one was
//     seen within ConflictHold.
//   - port: an interface opened for claims (Port); also, in netcheck, an
//     interface enslaved to a bridge or bond, which cannot be claimed on.
//   - book: where claims are recorded so that they outlive a crash (Book;
//     the agent's is the state file).
package announce
