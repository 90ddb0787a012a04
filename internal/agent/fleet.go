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
	"strings"
	"syscall"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/failsafe"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/internal/state"
	"github.com/vipctl/vip/internal/store"
)

// joinFleet connects to the store of cfg and joins the fleet there, so that
// every claim of eng is guarded by this agent's lease. The node's
// registration lists this host's interfaces less the addresses vip says are
// its own (see vipAddrs).
func joinFleet(ctx context.Context, cfg Config, keyFile string, eng *announce.Engine, book *state.File, vip *vipAddrs, deadline *announce.Deadline, log *slog.Logger) (*fleet.Member, error) {
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
	fc := fleet.Config{
		Store: c, Node: node, TTL: cfg.Store.TTL, Version: cfg.Version, Log: log,
		Interfaces: func() []store.Interface { return hostInterfaces(sys, vip.of(eng.Status())) },
		Forget:     book.Delete, Deadline: deadline, Own: announce.InterfaceAddrs,
	}
	fc.Promises = promisesFile(keyFile)
	if cfg.Store.Failsafe {
		fc.Failsafe, err = failsafeConfig(ctx, cfg.Store, keyFile)
		switch {
		case err == nil:
		case !cfg.Store.FailsafeAsked && (errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, errLoopbackStore)):
			// On by default: a host that cannot run it (two agents
			// on one port, a store over loopback) runs without it;
			// any other fault (its key, its flags) stops the agent.
			log.Warn("failsafe: off, so this node's addresses go dark through a store outage, and it cannot promise its peers, whose addresses do too; give --failsafe-listen a free port or --failsafe-advertise an address, or --failsafe=false on every node", "err", err)
		default:
			c.Close()
			return nil, err
		}
	}
	m, err := fleet.Join(ctx, fc, eng)
	if err != nil {
		if fc.Failsafe != nil {
			fc.Failsafe.Conn.Close()
		}
		c.Close()
		return nil, err
	}
	return m, nil
}

// failsafeConfig loads (or makes) the failsafe's key, opens its socket, and
// finds the address the node's record gives for it: --failsafe-advertise,
// else the address this host reaches the store's first endpoint from.
func failsafeConfig(ctx context.Context, sc StoreConfig, keyFile string) (*fleet.FailsafeConfig, error) {
	key, err := failsafe.LoadKey(keyFile)
	if err != nil {
		return nil, err
	}
	listen := sc.FailsafeListen
	if listen == "" {
		listen = fmt.Sprintf(":%d", failsafe.DefaultPort)
	}
	conn, err := listenFailsafe(ctx, listen)
	if err != nil {
		return nil, fmt.Errorf("listen for failsafe questions on %s: %w: give --failsafe-listen a free UDP port, or --failsafe=false", listen, err)
	}
	port := uint16(conn.LocalAddr().(*net.UDPAddr).Port)
	adv, err := failsafeAdvertise(sc, port)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &fleet.FailsafeConfig{Key: key, Conn: conn, Advertise: adv, Promises: promisesFile(keyFile)}, nil
}

// failsafeBindWait is how long an agent waits for its failsafe's port to
// be free: an agent restarted (systemctl restart) may start while the one
// before still exits.
const failsafeBindWait = 3 * time.Second

