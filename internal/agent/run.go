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
	// WatchAll captures the who-has traffic for every address on the
	// claimed interfaces, not only for the held ones (see SnifferConfig).
	WatchAll bool
	// Metrics, if its Addr is set, serves Prometheus metrics.
	Metrics MetricsConfig
	// Responder says what answers who-has requests: eBPF or sockets.
	Responder ResponderConfig
	// Store, when its URL is set, guards every claim with a lease in the
	// coordination store (see package fleet).
	Store StoreConfig
	// OnStop is what a guarded agent does with its claims when it stops
	// (SIGINT, SIGTERM): OnStopKeep (the default) or OnStopHandOver. An
	// agent without a store releases them.
	OnStop OnStop
	// Hooks, if its Program is set, runs it on each change of state of
	// the claims.
	Hooks   HookConfig
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
	// Failsafe turns the failsafe on (fleet.FailsafeConfig): it answers
	// on FailsafeListen (UDP ADDR:PORT) and its record says
	// FailsafeAdvertise (empty: the address this host reaches the store
	// from, and the port listened on).
	// FailsafeAsked says the operator asked for it (--failsafe given):
	// a failsafe that cannot start stops the agent then, and by default
	// the agent runs without it and says so.
	Failsafe          bool
	FailsafeAsked     bool
	FailsafeListen    string
	FailsafeAdvertise string
}

// OnStop says what a guarded agent does with its claims when it stops.
type OnStop string

const (
	// OnStopKeep keeps them for a restart: the agent falls silent at
	// once, leaves its keys in the store under its lease, which it does
	// not revoke, and its claims in the state file. An agent started
	// again within the lease's TTL binds the keys to its new lease and
	// answers again, and no standby takes over; one that does not come
	// back within it has its addresses taken by their standbys at the
	// lease's expiry, as after a crash (the others are free then, and
	// claimed again when it comes back, unless another node claimed
	// them).
	OnStopKeep OnStop = "keep"
	// OnStopHandOver releases every claim and revokes the lease, so that
	// each standby takes its address at once (before powering a host
	// off); an address with no standby is free.
	OnStopHandOver OnStop = "hand-over"
)

// ParseOnStop reads --on-stop.
func ParseOnStop(s string) (OnStop, error) {
	switch o := OnStop(s); o {
	case OnStopKeep, OnStopHandOver:
		return o, nil
	}
	return "", netcheck.Invalidf("--on-stop %q: give keep (the claims wait in the store for a restart) or hand-over (to the standbys at once)", s)
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
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	d := &daemon{cfg: cfg, log: cfg.Log, paths: PathsFor(cfg.Socket)}
	lock, err := acquireLock(d.paths.Lock)
	if err != nil {
		return err
	}
	defer lock.release()
	if err := d.openState(ctx); err != nil {
		return err
	}
	defer d.assigner.Close()
	if d.cfg.Clean {
		return clean(ctx, d.book, d.assigner, d.recorded, d.log)
	}
	if err := d.startEngine(); err != nil {
		return err
	}
	defer d.stop()
	if d.cfg.Store.URL != "" {
		if err := d.joinFleet(ctx); err != nil {
			return err
		}
	}
	if d.cfg.Metrics.Addr != "" {
		stop, err := d.serveMetrics()
		if err != nil {
			return err
		}
		defer stop()
	}
	if d.cfg.Hooks.Program != "" {
		// Stopped before the claims are released (deferred
		// above): the agent's own stop runs no hook.
		defer d.startHooks(ctx)()
	}
	d.readopt(ctx)
	return d.serve(ctx)
}

// daemon is one Run of the agent: what its steps open, for the next ones.
type daemon struct {
	cfg   Config
	log   *slog.Logger
	paths Paths

	book     *state.File
	assigner *assign.Netlink
	// recorded are the claims the state file held at start.
	recorded []announce.Claim
	rt       *Runtime
	// member guards the claims in the store, and vip knows which
	// addresses on the host are vip's; both nil without a store.
	member *fleet.Member
	vip    *vipAddrs
	// deadline is the answer deadline the lease keeps open; nil
	// without a store.
	deadline *announce.Deadline
	// lingers reads what reached the addresses released a moment ago.
	lingers *lingerBook
	// stopLifetimes stops lengthening the lifetimes of the addresses vip
	// added (vipAddrs.keepLifetimes); nil without a store.
	stopLifetimes func()
}

