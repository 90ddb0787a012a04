package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// joinAgent starts agent i: its store client, its engine over a port that
// sends nothing, its member of the fleet with cfg's lease TTL, and its
// failsafe if cfg says so (answering on a UDP socket of the loopback).
func joinAgent(ctx context.Context, i int, url string, cfg fleetConfig, dial func(context.Context, string) (net.Conn, error)) (*fleetAgent, error) {
	node := fmt.Sprintf("agent%04d", i)
	var fs *fleet.FailsafeConfig
	if cfg.Failsafe {
		_, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			return nil, err
		}
		conn, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("%s: the failsafe's socket: %w", node, err)
		}
		fs = &fleet.FailsafeConfig{Key: key, Conn: conn, Advertise: netip.MustParseAddrPort(conn.LocalAddr().String())}
	}
	c, err := store.Open(ctx, store.Config{URL: url, Dial: dial})
	if err != nil {
		if fs != nil {
			fs.Conn.Close()
		}
		return nil, fmt.Errorf("%s: %w", node, err)
	}
	port := newFleetPort(i)
	eng := announce.NewEngine(announce.EngineConfig{Open: func(name string) (announce.Port, error) {
		if name != port.Name() {
			return nil, fmt.Errorf("no interface %s: the benchmark's agents have only %s", name, port.Name())
		}
		return port, nil
	}})
	a := &fleetAgent{node: node, c: c, eng: eng, done: make(chan struct{})}
	if fs != nil {
		a.udp = fs.Conn
	}
	var rctx context.Context
	rctx, a.stop = context.WithCancel(context.Background())
	go func() {
		defer close(a.done)
		_ = eng.Run(rctx)
	}()
	a.m, err = fleet.Join(ctx, fleet.Config{
		Store: c, Node: node, Version: "vipbench", TTL: cfg.TTL, Failsafe: fs,
		Interfaces: func() []store.Interface {
			return []store.Interface{{Name: port.Name(), MAC: port.MAC().String(), Up: true, Prefixes: fleetPrefixes}}
		},
	}, eng)
	if err != nil {
		a.close()
		return nil, fmt.Errorf("%s: %w", node, err)
	}
	return a, nil
}

func (a *fleetAgent) close() {
	if a.m != nil {
		a.m.Close()
	}
	a.stop()
	<-a.done
	a.c.Close()
	if a.udp != nil {
		a.udp.Close()
	}
}

// closeFleet closes every agent at once: with etcd gone, each waits out the
// revocation of its lease (two seconds) in parallel with the others.
func closeFleet(agents []*fleetAgent) {
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(a.close)
	}
	wg.Wait()
}

// firstErrors sums up the errors of n operations (what) in one error: how
// many failed, the first few, and the first of each other kind after them,
// so that a thousand agents failing alike read as one line, not a thousand.
func firstErrors(n int, what string, errs []error) error {
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	const show = 3
	shown := failed[:min(show, len(failed))]
	kinds := map[string]bool{}
	for _, err := range shown {
		kinds[errKind(err)] = true
	}
	for _, err := range failed[len(shown):] {
		if k := errKind(err); !kinds[k] {
			kinds[k] = true
			shown = append(shown, err)
		}
	}
	return fmt.Errorf("%d of %d %s failed, among them: %w", len(failed), n, what, errors.Join(shown...))
}

// errKind is an error's message without the agent it names, so that the
// same failure on two agents is one kind.
func errKind(err error) string {
	_, rest, _ := strings.Cut(err.Error(), ": ")
	if i := strings.Index(rest, " since "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// fleetPortName is every simulated agent's one interface.
const fleetPortName = "bench0"

// fleetPort is an announce.Port that sends nothing: the engine's claims,
// bursts and probes run as in an agent, and only the frames are left out.
// It counts what would have gone out.
type fleetPort struct {
	uncounted
	mac    net.HardwareAddr
	frames atomic.Int64
}

func newFleetPort(i int) *fleetPort {
	return &fleetPort{mac: net.HardwareAddr{0x02, 0x00, 0x5e, byte(i >> 16), byte(i >> 8), byte(i)}}
}

func (p *fleetPort) Hold(...netip.Addr) error   { return nil }
func (p *fleetPort) LetGo(...netip.Addr) error  { return nil }
func (p *fleetPort) Answered(netip.Addr) uint64 { return 0 }
func (p *fleetPort) Close() error               { return nil }
func (p *fleetPort) Name() string               { return fleetPortName }
func (p *fleetPort) Index() int                 { return 1 }
func (p *fleetPort) MAC() net.HardwareAddr      { return p.mac }

// uncounted is the part of an announce.Port that the benchmark's ports
// leave out: it names no responder, takes no deadline and counts nothing.
type uncounted struct{}

func (uncounted) Kind() string                                     { return "" }
func (uncounted) Hook() string                                     { return "" }
func (uncounted) Guard(*announce.Deadline) error                   { return nil }
func (uncounted) Traffic(netip.Addr) (announce.Traffic, bool)      { return announce.Traffic{}, false }
func (uncounted) Count(...netip.Addr) error                        { return nil }
func (uncounted) CanSnapshot() bool                                { return false }
func (uncounted) Snapshot() (map[netip.Addr]announce.Counts, bool) { return nil, false }
func (uncounted) RecordsAskers() bool                              { return false }
func (uncounted) Askers(func(announce.AskerCount)) error           { return nil }

func (p *fleetPort) Probe(netip.Addr) (int, error) {
	p.frames.Add(1)
	return 1, nil
}

func (p *fleetPort) Announce(a netip.Addr, f announce.FrameKinds) (int, error) {
	n := f.PerRound(a.Is4())
	p.frames.Add(int64(n))
	return n, nil
}
