// Package lab builds a layer-2 test segment out of Linux network namespaces.
//
// A lab is one switch and a few hosts. The switch is a Linux bridge, br0, in a
// namespace of its own with IPv6 turned off, as on a real switch's ports. Each
// host is a namespace joined to the bridge by one or more veth pairs: eth0,
// eth1, … inside the host, "<host>-eth<n>" on the bridge. Addresses go on eth0
// only. IPv6 duplicate address detection and router solicitations are turned
// off in the hosts, so a capture shows what the test did and little else.
// Little, not nothing: for about a second after a link comes up its host sends
// MLD reports for its solicited-node groups, and the bridge, which snoops
// multicast, reports 224.0.0.106 (multicast router discovery) with IGMP.
//
// The bridge snoops MLD and IGMP as a switch does by default, but no querier
// runs on the segment, and without one the bridge keeps flooding multicast to
// every port. A host therefore sees neighbour solicitations for groups it
// never joined, where a switch with a querier would deliver them only to the
// ports that reported the group.
//
// Every namespace of a lab is named "<prefix>-<name>", the switch
// "<prefix>-sw". Up builds a lab and waits until every link is up and has its
// IPv6 link-local address; Down removes the namespaces again, and with them
// every link. Clean removes what a crashed run left behind.
//
// Nothing is ever created in the caller's own namespace: the veth pairs are
// made inside the switch namespace with their host ends placed straight into
// the host namespaces. The package drives iproute2 (ip, bridge) and sysctl,
// and needs root. The labtest package wraps it for tests.
package lab
