package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/announce/bpfresp"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/assign"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/internal/state"
	"github.com/vipctl/vip/internal/store"
)

// Config configures an agent.
type Config struct {
	Socket string
	// Group, if set, may use the agent besides root.
	Group string
	// Clean removes what a crashed agent left (addresses it added, its
	// state file) and exits instead of re-adopting its claims.
	Clean bool
	// Autostarted agents exit once they hold nothing and no client is
	// attached.
	Autostarted bool
	// Rate caps gratuitous frames per second; zero takes the default.
	Rate float64
	// Filter is a libpcap expression ANDed with the capture's filter.
	Filter string
	// AllTraffic captures the who-has traffic for every address on the
	// claimed interfaces, not only for the held ones (see GuardConfig).
	AllTraffic bool
	// Metrics, if its Addr is set, serves Prometheus metrics.
	Metrics MetricsConfig
	// Responder says what answers who-has requests: eBPF or sockets.
	Responder ResponderConfig
	// Store, when its URL is set, guards every claim with a lease in the
	// coordination store (see package fleet).
	Store   StoreConfig
	Version string
	Sys     netcheck.System
	Log     *slog.Logger
	// Ready, if set, is called once the socket accepts requests.
	Ready func()
}

// StoreConfig says how the agent reaches the store and who it is there.
type StoreConfig struct {
	store.Config
	// Node names this agent in the store; empty takes the host name.
	Node string
	// TTL is the lease's time to live; zero takes fleet.DefaultTTL.
	TTL time.Duration
}

// idleGrace is how long an autostarted agent that holds nothing waits for
// a client before it exits.
const idleGrace = 2 * time.Second

// socketCheckEvery is how often the agent checks that its socket file is
// still there, to make it again if it was deleted.
const socketCheckEvery = time.Second

// firstClientGrace is how long an autostarted agent waits for the client
// that started it.
const firstClientGrace = 15 * time.Second

// Run is the agent: it takes the socket's lock, re-adopts the claims of an
// agent that crashed, serves the API and follows interface changes until ctx
// is done, then releases every claim, removing the addresses it added.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	paths := PathsFor(cfg.Socket)
	lock, err := acquireLock(paths.Lock)
	if err != nil {
		return err
	}
	defer lock.release()

	book, err := state.Open(paths.State, log)
	if err != nil {
		return fmt.Errorf("open the state file: %w", err)
	}
	assigner, err := assign.New(nil)
	if err != nil {
		return fmt.Errorf("open netlink to manage addresses: %w", err)
	}
	defer assigner.Close()
	recorded, err := book.List(ctx)
	if err != nil {
		return fmt.Errorf("read the state file: %w", err)
	}
	if cfg.Clean {
		return clean(ctx, book, assigner, recorded, log)
	}

	ecfg := announce.EngineConfig{
		Burst:    announce.SchedulerConfig{Rate: cfg.Rate},
		Book:     book,
		Assigner: assigner,
		Log:      log,
	}
	var deadline *announce.Deadline
	var vip *vipAddrs
	if cfg.Store.URL != "" {
		// Closed until the store grants the lease (fleet.Join): nothing
		// is sent for a guarded claim before.
		deadline = announce.NewDeadline(nil)
		cfg.Responder.Deadline = deadline
		vip = newVIPAddrs(recorded)
		ecfg.Assigner = vip.assigner(assigner)
	}
	cfg.Responder.Configure(&ecfg)
	rt, err := Start(ecfg, GuardConfig{Filter: cfg.Filter, AllTraffic: cfg.AllTraffic}, log)
	if err != nil {
		return err
	}
	eng, guard := rt.Engine, rt.Guard
	var member *fleet.Member
	defer func() {
		if err := rt.Stop(); err != nil {
			log.Error("release at exit", "err", err)
		}
		// The lease goes after the engine stopped answering, so that
		// no answer outlives its key.
		if member != nil {
			member.Close()
		}
		if len(eng.Held()) == 0 {
			_ = book.Remove()
		}
	}()
	if cfg.Store.URL != "" {
		if member, err = joinFleet(ctx, cfg, eng, book, vip, deadline, log); err != nil {
			return err
		}
		// From here the registration follows the host's interfaces and
		// addresses; a change since it was read at join is read now.
		rt.OnInterfacesChanged(member.InterfacesChanged)
		member.InterfacesChanged()
	}
	if cfg.Metrics.Addr != "" {
		mcfg := cfg.Metrics
		if member != nil {
			mcfg.Store = member
		}
		stop, err := ServeMetrics(rt, mcfg, log)
		if err != nil {
			return err
		}
		defer stop()
	}

	if len(recorded) > 0 {
		log.Info("re-adopting the claims of an earlier agent", "claims", len(recorded), "state_file", paths.State)
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var err error
		if member != nil {
			err = adoptGuarded(actx, member, book, recorded, log)
			vip.adopted(eng.Held())
		} else {
			_, err = eng.Adopt(actx, recorded)
		}
		cancel()
		if err != nil {
			log.Error("re-adopt claims", "err", err)
		}
	}

	allow := SelfAllow()
	if cfg.Group != "" {
		gid, err := lookupGroup(cfg.Group)
		if err != nil {
			return err
		}
		allow = GroupAllow(gid)
	}
	sock, err := listen(paths.Socket, cfg.Group)
	if err != nil {
		return err
	}
	ln := keepSocket(sock, paths.Socket, cfg.Group, socketCheckEvery, log)
	var engine Engine = eng
	var fl Fleet
	if member != nil {
		engine, fl = member, member
	}
	srv := NewServer(ServerConfig{
		Engine:  engine,
		Fleet:   fl,
		Watcher: guard,
		Sys:     cfg.Sys,
		Allow:   allow,
		Log:     log,
		Info: api.Agent{
			PID: os.Getpid(), Version: cfg.Version, Started: time.Now(), Socket: paths.Socket,
			StateFile: paths.State, Autostarted: cfg.Autostarted,
		},
	})
	serveCtx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	if cfg.Autostarted {
		go exitWhenIdle(serveCtx, stopServe, srv, engine, log)
	}
	log.Info("agent listening", "socket", paths.Socket, "state_file", paths.State, "pid", os.Getpid())
	if cfg.Ready != nil {
		cfg.Ready()
	}
	err = srv.Serve(serveCtx, ln)
	log.Info("agent stopping: releasing every claim")
	return err
}

