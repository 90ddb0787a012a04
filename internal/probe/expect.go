package probe

import (
	"fmt"
	"net"
	"strings"

	"github.com/vipctl/vip/internal/api"
)

// Expected is who should answer for the probed addresses: one of MACs,
// the interfaces of the node Name (or the one MAC Name is).
type Expected struct {
	Name string
	MACs []net.HardwareAddr
}

// has says whether mac is one of the expected MACs.
func (e Expected) has(mac string) bool {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return false
	}
	for _, m := range e.MACs {
		if m.String() == hw.String() {
			return true
		}
	}
	return false
}

// Judge marks each result: as expected when exactly one MAC answered and
// it is an expected one, and a sentence that says who answered when not.
// nodes names the MACs the fleet knows (MAC in net.HardwareAddr's form to
// node); each claimer is given its node's name from it. It returns how
// many results were not as expected.
func (e Expected) Judge(results []api.ProbeResult, nodes map[string]string) (unexpected int) {
	for i := range results {
		r := &results[i]
		var who []string
		ours := 0
		for j := range r.Claimers {
			c := &r.Claimers[j]
			if hw, err := net.ParseMAC(c.MAC); err == nil {
				c.Node = nodes[hw.String()]
			}
			who = append(who, named(c))
			if e.has(c.MAC) {
				ours++
			}
		}
		ok := ours == 1 && len(r.Claimers) == 1
		r.AsExpected = &ok
		switch {
		case ok:
			r.Verdict = fmt.Sprintf("answered by %s, as expected", who[0])
		case len(r.Claimers) == 0:
			r.Verdict = fmt.Sprintf("nobody answered; expected %s", e.Name)
		case ours > 0:
			r.Verdict = fmt.Sprintf("answered by %s: a split brain; expected %s alone", strings.Join(who, ", "), e.Name)
		default:
			r.Verdict = fmt.Sprintf("answered by %s, not by %s as expected", strings.Join(who, ", "), e.Name)
		}
		if !ok {
			unexpected++
		}
	}
	return unexpected
}

// named is a claimer as a sentence names it: its MAC, and its node where
// known.
func named(c *api.Claimer) string {
	if c.Node != "" {
		return fmt.Sprintf("%s (node %s)", c.MAC, c.Node)
	}
	return c.MAC
}
