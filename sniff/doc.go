// Package sniff watches the neighbour traffic of a layer-2 segment: who asks
// for which address, who answers, and who else claims an address this host
// holds.
//
// The parts fit together in one direction:
//
//   - A Capture reads Ethernet frames from a Source. Open makes one on an
//     interface with libpcap, with a kernel filter that lets only ARP and
//     IPv6 neighbor solicitations and advertisements reach the process;
//     OpenFile reads a saved capture.
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
// Open, OpenFile and Filter use libpcap through cgo (pcap.go). A build
// without cgo keeps the rest of the package and has those three return
// ErrNoLibpcap, so that vip still builds with CGO_ENABLED=0.
package sniff
