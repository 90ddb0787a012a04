// Package wire builds and parses the Ethernet frames vip sends and reads:
// ARP requests and replies, and IPv6 neighbor solicitations and
// advertisements.
//
// The protocol messages themselves come from mdlayher/arp and mdlayher/ndp;
// this package adds the layers those libraries leave to the kernel (the
// Ethernet header, and for NDP the IPv6 header and its checksum), because vip
// sends and reads whole frames on packet sockets. That lets it answer for an
// address on an interface that has no address of its own, and see unicast
// solicitations that the kernel would drop before an ICMPv6 socket saw them.
//
// Parsers never panic on bad input: every frame that does not parse yields an
// error that says why.
package wire
