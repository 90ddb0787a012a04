package announce

import (
	"fmt"
	"strings"
)

// FrameKinds is a set of gratuitous frame kinds sent in each round.
type FrameKinds uint8

// The gratuitous frame kinds. A round of an IPv4 address sends the ARP kinds
// in the set, a round of an IPv6 address the NA kinds.
const (
	// FrameARPRequest is an RFC 5227 announcement: an ARP request with
	// sender IP = target IP = the address and a zero target MAC, broadcast.
	FrameARPRequest FrameKinds = 1 << iota
	// FrameARPReply is the reply form: sender IP = target IP = the address,
	// target MAC broadcast, broadcast. Some devices only learn from replies.
	FrameARPReply
	// FrameNA is an unsolicited neighbor advertisement to all nodes
	// (ff02::1) with the override flag and the target link-layer address.
	FrameNA
	// FrameNARouters is the same advertisement to all routers (ff02::2),
	// as RFC 9131 asks of a host whose address comes into use.
	FrameNARouters
)

// DefaultFrameKinds is what a round sends unless told otherwise: both ARP forms,
// as MetalLB does, and an advertisement to all nodes.
const DefaultFrameKinds = FrameARPRequest | FrameARPReply | FrameNA

var frameNames = []struct {
	f    FrameKinds
	name string
}{
	{FrameARPRequest, "arp-request"},
	{FrameARPReply, "arp-reply"},
	{FrameNA, "na"},
	{FrameNARouters, "na-routers"},
}

// FrameNames lists the names ParseFrames accepts, in order.
func FrameNames() []string {
	out := make([]string, len(frameNames))
	for i, n := range frameNames {
		out[i] = n.name
	}
	return out
}

// ParseFrameKinds parses a comma-separated list of frame kind names.
func ParseFrameKinds(s string) (FrameKinds, error) {
	var f FrameKinds
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		found := false
		for _, n := range frameNames {
			if n.name == part {
				f |= n.f
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown frame kind %q: use %s", part, strings.Join(FrameNames(), ", "))
		}
	}
	if f == 0 {
		return 0, fmt.Errorf("no frame kinds given: use %s", strings.Join(FrameNames(), ", "))
	}
	return f, nil
}

func (f FrameKinds) String() string {
	var names []string
	for _, n := range frameNames {
		if f&n.f != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}

// IPv4 reports whether f has any kind an IPv4 round sends.
func (f FrameKinds) IPv4() bool { return f&(FrameARPRequest|FrameARPReply) != 0 }

// IPv6 reports whether f has any kind an IPv6 round sends.
func (f FrameKinds) IPv6() bool { return f&(FrameNA|FrameNARouters) != 0 }

// PerRound returns how many frames a round of an address of the given family
// sends.
func (f FrameKinds) PerRound(is4 bool) int {
	n := 0
	for _, k := range []FrameKinds{FrameARPRequest, FrameARPReply, FrameNA, FrameNARouters} {
		if f&k == 0 {
			continue
		}
		if (k == FrameARPRequest || k == FrameARPReply) == is4 {
			n++
		}
	}
	return n
}

// MarshalText writes f as its comma-separated names.
func (f FrameKinds) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText parses f with ParseFrames.
func (f *FrameKinds) UnmarshalText(b []byte) error {
	v, err := ParseFrameKinds(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}
