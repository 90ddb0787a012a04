package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/sniff"
)

// Spacing separates the probes of one address.
const Spacing = 250 * time.Millisecond

// A Link sends the probes on one interface; an *announce.Link is one.
type Link interface {
	Name() string
	MAC() net.HardwareAddr
	Probe(addr netip.Addr) (int, error)
	Close() error
}

// A Listener hears the answers on one interface; a *sniff.Capture is one.
// Run returns once ctx is done.
type Listener interface {
	Run(ctx context.Context, observers ...sniff.Observer) error
	Close() error
}

// Config says how Run probes.
type Config struct {
	// Count is the number of probes per address, Spacing apart.
	Count int
	// Wait is how long to listen for answers after the last probe.
	Wait time.Duration
	// Open opens the link of an interface, Listen its capture; their errors
	// are returned as they are, so they name the interface. Nil means the
	// real ones (announce.OpenLink, sniff.Open).
	Open   func(iface string) (Link, error)
	Listen func(iface string) (Listener, error)
	// Clock times the probes and the wait; nil means the real clock.
	Clock clockwork.Clock
	// Log is the links' log; nil discards it.
	Log *slog.Logger
}

// Run probes for each request's address on its interface and returns who
// answered for each, in the order of reqs, each address's claimers sorted
// by MAC. It claims nothing. It returns only once the captures it started
// have stopped, whatever it returns.
func Run(ctx context.Context, reqs []announce.Request, cfg Config) ([]api.ProbeResult, error) {
	cfg = cfg.withDefaults()
	det, err := sniff.NewDetector(sniff.DetectorConfig{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &session{cfg: cfg, det: det, cancel: cancel, groups: byInterface(reqs)}
	err = s.probe(ctx)
	if lerr := s.stop(); err == nil && lerr != nil {
		err = fmt.Errorf("listen for answers: %w", lerr)
	}
	if err != nil {
		return nil, err
	}
	return results(reqs, det.Conflicts()), nil
}

func (c Config) withDefaults() Config {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Open == nil {
		log := c.Log
		c.Open = func(name string) (Link, error) { return openLink(name, log) }
	}
	if c.Listen == nil {
		c.Listen = listen
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	return c
}

func openLink(name string, log *slog.Logger) (Link, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	l, err := announce.OpenLink(ifi, log)
	if err != nil {
		return nil, fmt.Errorf("probe on %s: %w", name, err)
	}
	return l, nil
}

func listen(name string) (Listener, error) {
	c, err := sniff.Open(name, sniff.Options{})
	if err != nil {
		return nil, fmt.Errorf("listen for answers on %s: %w", name, err)
	}
	return c, nil
}

// group is the addresses probed on one interface, and its link once open.
type group struct {
	iface string
	addrs []netip.Addr
	link  Link
}

// byInterface groups the requests' addresses by interface, the interfaces
// in the order they first appear.
func byInterface(reqs []announce.Request) []*group {
	var out []*group
	for _, r := range reqs {
		i := slices.IndexFunc(out, func(g *group) bool { return g.iface == r.Interface })
		if i < 0 {
			i = len(out)
			out = append(out, &group{iface: r.Interface})
		}
		out[i].addrs = append(out[i].addrs, r.Addr)
	}
	return out
}

// session is one Run: its links, and the goroutines of its captures.
type session struct {
	cfg    Config
	det    *sniff.Detector
	cancel context.CancelFunc
	groups []*group

	wg     sync.WaitGroup
	mu     sync.Mutex
	runErr error // what stopped a capture before it was told to; guarded by mu
}

// probe opens every interface, sends the probes and waits for the answers.
func (s *session) probe(ctx context.Context) error {
	for _, g := range s.groups {
		if err := s.open(ctx, g); err != nil {
			return err
		}
	}
	for i := range s.cfg.Count {
		if i > 0 {
			if err := s.sleep(ctx, Spacing); err != nil {
				return err
			}
		}
		if err := s.send(); err != nil {
			return err
		}
	}
	return s.sleep(ctx, s.cfg.Wait)
}

// open opens g's link, holds its addresses in the detector with the link's
// MAC, and starts listening on g's interface.
func (s *session) open(ctx context.Context, g *group) error {
	l, err := s.cfg.Open(g.iface)
	if err != nil {
		return err
	}
	g.link = l
	for _, a := range g.addrs {
		if err := s.det.Hold(a, l.MAC()); err != nil {
			return err
		}
	}
	ln, err := s.cfg.Listen(g.iface)
	if err != nil {
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := ln.Run(ctx, s.det)
		_ = ln.Close()
		if err != nil && !errors.Is(err, context.Canceled) {
			s.mu.Lock()
			s.runErr = errors.Join(s.runErr, err)
			s.mu.Unlock()
		}
	}()
	return nil
}

// send sends one probe for every address.
func (s *session) send() error {
	for _, g := range s.groups {
		for _, a := range g.addrs {
			if _, err := g.link.Probe(a); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *session) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.cfg.Clock.After(d):
		return nil
	}
}

// stop stops the captures and waits for them, closes the links, and
// returns what stopped a capture before it was told to.
func (s *session) stop() error {
	s.cancel()
	s.wg.Wait()
	for _, g := range s.groups {
		if g.link != nil {
			_ = g.link.Close()
		}
	}
	return s.runErr
}

// results lists who answered for each request's address.
func results(reqs []announce.Request, conflicts []sniff.Conflict) []api.ProbeResult {
	out := make([]api.ProbeResult, len(reqs))
	for i, r := range reqs {
		out[i] = api.ProbeResult{Addr: r.Addr.String(), Interface: r.Interface, Claimers: []api.Claimer{}}
	}
	for _, cf := range conflicts {
		for i := range out {
			if out[i].Addr == cf.Addr.String() {
				out[i].Claimers = append(out[i].Claimers, api.Claimer{MAC: cf.MAC.String(), Kind: cf.Kind.String(), FirstSeen: cf.First, LastSeen: cf.Last, Count: cf.Count})
			}
		}
	}
	for _, r := range out {
		slices.SortFunc(r.Claimers, func(a, b api.Claimer) int { return strings.Compare(a.MAC, b.MAC) })
	}
	return out
}