// exitWhenIdle stops an autostarted agent once it holds nothing, no request
// or event stream is under way, and that stays so for idleGrace.
func exitWhenIdle(ctx context.Context, stop func(), srv *Server, eng Engine, log *slog.Logger) {
	start := time.Now()
	t := time.NewTicker(idleGrace / 4)
	defer t.Stop()
	var idleSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			busy, served := srv.Busy()
			idle := !busy && len(eng.Held()) == 0 && (served || now.Sub(start) > firstClientGrace)
			switch {
			case !idle:
				idleSince = time.Time{}
			case idleSince.IsZero():
				idleSince = now
			case now.Sub(idleSince) >= idleGrace:
				log.Info("autostarted agent holds nothing and has no client: exiting")
				stop()
				return
			}
		}
	}
}

// clean removes the addresses a crashed agent added and the eBPF programs
// left on its claims' interfaces, and forgets its claims.
func clean(ctx context.Context, book *state.File, assigner announce.Assigner, recorded []announce.Claim, log *slog.Logger) error {
	var errs []error
	cleanPrograms(recorded, log)
	for _, c := range recorded {
		if c.AddedAddress {
			if err := assigner.Remove(c.Interface, c.Addr); err != nil {
				errs = append(errs, err)
				continue
			}
			log.Info("removed an address a crashed agent had added", "addr", c.Addr, "interface", c.Interface)
		}
	}
	if len(errs) == 0 {
		addrs := make([]netip.Addr, len(recorded))
		for i, c := range recorded {
			addrs[i] = c.Addr
		}
		if err := book.Delete(ctx, addrs...); err != nil {
			errs = append(errs, err)
		} else if err := book.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	log.Info("clean finished", "claims_forgotten", len(recorded))
	return errors.Join(errs...)
}

// cleanPrograms detaches the vip eBPF programs from the interfaces of the
// recorded claims. A killed agent's went with it (nothing is pinned), so
// what this finds is another vip's still running there. An interface that
// is gone has none; a machine without eBPF has none either.
func cleanPrograms(recorded []announce.Claim, log *slog.Logger) {
	done := map[string]bool{}
	for _, c := range recorded {
		if done[c.Interface] {
			continue
		}
		done[c.Interface] = true
		if _, err := net.InterfaceByName(c.Interface); err != nil {
			continue
		}
		switch err := bpfresp.Cleanup(c.Interface); {
		case err == nil:
			log.Info("no vip eBPF program is left on the interface", "interface", c.Interface)
		case errors.Is(err, bpfresp.ErrUnavailable):
			log.Debug("cannot look for vip eBPF programs on the interface", "interface", c.Interface, "reason", err.Error())
		default:
			log.Warn("cannot remove the vip eBPF programs left on the interface", "interface", c.Interface, "err", err)
		}
	}
}
