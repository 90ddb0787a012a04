// Package sniff watches the neighbour traffic of a layer-2 segment: who asks
// for which address, who answers, and who else claims an address this host
// holds.
//
// The parts fit together in one direction:
//
//   - A Capture reads Ethernet frames from a Source. Open makes one on an
//     interface, a packet socket with a kernel filter that lets only ARP
//     and IPv6 neighbor solicitations and advertisements reach the process.
//   - Decode turns each frame into an Observation: an ARP who-has, probe,
//     reply or gratuitous announcement, or a neighbor solicitation
//     (address resolution, unreachability detection, duplicate address
//     detection) or advertisement. It parses with vip's one frame codec,
//     internal/wire, in its Capture mode: the responder's verdict on what
//     is valid, with VLAN tags and extension headers read too. A frame that
//     does not decode is counted in the capture's Stats and skipped.
//   - Observers take the observations. A Table counts, per target address,
//     the requests, their rate, who asks and which MACs answer, in bounded
//     memory. A Detector reports competing claimers of the addresses this
//     host holds (RFC 5227 section 2.4) and, for every other address,
//     owner changes and flip-flops as arpwatch does.
//
// Nothing here keeps global state or reads the wall clock on its own: time
// comes from the observations' capture timestamps, and where "now" matters
// (a Table's request rate) from a clock the caller passes in. Table and
// Detector work on observations alone, so they are tested without a network
// or privileges; only Open needs CAP_NET_RAW.
//
// The live capture is pure Go (live_linux.go): a packet socket made with
// socket(2) (a tap of every frame, or with Options.AfterIngress an ARP and
// an IPv6 socket that read after tc ingress), read in batches of up to 64
// frames a system call (internal/batchio, as the responder's readers are),
// waited on in poll(2) with an eventfd that interrupt and Close poke, which
// costs nothing while no frame comes, and read at most every readPace while
// the capture keeps up. It stays out of the Go runtime's poller on purpose: a
// socket in the poller's epoll set wakes the poller for every frame that
// comes after a read, waited for or not, and at 20,000 requests/s those
// wake-ups took the answers' median reply from 25 to 36 µs (vipbench, same
// machine); mdlayher/packet's Conn, which the responder uses, is in it.
// Its kernel filter is baseProgram, the BaseFilter expression built in
// classic BPF here, with Narrow's prefix in front. gopacket's afpacket
// would read a TPACKET_V3 ring, but it needs cgo and waits in poll(2)
// without a way to end the wait but a timeout, which wakes it every timeout
// while idle. libpcap's reads wait inside C, which keeps the runtime's
// monitor thread waking (reading libpcap's own descriptor through the
// poller needed gopacket's unexported handle, by reflection). A packet
// socket's buffer holds frames only while they wait, where a ring is
// resident.
//
// libpcap, through cgo (pcap.go), does what users want it for: a user's
// filter expression (pcap-filter(7)), which it compiles to classic BPF for
// the same socket. pcap.go opens libpcap (dlopen) at the first expression
// and calls pcap_compile itself: through gopacket/pcap, whose import
// linked gopacket/layers, its start-up tables cost every vip process 6-8
// MB and 3-4 ms, and linking libpcap loaded its own chain of libraries in
// every process. Where libpcap is missing, Filter refuses an expression
// with an error wrapping ErrLibpcapMissing. A build without cgo captures all the
// same; there Filter refuses an expression, with an error wrapping
// ErrNoLibpcap.
package sniff
