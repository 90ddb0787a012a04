package sniff

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/vipctl/vip/internal/wire"
)

// Kind says what a neighbour frame is for.
type Kind uint8

// The kinds of frame Decode tells apart.
const (
	// KindUnknown is the zero Kind; Decode never returns it without an
	// error.
	KindUnknown Kind = iota
	// KindWhoHas is an ARP request asking who has the target address.
	KindWhoHas
	// KindProbe is an RFC 5227 probe: an ARP request from sender IP
	// 0.0.0.0, checking whether anyone has the target address.
	KindProbe
	// KindAnnouncement is the request form of a gratuitous ARP: sender IP
	// and target IP are the same address, which the sender claims.
	KindAnnouncement
	// KindReply is an ARP reply: the sender answers for its sender IP.
	KindReply
	// KindGratuitousReply is the reply form of a gratuitous ARP: an
	// unrequested reply whose sender IP and target IP are the same.
	KindGratuitousReply
	// KindSolicitation is a neighbor solicitation for address resolution,
	// sent to a multicast group (normally the target's solicited-node
	// group).
	KindSolicitation
	// KindUnreachability is a neighbor solicitation sent straight to the
	// target address: neighbour unreachability detection, checking an
	// entry the sender already has.
	KindUnreachability
	// KindDAD is a neighbor solicitation from the unspecified address ::,
	// sent by a node that wants the target address (duplicate address
	// detection).
	KindDAD
	// KindAdvertisement is a neighbor advertisement: the sender answers
	// for the target address, solicited or not.
	KindAdvertisement
)

var kindNames = [...]string{
	KindUnknown:         "unknown",
	KindWhoHas:          "who-has",
	KindProbe:           "probe",
	KindAnnouncement:    "announcement",
	KindReply:           "reply",
	KindGratuitousReply: "gratuitous-reply",
	KindSolicitation:    "solicitation",
	KindUnreachability:  "unreachability",
	KindDAD:             "dad",
	KindAdvertisement:   "advertisement",
}

// String returns the kind's name as logs and JSON show it, e.g. "who-has".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MarshalText returns the kind's name.
func (k Kind) MarshalText() ([]byte, error) {
	return []byte(k.String()), nil
}

// UnmarshalText parses a kind's name as String returns it.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, name := range kindNames {
		if string(b) == name {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown frame kind %q", b)
}

// IsARP reports whether the kind is an ARP frame rather than NDP.
func (k Kind) IsARP() bool {
	return k >= KindWhoHas && k <= KindGratuitousReply
}

// IsRequest reports whether a frame of this kind asks who has an address:
// an ARP who-has or probe, or any neighbor solicitation.
func (k Kind) IsRequest() bool {
	switch k {
	case KindWhoHas, KindProbe, KindSolicitation, KindUnreachability, KindDAD:
		return true
	}
	return false
}

// IsAnswer reports whether a frame of this kind answers for an address,
// solicited or not: an ARP reply, either form of gratuitous ARP, or a
// neighbor advertisement.
func (k Kind) IsAnswer() bool {
	switch k {
	case KindReply, KindGratuitousReply, KindAnnouncement, KindAdvertisement:
		return true
	}
	return false
}

// Observation is one decoded neighbour frame.
//
// Which fields are set depends on the protocol. For ARP, Sender and
// SenderMAC are the sender protocol and hardware addresses, Target and
// TargetMAC the target ones, and Dst is invalid. For NDP, Sender and Dst are
// the IPv6 source and destination, Target is the message's target address,
// and SenderMAC (solicitations) or TargetMAC (advertisements) is the
// link-layer address option, when LinkLayerOption says the message had one.
type Observation struct {
	// Time is when the frame was captured.
	Time time.Time
	// Kind says what the frame is for.
	Kind Kind
	// EthSrc and EthDst are the Ethernet source and destination.
	EthSrc, EthDst wire.MAC
	// VLAN is the ID of the frame's outermost 802.1Q or 802.1ad tag, 0 for
	// an untagged frame.
	VLAN uint16
	// Sender is the ARP sender IP or the IPv6 source address: 0.0.0.0 for
	// a probe, :: for duplicate address detection.
	Sender netip.Addr
	// SenderMAC is the ARP sender hardware address, or a solicitation's
	// source link-layer address option.
	SenderMAC wire.MAC
	// Target is the ARP target IP or the NDP target address.
	Target netip.Addr
	// TargetMAC is the ARP target hardware address, or an advertisement's
	// target link-layer address option.
	TargetMAC wire.MAC
	// Dst is the IPv6 destination of an NDP message.
	Dst netip.Addr
	// LinkLayerOption reports whether an NDP message carried its
	// link-layer address option: source for a solicitation, target for an
	// advertisement.
	LinkLayerOption bool
	// Router, Solicited and Override are an advertisement's R, S and O
	// flags.
	Router, Solicited, Override bool
}

// Asker returns who sent a request: the sender's address and hardware
// address. For a solicitation without a source link-layer option the
// hardware address is the Ethernet source.
func (o Observation) Asker() Asker {
	return Asker{MAC: o.senderLink(), Addr: o.Sender}
}

// senderLink is the hardware address the sender speaks for itself with.
func (o Observation) senderLink() wire.MAC {
	if o.Kind.IsARP() || o.LinkLayerOption {
		return o.SenderMAC
	}
	return o.EthSrc
}

// Claim returns the binding of address to hardware address that the frame
// asserts, the one a neighbour that hears it may put in its cache: the ARP
// sender (every ARP frame but a probe), the source of a solicitation other
// than duplicate address detection, or the target of an advertisement. An
// NDP message without its link-layer address option binds its Ethernet
// source. ok is false for probes, duplicate address detection and anything
// else sent from the unspecified address, which claim nothing.
func (o Observation) Claim() (addr netip.Addr, mac wire.MAC, ok bool) {
	switch o.Kind {
	case KindWhoHas, KindAnnouncement, KindReply, KindGratuitousReply:
		addr, mac = o.Sender, o.SenderMAC
	case KindSolicitation, KindUnreachability:
		addr, mac = o.Sender, o.senderLink()
	case KindAdvertisement:
		addr, mac = o.Target, o.EthSrc
		if o.LinkLayerOption {
			mac = o.TargetMAC
		}
	default:
		return netip.Addr{}, wire.MAC{}, false
	}
	if !addr.IsValid() || addr.IsUnspecified() {
		return netip.Addr{}, wire.MAC{}, false
	}
	return addr, mac, true
}

// Asker is who sent a request: a hardware address and the address it asked
// from (0.0.0.0 for an ARP probe, :: for duplicate address detection).
type Asker struct {
	MAC  wire.MAC   `json:"mac"`
	Addr netip.Addr `json:"addr"`
}
