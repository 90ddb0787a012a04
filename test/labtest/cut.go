package labtest

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/vipctl/vip/internal/lab"
)

// Cut is a fault made by CutOff or CutFrom and undone by Heal. Unlike
// Isolate, it cuts one host off from some others without cutting those off
// from one another (the members of an etcd cluster keep their quorum).
type Cut struct {
	undo   [][]string // commands, each run with its namespace flag
	healed bool
}

// nowhere is a locally administered MAC no lab host has: frames sent to it
// are flooded by the bridge and taken by nobody.
const nowhere = "02:00:5e:00:53:ff"

// CutOff disables every bridge port of h (bridge port state disabled, with
// the carrier kept up): nothing reaches h and nothing h sends leaves, and h
// itself sees no link change, as behind a switch that dropped its port. The
// test's cleanup heals it.
func CutOff(t TB, l *lab.Lab, h *lab.Host) *Cut {
	t.Helper()
	c := &Cut{}
	t.Cleanup(func() { c.Heal(t) })
	for _, link := range h.Links {
		run(t, "bridge", "-n", l.Switch, "link", "set", "dev", link.BridgePort, "state", "0")
		c.undo = append(c.undo, []string{"bridge", "-n", l.Switch, "link", "set", "dev", link.BridgePort, "state", "3"})
	}
	return c
}

// CutFrom makes every frame h sends to the peers' addresses on iface go to
// a MAC nobody has (permanent neighbour entries): h cannot reach them, and
// TCP connections between them stall as behind a partition, while the
// peers still reach one another and h reaches everyone else. Heal deletes
// the entries, and h resolves the peers afresh.
func CutFrom(t TB, h *lab.Host, iface string, peers ...netip.Addr) *Cut {
	t.Helper()
	c := &Cut{}
	t.Cleanup(func() { c.Heal(t) })
	for _, p := range peers {
		run(t, "ip", "-n", h.Netns, "neigh", "replace", p.String(), "lladdr", nowhere, "nud", "permanent", "dev", iface)
		c.undo = append(c.undo, []string{"ip", "-n", h.Netns, "neigh", "del", p.String(), "dev", iface})
	}
	return c
}

// Heal undoes the cut. A second call does nothing.
func (c *Cut) Heal(t TB) {
	t.Helper()
	if c.healed {
		return
	}
	c.healed = true
	for _, cmd := range c.undo {
		run(t, cmd[0], cmd[1:]...)
	}
}

func run(t TB, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bridgeTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
}
