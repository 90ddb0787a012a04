// Package assign adds claimed addresses to interfaces, so that local services
// receive their traffic, and removes them again.
//
// The rule it keeps is that vip removes only what vip added. Add reports
// whether it added the address; an address that was already on the interface,
// with any prefix length, is left alone and reported as not added, and the
// caller must then never call Remove for it. Remove deletes only the host
// prefix (/32 or /128) that Add puts on, so even a mistaken Remove cannot take
// away an operator's 192.0.2.10/24.
//
// IPv6 addresses are added without duplicate address detection (IFA_F_NODAD):
// the claim has already taken the address on the segment, and a tentative
// address would not be usable for a second or more.
//
// An address can be given a valid lifetime (AddFor), which Extend lengthens:
// the kernel removes the address by itself when the lifetime runs out, for
// IPv4 and IPv6 alike. A guarded agent gives its addresses lifetimes that end
// by its answer deadline, so that an agent that is killed, or frozen, takes
// them with it on time: nothing of the host answers for them or accepts
// their traffic once its lease may have expired. The kernel counts a lifetime
// in whole seconds from the last change, and its check of lifetimes runs up
// to a quarter of a second after one ends (measured here: removed 2.01-2.18 s
// after a lifetime of 2 s was set).
//
// The kernel takes added IPv6 addresses away when the interface goes down
// (unless net.ipv6.conf.*.keep_addr_on_down is set), and every address when
// the interface is deleted; add them again when it comes back.
package assign
