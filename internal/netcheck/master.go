package netcheck

import (
	"fmt"
	"strings"
)

// maxNesting bounds the walk up a chain of masters. The kernel nests
// devices at most 8 deep (MAX_NEST_DEV); a deeper chain is a loop in a
// fake System, not a host.
const maxNesting = 8

// takesFrames reports whether a master of this kind takes the frames its
// ports receive. Bridges, bonds, teams and Open vSwitch datapaths (hsr,
// batman-adv and failover masters too) hook the port's receive path (an
// rx_handler) and hand each frame to the master before a socket bound to
// the port for ARP or IPv6 sees it: vip would hold the address and answer
// nothing. So unknown kinds are refused as well. A VRF is the exception: it
// hooks nothing at layer 2 and only chooses the routing table of its
// members, which receive their own frames and answer ARP themselves.
func takesFrames(kind string) bool { return kind != "vrf" }

// MasterOf says what master l is a port of, e.g. "a port of bridge br0", and how to
// claim instead, when l's master takes its frames; both are "" otherwise.
// A refusal reads "<l> is <of>, which receives its frames: <fix>".
func MasterOf(sys System, l Interface) (of, fix string, err error) {
	var (
		chain []string  // "a port of bridge br0", outermost last
		top   Interface // the master that receives the frames
		below Interface // the port of top
	)
	for cur := l; cur.MasterIndex != 0 && len(chain) < maxNesting; {
		m, err := sys.InterfaceByIndex(cur.MasterIndex)
		if err != nil {
			return "", "", fmt.Errorf("look up the master of %s (index %d): %w", cur.Name, cur.MasterIndex, err)
		}
		if !takesFrames(m.Kind) {
			break
		}
		chain = append(chain, relation(m))
		below, top, cur = cur, m, m
	}
	if len(chain) == 0 {
		return "", "", nil
	}
	fix = fmt.Sprintf("claim on %s instead (-i %s)", top.Name, top.Name)
	if top.Kind == "openvswitch" {
		// Every port of every Open vSwitch bridge has the datapath as
		// its master; which bridge holds the port is OVS's to say.
		fix = fmt.Sprintf("claim on the internal interface of its Open vSwitch bridge instead (\"ovs-vsctl port-to-br %s\" names the bridge)", below.Name)
	}
	return strings.Join(chain, ", "), fix, nil
}

// relation says what a port is to its master m, e.g. "a slave of bond
// bond0".
func relation(m Interface) string {
	switch m.Kind {
	case "bond":
		return "a slave of bond " + m.Name
	case "openvswitch":
		return "a port of the Open vSwitch datapath " + m.Name
	case "":
		return "a port of " + m.Name
	}
	return "a port of " + m.Kind + " " + m.Name
}
