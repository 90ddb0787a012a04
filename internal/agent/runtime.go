package agent

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/hostnet"
	"github.com/vipctl/vip/internal/metrics"
)

// Runtime is a claim engine at work with what watches for it: the interface
// changes it follows and the sniffer on the wire. The agent runs one, and so
// does a foreground claim.
type Runtime struct {
	Engine  *announce.Engine
	Sniffer *Sniffer

	stopSniffer, stopWatch, stopEngine context.CancelFunc
	waitWatch                          func()
	engineDone                         chan error
	// hostChanged is what OnInterfacesChanged set, if anything.
	hostChanged atomic.Pointer[func()]
}

// Start starts the engine of cfg, follows interface changes for it and
// watches the wire of its claims as sniff says (its Log is log). Stop ends
// all of it, releasing every claim.
func Start(cfg announce.EngineConfig, sniff SnifferConfig, log *slog.Logger) (*Runtime, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{Engine: announce.NewEngine(cfg), engineDone: make(chan error, 1)}
	var engCtx, watchCtx, sniffCtx context.Context
	engCtx, r.stopEngine = context.WithCancel(context.Background())
	go func() { r.engineDone <- r.Engine.Run(engCtx) }()
	watchCtx, r.stopWatch = context.WithCancel(context.Background())
	r.waitWatch = FollowInterfaces(watchCtx, r.Engine, hostnet.System{}, func() {
		if fn := r.hostChanged.Load(); fn != nil {
			(*fn)()
		}
	}, log)
	sniffCtx, r.stopSniffer = context.WithCancel(context.Background())
	sniff.Log = log
	g, err := StartSniffer(sniffCtx, r.Engine, sniff)
	if err != nil {
		r.stopSniffer = func() {}
		_ = r.Stop()
		return nil, err
	}
	r.Sniffer = g
	return r, nil
}

// OnInterfacesChanged has fn called after each change of this host's
// interfaces or of their addresses, from the interface watch: it must not
// block. It replaces what an earlier call set.
func (r *Runtime) OnInterfacesChanged(fn func()) { r.hostChanged.Store(&fn) }

// StopWatching tells the sniffer and the interface watch to stop, and
// returns without waiting for them: the captures then close while the
// caller closes other sockets (Stop waits for them).
func (r *Runtime) StopWatching() {
	r.stopSniffer()
	r.stopWatch()
}

// Stop stops watching, then stops the engine, which releases every claim
// (removing the addresses it added), and returns the release's error.
func (r *Runtime) Stop() error {
	r.StopWatching()
	if r.Sniffer != nil {
		r.Sniffer.Wait()
	}
	r.waitWatch()
	r.stopEngine()
	return <-r.engineDone
}

// MetricsConfig says where to serve Prometheus metrics and what they show.
type MetricsConfig struct {
	// Addr is the HOST:PORT to serve them on.
	Addr string
	// MaxAddrs bounds the held addresses with series of their own.
	MaxAddrs int
	// Version and Commit label vip_build_info.
	Version, Commit string
	// Store, if set, adds the store's metrics (vip_store_*).
	Store metrics.Store
}

// ServeMetrics serves the runtime's Prometheus metrics as cfg says, and
// returns the function that stops serving.
func ServeMetrics(r *Runtime, cfg MetricsConfig, log *slog.Logger) (stop func(), err error) {
	var more []prometheus.Collector
	if cfg.Store != nil {
		more = append(more, metrics.NewStoreCollector(cfg.Store, nil))
	}
	reg := metrics.NewRegistry(metrics.NewCollector(metrics.Config{
		Engine: r.Engine, Sniffer: r.Sniffer, Version: cfg.Version, Commit: cfg.Commit, MaxAddrs: cfg.MaxAddrs,
	}), more...)
	srv, err := metrics.Listen(cfg.Addr, reg, log)
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			log.Warn("stop serving metrics", "err", err)
		}
	}, nil
}
