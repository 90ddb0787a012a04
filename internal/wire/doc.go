// Package wire is vip's one codec for the frames it sends and reads: ARP
// requests and replies for IPv4 over Ethernet, and IPv6 neighbor
// solicitations and advertisements with the Ethernet and IPv6 headers around
// them. vip reads and writes whole frames on packet sockets (so it can answer
// for an address on an interface that has none of its own, and see unicast
// solicitations the kernel would drop before an ICMPv6 socket saw them), so
// it needs these layers, which mdlayher/arp and mdlayher/ndp leave to the
// kernel.
//
// Parse reads a frame into a Frame: values (MAC, netip.Addr), not slices of
// the buffer, with no allocation. PutARP and PutND write a frame into a
// buffer the caller owns, also without allocating; ARPAnnouncement,
// ARPProbe, Advertisement and DADProbe say what vip's own frames hold.
// Every part of vip that reads or writes a frame goes through here: the
// responder (announce's answer path), the gratuitous rounds and the probes
// (announce's sender), the capture's decoder (sniff.Decode) and the load
// generator (tools/loadgen). A second parser would be a second opinion
// on what is valid.
//
// Parse is the one answer to "is this a valid request": RFC 4861 section
// 7.1's checks (hop limit 255, code 0, the checksum, a target that is not
// multicast, options of non-zero length that fit, a DAD probe to a
// solicited-node group without a source link-layer option), and for ARP
// Ethernet and IPv4 with their lengths. The responder and the capture differ
// only in how much framing they read, which is the Mode: Answer reads an
// untagged frame with the ICMPv6 message right after the IPv6 header, because
// that is all the responder's kernel filter lets through (it matches fixed
// offsets), and answering anything else would be answering what the filter
// was meant to drop; Capture also reads up to two VLAN tags and a short chain
// of IPv6 extension headers, because the capture's filter lets those in and
// a competing claimer's frames are worth seeing however they are framed. A
// frame the capture accepts and the responder does not is therefore
// ErrNotNeighbor to the responder, never a different verdict on the message.
//
// The kernel filters in front of the responder's and the capture's packet
// sockets read frames at the same offsets (EtherTypeOffset, ARPOpOffset,
// NDTargetOffset, ...). Asm assembles them, with named jump targets in
// place of counted offsets; OwnFramesOnly and InboundOnly are the checks a
// filter is put behind.
//
// Parse never panics on bad input: every frame it refuses yields an error
// wrapping one of ErrNotNeighbor, ErrTruncated, ErrMalformed or ErrInvalid
// that says why. Its tests hold it to mdlayher/arp, mdlayher/ndp (through
// test/wiretest) and gopacket, and FuzzParse fuzzes it.
package wire
