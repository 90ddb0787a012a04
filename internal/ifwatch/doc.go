// Package ifwatch follows the interfaces of a network namespace through an
// rtnetlink subscription, so that the agent learns when a claimed interface
// goes down, comes back up, changes its MAC address, is deleted, or returns
// under the same name as a new interface; and, when asked, when an address
// is added to an interface or removed from it, so that the node's
// registration in the store can say which addresses are the host's own.
//
// Watch first reports the current state of every interface, then each change
// as the kernel announces it. The kernel sends many RTM_NEWLINK messages that
// change nothing an operator sees (statistics, carrier counters, queue
// settings); Watch passes on only those that change whether the interface is
// up, its MAC address, its index, or whether it exists. Of the address
// messages (RTM_NEWADDR, RTM_DELADDR) it passes on those that add an address
// or remove one, not those that change its flags or lifetimes.
package ifwatch
