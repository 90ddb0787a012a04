package sniff

import (
	"fmt"
	"strings"
)

// BaseFilter returns the libpcap expression every capture starts from: ARP,
// and ICMPv6 neighbor solicitations (type 135) and advertisements (136)
// directly after the IPv6 header or behind one or two extension headers of
// the kinds a neighbor discovery message may carry (hop-by-hop options,
// destination options, routing). MLD reports, which come behind a
// hop-by-hop header, do not pass. Neither does a frame that still carries
// a VLAN tag when the filter runs; on Linux the kernel has taken the tag off
// by then, on the VLAN's own interface and on its parent alike.
//
// libpcap's "ip6 protochain 58" would follow any chain, but it compiles to
// a loop, which the kernel refuses; libpcap then filters in user space and
// every frame on the interface is copied to the process. The offsets here
// are spelled out instead, so the whole filter runs in the kernel.
func BaseFilter() string {
	ext := func(next string) string {
		return fmt.Sprintf("(%[1]s == 0 or %[1]s == 60 or %[1]s == 43)", next)
	}
	ndp := func(off string) string {
		return fmt.Sprintf("(ip6[%[1]s] == 135 or ip6[%[1]s] == 136)", off)
	}
	// Where the header after the first and after the second extension
	// header starts; an extension header's length is in 8-byte units, not
	// counting the first 8 bytes.
	second := "40 + (ip6[41] + 1) * 8"
	third := fmt.Sprintf("%[1]s + (ip6[%[1]s + 1] + 1) * 8", second)
	return strings.Join([]string{
		"arp",
		fmt.Sprintf("(ip6[6] == 58 and %s)", ndp("40")),
		fmt.Sprintf("(%s and ip6[40] == 58 and %s)", ext("ip6[6]"), ndp(second)),
		fmt.Sprintf("(%s and %s and ip6[%s] == 58 and %s)", ext("ip6[6]"), ext("ip6[40]"), second, ndp(third)),
	}, " or ")
}
