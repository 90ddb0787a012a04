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
	"sync"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/internal/state"
	"github.com/vipctl/vip/internal/store"
)

// joinFleet connects to the store of cfg and joins the fleet there, so that
// every claim of eng is guarded by this agent's lease. The node's
// registration lists this host's interfaces less the addresses vip says are
// its own (see vipAddrs).
func joinFleet(ctx context.Context, cfg Config, eng *announce.Engine, book *state.File, vip *vipAddrs, deadline *announce.Deadline, log *slog.Logger) (*fleet.Member, error) {
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
	m, err := fleet.Join(ctx, fleet.Config{
		Store: c, Node: node, TTL: cfg.Store.TTL, Version: cfg.Version, Log: log,
		Interfaces: func() []store.Interface { return hostInterfaces(sys, vip.of(eng.Status())) },
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
func adoptGuarded(ctx context.Context, m *fleet.Member, book *state.File, recorded []announce.Claim, log *slog.Logger, notify func(announce.Event)) error {
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
			// An event too, so that a view or vip events --retry
			// that follows the agent across the restart sees it.
			ev := announce.Event{Kind: event.Taken, Addr: r.Addr,
				Message: fmt.Sprintf("lost to %s while this node's agent was down%s: not re-adopted", held.Node, fleet.TakenAt(held.Since))}
			if i := slices.IndexFunc(recorded, func(c announce.Claim) bool { return c.Addr == r.Addr }); i >= 0 {
				ev.Interface = recorded[i].Interface
			}
			notify(ev)
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

// vipAddrs knows which addresses on this host's interfaces are vip's, not
// the host's own: those it added for claims with --assign. The node's
// registration leaves them out, or every move of them away from here would
// be refused as a move of the host's own address. They are the addresses
// of the claims the engine holds with Assign, and besides:
//   - those the engine's Assigner is adding or has added and not removed:
//     a claim's address is on its interface before the claim is held, and
//     after its release until it is removed, and a registration read
//     meanwhile must not take it for the host's;
//   - an earlier agent's, recorded in the state file with Assign, until the
//     engine holds them (adopted) or for good if it never does (another
//     node took them meanwhile, and the address stays where it was).
type vipAddrs struct {
	mu       sync.Mutex
	assigned map[netip.Addr]bool
	recorded map[netip.Addr]bool
}

// newVIPAddrs starts with the claims recorded in the state file at start.
func newVIPAddrs(recorded []announce.Claim) *vipAddrs {
	v := &vipAddrs{assigned: map[netip.Addr]bool{}, recorded: map[netip.Addr]bool{}}
	for _, c := range recorded {
		if c.Options.Assign {
			v.recorded[c.Addr] = true
		}
	}
	return v
}

// assigner returns as, with each address it adds counted as vip's from
// before it is on the interface until it is removed again.
func (v *vipAddrs) assigner(as announce.Assigner) announce.Assigner { return vipAssigner{as, v} }

// adopted stops counting the recorded addresses the engine holds: its
// status says from now on.
func (v *vipAddrs) adopted(held []netip.Addr) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, a := range held {
		delete(v.recorded, a)
	}
}

// of returns vip's addresses, with those of the claims in st held with
// Assign. The engine's status is read for it on each change of the host's
// interfaces, rare enough that its cost (a few system calls per port for
// the in-kernel responder's counters) does not count.
func (v *vipAddrs) of(st []announce.Status) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, s := range st {
		if s.Claim.Options.Assign {
			out[s.Claim.Addr] = true
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for a := range v.assigned {
		out[a] = true
	}
	for a := range v.recorded {
		out[a] = true
	}
	return out
}

// vipAssigner is an Assigner whose additions a vipAddrs counts.
type vipAssigner struct {
	announce.Assigner
	v *vipAddrs
}

func (a vipAssigner) Add(ifname string, addr netip.Addr) (bool, error) {
	a.v.mu.Lock()
	had := a.v.assigned[addr]
	a.v.assigned[addr] = true
	a.v.mu.Unlock()
	added, err := a.Assigner.Add(ifname, addr)
	if !added && !had {
		// Not added (there already, or it failed): not vip's by this.
		a.v.mu.Lock()
		delete(a.v.assigned, addr)
		a.v.mu.Unlock()
	}
	return added, err
}

func (a vipAssigner) Remove(ifname string, addr netip.Addr) error {
	err := a.Assigner.Remove(ifname, addr)
	if err == nil {
		a.v.mu.Lock()
		delete(a.v.assigned, addr)
		a.v.mu.Unlock()
	}
	return err
}
