package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/internal/state"
	"github.com/vipctl/vip/internal/store"
)

// joinFleet connects to the store of cfg and joins the fleet there, so that
// every claim of eng is guarded by this agent's lease. recorded are the
// claims of the state file, as the agent read it at start.
func joinFleet(ctx context.Context, cfg Config, eng *announce.Engine, book *state.File, recorded []announce.Claim, deadline *announce.Deadline, log *slog.Logger) (*fleet.Member, error) {
	c, err := store.Open(ctx, cfg.Store.Config)
	if err != nil {
		return nil, err
	}
	node := cfg.Store.Node
	if node == "" {
		if node, err = os.Hostname(); err != nil {
			c.Close()
			return nil, fmt.Errorf("name this node in the store: %w: give --node NAME", err)
		}
	}
	sys := cfg.Sys
	// The addresses an earlier agent added for its claims (--assign) are
	// vip's, not the host's own: the registration leaves them out, or no
	// move could take them away from here again.
	assigned := map[netip.Addr]bool{}
	for _, c := range recorded {
		if c.Options.Assign {
			assigned[c.Addr] = true
		}
	}
	m, err := fleet.Join(ctx, fleet.Config{
		Store: c, Node: node, TTL: cfg.Store.TTL, Version: cfg.Version, Log: log,
		Interfaces: func() []store.Interface { return hostInterfaces(sys, assigned) },
		Forget:     book.Delete, Deadline: deadline, Own: announce.InterfaceAddrs,
	}, eng)
	if err != nil {
		c.Close()
		return nil, err
	}
	return m, nil
}

// adoptGuarded re-adopts a dead agent's claims through the store: those
// another node took meanwhile are dropped from the state file and said so.
func adoptGuarded(ctx context.Context, m *fleet.Member, book *state.File, recorded []announce.Claim, log *slog.Logger) error {
	_, err := m.Adopt(ctx, recorded)
	var rf *announce.RefusedError
	if !errors.As(err, &rf) {
		return err
	}
	var gone []netip.Addr
	for _, r := range rf.Refused {
		var held *fleet.HeldError
		if errors.As(r.Err, &held) {
			log.Warn("a claim of the earlier agent is now another node's: dropped", "addr", r.Addr, "node", held.Node)
			gone = append(gone, r.Addr)
		}
	}
	if len(gone) > 0 {
		return book.Delete(ctx, gone...)
	}
	return err
}

// hostInterfaces lists this host's interfaces with their MACs and prefixes,
// for the node's registration in the store, less the addresses in notOwn
// (those vip added for its claims).
func hostInterfaces(sys netcheck.System, notOwn map[netip.Addr]bool) []store.Interface {
	ifs, err := net.Interfaces()
	if err != nil || sys == nil {
		return nil
	}
	var out []store.Interface
	for _, ni := range ifs {
		ifc, err := sys.Interface(ni.Name)
		if err != nil || ifc.Loopback || len(ifc.MAC) == 0 {
			continue
		}
		prefixes := slices.DeleteFunc(slices.Clone(ifc.Prefixes), func(p netip.Prefix) bool { return notOwn[p.Addr()] })
		out = append(out, store.Interface{Name: ifc.Name, MAC: ifc.MAC.String(), Up: ifc.Up, Prefixes: prefixes})
	}
	return out
}
