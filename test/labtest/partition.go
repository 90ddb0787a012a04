package labtest

import (
	"context"
	"os/exec"
	"strings"
	"time"

	"github.com/vipctl/vip/internal/lab"
)

// bridgeTimeout bounds one `bridge link set` in the switch namespace.
const bridgeTimeout = 10 * time.Second

// Partition is a set of hosts cut off from one another on the lab's bridge,
// made by Isolate and undone by Heal.
type Partition struct {
	l      *lab.Lab
	ports  []string
	hosts  []string
	healed bool
}

// Isolate turns on port isolation for every bridge port of the hosts:
// isolated ports cannot exchange a single frame (unicast, broadcast or
// multicast) with one another, while each still reaches every port that is
// not isolated. Isolate(t, l, a, store) therefore cuts a off from the store
// only: a, the store and every other host still talk to b and the client.
// The cut holds once Isolate returns; established TCP connections between
// the hosts stall rather than close, as behind a real partition. Only one
// group can be cut off this way at a time, and every host in it is cut off
// from every other. The test's cleanup heals it.
func Isolate(t TB, l *lab.Lab, hosts ...*lab.Host) *Partition {
	t.Helper()
	if len(hosts) < 2 {
		t.Fatalf("isolate %d lab hosts: want two or more, since isolated ports are cut off only from one another", len(hosts))
	}
	p := &Partition{l: l}
	for _, h := range hosts {
		p.hosts = append(p.hosts, h.Name)
		for _, link := range h.Links {
			p.ports = append(p.ports, link.BridgePort)
		}
	}
	t.Cleanup(func() { p.Heal(t) })
	p.set(t, "on")
	return p
}

// Heal turns port isolation off again, so the hosts reach one another once
// their neighbour entries are refreshed. A second call does nothing.
func (p *Partition) Heal(t TB) {
	t.Helper()
	if p.healed {
		return
	}
	p.healed = true
	p.set(t, "off")
}

func (p *Partition) set(t TB, state string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bridgeTimeout)
	defer cancel()
	for _, port := range p.ports {
		out, err := exec.CommandContext(ctx, "bridge", "-n", p.l.Switch, "link", "set", "dev", port, "isolated", state).CombinedOutput()
		if err != nil {
			t.Fatalf("turn isolation %s for bridge port %s of lab %s (hosts %s): %v: %s",
				state, port, p.l.Prefix, strings.Join(p.hosts, ", "), err, strings.TrimSpace(string(out)))
		}
	}
}