// openState opens the state file and netlink, and reads the claims an
// earlier agent recorded.
func (d *daemon) openState(ctx context.Context) error {
	var err error
	if d.book, err = state.Open(d.paths.State, d.log); err != nil {
		return fmt.Errorf("open the state file: %w", err)
	}
	if d.assigner, err = assign.New(nil); err != nil {
		return fmt.Errorf("open netlink to manage addresses: %w", err)
	}
	if d.recorded, err = d.book.List(ctx); err != nil {
		d.assigner.Close()
		return fmt.Errorf("read the state file: %w", err)
	}
	return nil
}

// startEngine starts the engine and the sniffer. With a store, it makes
// the deadline the lease keeps open (d.deadline).
func (d *daemon) startEngine() error {
	ecfg := announce.EngineConfig{
		Burst:    announce.SchedulerConfig{Rate: d.cfg.Rate},
		Book:     d.book,
		Assigner: d.assigner,
		Log:      d.log,
	}
	if d.cfg.Store.URL != "" {
		// Closed until the store grants the lease (fleet.Join): nothing
		// is sent for a guarded claim before.
		d.deadline = announce.NewDeadline(nil)
		d.cfg.Responder.Deadline = d.deadline
		d.vip = newVIPAddrs(d.recorded, d.deadline, d.log)
		ecfg.Assigner = d.vip.assigner(d.assigner)
		stop, err := d.vip.keepLifetimes(context.Background(), d.assigner)
		if err != nil {
			return fmt.Errorf("follow the answer deadline with the lifetimes of the addresses vip adds: %w", err)
		}
		d.stopLifetimes = stop
	}
	d.lingers = d.cfg.Responder.Configure(&ecfg)
	rt, err := Start(ecfg, SnifferConfig{Filter: d.cfg.Filter, WatchAll: d.cfg.WatchAll}, d.log)
	if err != nil {
		if d.stopLifetimes != nil {
			d.stopLifetimes()
		}
		return err
	}
	d.rt = rt
	return nil
}

// stop releases every claim, then gives up the lease, and removes the
// state file if nothing is held; a guarded agent that keeps its claims
// (OnStopKeep) falls silent and leaves them instead.
func (d *daemon) stop() {
	if d.member != nil && d.cfg.OnStop != OnStopHandOver {
		d.stopKeeping()
		return
	}
	// The parked responders close beside the ports, which close their
	// own rather than park them.
	parkedClosed := d.lingers.closeParked()
	if err := d.rt.Stop(); err != nil {
		d.log.Error("release at exit", "err", err)
	}
	parkedClosed()
	// The lease goes after the engine stopped answering, so that no
	// answer outlives its key.
	if d.member != nil {
		d.member.Close()
	}
	if d.stopLifetimes != nil {
		d.stopLifetimes()
	}
	if len(d.rt.Engine.Held()) == 0 {
		_ = d.book.Remove()
	}
}

// stopKeeping stops a guarded agent for a restart (OnStopKeep): nothing
// leaves from the moment it begins (the answer deadline closes, for the
// program in the kernel and the sockets alike), the member stops renewing
// without revoking the lease, and the engine lets every claim go without
// forgetting it in the state file. The addresses it added stay on their
// interfaces, for the services that bind them, with the lifetimes the last
// acknowledged renewal gave them: the kernel answers for them until the
// next agent takes them over, or removes them by itself at that renewal's
// deadline, before the lease can expire. The keys stay in the store until
// the lease expires, one TTL after the last renewal at most.
func (d *daemon) stopKeeping() {
	_ = d.deadline.Close()
	d.member.Leave()
	// Again, the member's goroutines stopped: a failsafe round that was
	// under way may have moved it since.
	_ = d.deadline.Close()
	// What closes from here closes at once, each close waiting for a
	// grace period of the kernel's (batchio.CloseAll): the parked
	// responders and the captures in the background, the ports as the
	// engine lets their claims go.
	parkedClosed := d.lingers.closeParked()
	d.rt.StopWatching()
	held := d.rt.Engine.Held()
	if _, _, err := d.rt.Engine.Leave(held, "the agent stopped for a restart: the claim waits in the store and the state file"); err != nil {
		d.log.Error("fall silent at exit", "err", err)
	}
	if err := d.rt.Stop(); err != nil {
		d.log.Error("stop at exit", "err", err)
	}
	parkedClosed()
	d.stopLifetimes()
	id, _, _ := d.member.Lease()
	d.log.Info("agent stopped, keeping its guarded claims for a restart: started again within the lease's TTL it answers again with no standby taking over; after it, standbys take them (vip agent --on-stop hand-over gives them to the standbys at once)",
		"claims", len(held), "lease", fmt.Sprintf("%x", id), "lease_ttl", d.member.Timing().TTL)
}

