// Package bpfresp is vip's in-kernel responder: an eBPF program that answers
// ARP requests and IPv6 neighbor solicitations for the addresses vip holds,
// on the one interface it is attached to, with the answers the socket
// responder gives (announce/answer.go over internal/wire), without waking
// vip. A Responder implements announce.KernelResponder, so a Link can answer
// through it while it keeps its gratuitous rounds, probes and multicast
// groups.
//
// # Parts
//
// responder.c is the program, in two entry points over one parser: vip_tc
// for tcx ingress and vip_xdp for XDP. vipbpf.h declares the little of the
// kernel's BPF interface it uses, so compiling needs clang alone. The
// generate directive in gen.go compiles it with bpf2go into
// responder_bpfel.o and responder_bpfel.go (the loader, and Go types of
// the maps' keys and values read from the program's BTF, so that no Go
// struct mirrors a C one by hand), which are committed: building vip
// needs no clang, and TestGeneratedFresh fails when they are not what the
// sources compile to. responder.go loads and attaches the program and
// keeps its maps; cleanup.go finds what another vip left on an interface;
// errors.go turns the kernel's refusals into one sentence each.
//
// # What it answers
//
// Exactly what the socket responder answers, and the tests hold it to that:
// every frame of test/wiretest's Corpus (requests in every form, and
// frames one field away from them) goes through both, and the answers are
// byte-identical, or neither answers. So an ARP request for a held address
// (a probe from 0.0.0.0 included) gets a reply to the sender's MAC, or the
// frame's source when that is not unicast; a valid neighbor solicitation
// (RFC 4861 section 7.1.1, checksum included) for a held address, sent to
// its solicited-node group or to the address itself, gets a solicited
// advertisement with the override flag and a target link-layer option,
// to the source link-layer address or the frame's source; a DAD probe gets
// the advertisement to ff02::1 without the solicited flag. Frames from the
// interface's own MAC are not answered. Anything not answered passes on
// untouched. The reply is built over the request in place and goes back
// out of the same interface (tc: bpf_redirect to its egress; XDP: XDP_TX),
// cut or grown to its length (an ARP reply has no padding; an
// advertisement can be longer than a solicitation without an option).
// Two differences are deliberate: a VLAN-tagged frame, which the tcx hook
// can see on the parent of a VLAN interface with the tag taken off by the
// NIC, is passed on for the VLAN interface, as the codec's Answer mode
// refuses tagged frames; and a solicitation longer than 2048 bytes (the
// program's scratch buffer, a standard-MTU frame) is passed on, where the
// socket responder would answer it. No neighbour sends one.
//
// What the engine decides stays with the engine: which addresses to hold
// (none the kernel owns itself) and when. Joining each address's
// solicited-node group also stays with the Link: on a NIC that filters
// multicast, the solicitations arrive only once the group is joined.
//
// # Maps and counters
//
// "held" maps an interface index, an address family and a 16-byte address
// (IPv4 in its IPv4-mapped form) to the MAC to answer from; the index
// keeps each interface's addresses to itself. "counters", per CPU and
// under the same key, counts the requests answered and the traffic
// arriving: packets and bytes of frames whose IPv4 or IPv6 destination is
// the address, any protocol. On tcx ingress that is all the traffic in.
// Hold adds the counters before the address and LetGo removes the address
// first, so the program never finds one without the other; an address
// held again starts from zero, as in the socket responder.
//
// # Hooks
//
// TCX is the default because it is the safe one on a production host:
// tcx (Linux 6.6) lets programs share tc ingress, so vip's coexists with a
// CNI's or a firewall's; attaching reconfigures nothing; and packet taps
// run before tc ingress and see the egress of the answers, so tcpdump
// still sees every request and every answer (TestLabAnswers checks this).
// vip's own capture reads after tc ingress instead, where the requests the
// program answered never arrive, and the who-has table counts them from
// the askers the program remembers (Responder.Askers). XDP is opt-in. XDPGeneric runs on any driver
// but owns the interface's XDP hook; XDPNative is the fastest on drivers
// that have it, but attaching can reset the device (a link flap) and it
// too owns the hook. On both XDP hooks the frames answered never reach the
// taps: a capture on the interface sees neither the requests nor the
// answers (the lab test checks that too); the who-has table counts them
// from the askers all the same. A prototype on a lab veth found native XDP
// slower than generic there, and XDP_TX needing a program on the peer.
//
// # Lifetime
//
// The program stays attached as long as its link, and the link as long as
// the process that made it: nothing is pinned. When vip ends, even by
// kill -9, the kernel detaches the program and frees the maps, so a
// crashed agent does not go on answering for addresses a standby may now
// claim. Open first removes every vip program it finds on the interface
// (by its name's prefix, vip_, on tcx ingress and XDP), so exactly one
// answers even when another vip still runs there; Cleanup does the same
// alone, for vip agent --clean and vip lab down. Inspecting another
// process's program by its ID needs CAP_SYS_ADMIN; without it Open skips
// the programs it cannot read.
//
// # Errors
//
// Open's errors are one sentence naming the fix. Those that say the
// machine cannot run the responder (missing CAP_BPF, CAP_PERFMON or
// CAP_NET_ADMIN: without CAP_PERFMON the verifier's Spectre hardening
// refuses the program's pointer arithmetic; a
// kernel without tcx or the helpers the program calls, another program on
// the XDP hook, a driver without native XDP, a verifier that refuses the
// program) wrap ErrUnavailable, so that a caller can fall back to the
// socket responder. Missing kernel BTF is not among them: the program
// needs none.
package bpfresp