// listenFailsafe opens the failsafe's UDP socket on listen, trying again
// for failsafeBindWait while the port is in use.
func listenFailsafe(ctx context.Context, listen string) (net.PacketConn, error) {
	deadline := time.Now().Add(failsafeBindWait)
	for {
		conn, err := net.ListenPacket("udp", listen)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// errLoopbackStore says the store is reached over loopback: no address to
// advertise for the failsafe.
var errLoopbackStore = errors.New("this host reaches the store over loopback")

// promisesFile is where the failsafe keeps this node's promises, beside
// its key.
func promisesFile(keyFile string) string { return strings.TrimSuffix(keyFile, "-key") + "-promises" }

// failsafeAdvertise is where the other agents ask this one.
func failsafeAdvertise(sc StoreConfig, port uint16) (netip.AddrPort, error) {
	if sc.FailsafeAdvertise != "" {
		ap, err := netip.ParseAddrPort(sc.FailsafeAdvertise)
		if err != nil {
			a, aerr := netip.ParseAddr(sc.FailsafeAdvertise)
			if aerr != nil {
				return netip.AddrPort{}, fmt.Errorf("--failsafe-advertise %q is not ADDR or ADDR:PORT", sc.FailsafeAdvertise)
			}
			ap = netip.AddrPortFrom(a, port)
		}
		return ap, nil
	}
	endpoints, _, err := store.ParseURL(sc.URL)
	if err != nil || len(endpoints) == 0 {
		return netip.AddrPort{}, fmt.Errorf("find the address to advertise for the failsafe: give --failsafe-advertise ADDR")
	}
	host := endpoints[0]
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	// A UDP socket connected to the store sends nothing, and its local
	// address is the one the routes pick towards it.
	c, err := net.Dial("udp", host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("find the address this host reaches the store from (%s): %w: give --failsafe-advertise ADDR", host, err)
	}
	defer c.Close()
	local := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	if local.IsLoopback() {
		return netip.AddrPort{}, fmt.Errorf("%w (%s), which the other agents cannot ask it at: give --failsafe-advertise ADDR", errLoopbackStore, local)
	}
	return netip.AddrPortFrom(local, port), nil
}

// adoptGuarded re-adopts a dead agent's claims through the store: those
// another node took meanwhile are dropped from the state file and said so.
// Then every address the earlier agent added that this agent does not hold
// now goes from its interface, each said in the log and an event: whether
// another node took it or it could not be re-adopted, this node no longer
// answers for it, and the kernel must not either (remove is the engine's
// Assigner underneath vip's bookkeeping; held, what the engine holds).
func adoptGuarded(ctx context.Context, m *fleet.Member, book *state.File, recorded []announce.Claim, remove func(ifname string, a netip.Addr) error, held func() []netip.Addr, log *slog.Logger, notify func(announce.Event)) error {
	_, err := m.Adopt(ctx, recorded)
	taken := map[netip.Addr]lostTo{}
	var rf *announce.RefusedError
	if errors.As(err, &rf) {
		for _, r := range rf.Refused {
			var h *fleet.HeldError
			if errors.As(r.Err, &h) {
				log.Warn("a claim of the earlier agent is now another node's: dropped", "addr", r.Addr, "node", h.Node)
				taken[r.Addr] = lostTo{h.Node, fmt.Sprintf("lost to %s while this node's agent was down%s: not re-adopted", h.Node, fleet.TakenAt(h.Since))}
			}
		}
		if len(taken) > 0 {
			gone := make([]netip.Addr, 0, len(taken))
			for a := range taken {
				gone = append(gone, a)
			}
			err = book.Delete(ctx, gone...)
		}
	}
	holds := map[netip.Addr]bool{}
	for _, a := range held() {
		holds[a] = true
	}
	for _, c := range recorded {
		to, lost := taken[c.Addr]
		msg := to.msg
		if c.AddedAddress && !holds[c.Addr] {
			if rerr := remove(c.Interface, c.Addr); rerr != nil {
				log.Error("remove an address the earlier agent added and this one does not hold: the kernel may answer for it until its lifetime ends", "addr", c.Addr, "interface", c.Interface, "err", rerr)
				err = errors.Join(err, rerr)
			} else {
				log.Warn("removed an address the earlier agent added: this agent does not hold it", "addr", c.Addr, "interface", c.Interface)
				removed := fmt.Sprintf("removed from %s, where the earlier agent had added it", c.Interface)
				if lost {
					msg += "; " + removed
				} else {
					notify(announce.Event{Kind: event.Release, Addr: c.Addr, Interface: c.Interface,
						Message: "not re-adopted after the agent's restart, so " + removed})
				}
			}
		}
		if lost {
			// An event too, so that a view or vip events --retry that
			// follows the agent across the restart sees it.
			notify(announce.Event{Kind: event.Taken, Addr: c.Addr, Interface: c.Interface, From: event.StateOwner, To: event.StateLost, Peer: to.node, Reason: event.ReasonTakenWhileDown, Message: msg})
		}
	}
	return err
}

// lostTo is a claim of the earlier agent that another node holds now.
type lostTo struct{ node, msg string }

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