// joinFleet joins the fleet in the store, whose lease keeps d.deadline open,
// and has the registration follow the host's interfaces and addresses.
func (d *daemon) joinFleet(ctx context.Context) error {
	var err error
	if d.member, err = joinFleet(ctx, d.cfg, d.paths.Key, d.rt.Engine, d.book, d.vip, d.deadline, d.log); err != nil {
		return err
	}
	if d.rt.Sniffer != nil {
		d.rt.Sniffer.AlsoWatch(d.member.StandingBy)
	}
	// From here the registration follows the host's interfaces and
	// addresses; a change since it was read at join is read now.
	d.rt.OnInterfacesChanged(d.member.InterfacesChanged)
	d.member.InterfacesChanged()
	return nil
}

func (d *daemon) serveMetrics() (stop func(), err error) {
	mcfg := d.cfg.Metrics
	if d.member != nil {
		mcfg.Store = d.member
	}
	return ServeMetrics(d.rt, mcfg, d.log)
}

// readopt takes over the claims of an earlier agent, through the store
// when there is one. A failure is logged: the agent serves all the same.
func (d *daemon) readopt(ctx context.Context) {
	if len(d.recorded) == 0 {
		return
	}
	d.log.Info("re-adopting the claims of an earlier agent", "claims", len(d.recorded), "state_file", d.paths.State)
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	if d.member != nil {
		err = adoptGuarded(actx, d.member, d.book, d.recorded, d.assigner.Remove, d.rt.Engine.Held, d.log, d.rt.Engine.Notify)
		d.vip.adopted(d.rt.Engine.Held())
	} else {
		_, err = d.rt.Engine.Adopt(actx, d.recorded)
	}
	if err != nil {
		d.log.Error("re-adopt claims", "err", err)
	}
}

// serve serves the API on the socket until ctx is done, or until an
// autostarted agent is idle.
func (d *daemon) serve(ctx context.Context) error {
	allow := SelfAllow()
	if d.cfg.Group != "" {
		gid, err := lookupGroup(d.cfg.Group)
		if err != nil {
			return err
		}
		allow = GroupAllow(gid)
	}
	sock, err := listen(d.paths.Socket, d.cfg.Group)
	if err != nil {
		return err
	}
	ln := keepSocket(sock, d.paths.Socket, d.cfg.Group, socketCheckEvery, d.log)
	var engine Engine = d.rt.Engine
	var fl Fleet
	if d.member != nil {
		engine, fl = d.member, d.member
	}
	srv := NewServer(ServerConfig{
		Engine:  engine,
		Fleet:   fl,
		Watcher: d.rt.Sniffer,
		Sys:     d.cfg.Sys,
		Allow:   allow,
		Log:     d.log,
		Info: api.Agent{
			PID: os.Getpid(), Version: d.cfg.Version, Started: time.Now(), Socket: d.paths.Socket,
			StateFile: d.paths.State, Autostarted: d.cfg.Autostarted,
		},
	})
	serveCtx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	if d.member != nil {
		published := make(chan struct{})
		go func() {
			defer close(published)
			publishLingering(serveCtx, d.lingers, d.member, lingerEvery, d.log)
		}()
		defer func() { stopServe(); <-published }()
	}
	if d.cfg.Autostarted {
		go exitWhenIdle(serveCtx, stopServe, srv, engine, d.log)
	}
	d.log.Info("agent listening", "socket", d.paths.Socket, "state_file", d.paths.State, "pid", os.Getpid())
	if d.cfg.Ready != nil {
		d.cfg.Ready()
	}
	err = srv.Serve(serveCtx, ln)
	if d.member != nil && d.cfg.OnStop != OnStopHandOver {
		d.log.Info("agent stopping: keeping its guarded claims for a restart")
	} else {
		d.log.Info("agent stopping: releasing every claim")
	}
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
