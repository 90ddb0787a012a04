package metrics

import (
	"net/netip"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
)

// DefaultMaxAddrs is how many held addresses get series of their own
// unless told otherwise: enough for any hand-steered segment, and at four
// series a state plus three counters each, about 2,000 series at most.
const DefaultMaxAddrs = 256

// Engine is what the metrics read of the claim engine at each scrape.
// *announce.Engine satisfies it.
type Engine interface {
	Status(addrs ...netip.Addr) []announce.Status
	Totals() announce.Totals
}

// Sniffer is what the metrics read of the captures at each scrape.
// *agent.Sniffer satisfies it.
type Sniffer interface {
	Captures() []api.CaptureStat
	// Evicted counts the targets the bounded who-has table dropped.
	Evicted() uint64
}

// Config says what a Collector reads and how much of it it shows.
type Config struct {
	Engine Engine
	// Sniffer may be nil: then no capture series are shown.
	Sniffer Sniffer
	// Version and Commit label vip_build_info.
	Version, Commit string
	// MaxAddrs bounds the held addresses that get series of their own (the
	// lowest addresses first); the others are counted only in the totals
	// and in vip_claims_without_series. Zero turns per-address series off.
	MaxAddrs int
	// Now is the clock for how recent a competing claimer is; nil is
	// time.Now.
	Now func() time.Time
}

// claimStates are the states a claim can be in, each a series of
// vip_claims, zero or not, so that a graph of one does not vanish.
var claimStates = []string{api.StateAnnouncing, api.StateHolding, api.StateWaiting, api.StateConflict}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// Collector turns the engine's and the sniffer's state into Prometheus
// metrics when scraped. It keeps no counters of its own: the engine's
// totals only grow, and a claim's own counters start again when it is
// claimed anew, which Prometheus's rate() takes as a counter reset.
type Collector struct {
	cfg Config

	buildInfo, claims, answered, gratuitous, probes, conflicts, claimerFrames, claimers *prometheus.Desc
	withoutSeries                                                                       *prometheus.Desc
	captureUp, captureReceived, captureDropped, captureUndecodable, evicted, evictedOld *prometheus.Desc
	claimState, claimAnswered, claimGratuitous, claimClaimers                           *prometheus.Desc
	claimResponder, trafficPackets, trafficBytes                                        *prometheus.Desc
	claimGroup, groups                                                                  *prometheus.Desc
}

// NewCollector returns a Collector of what cfg names.
func NewCollector(cfg Config) *Collector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.MaxAddrs = max(cfg.MaxAddrs, 0)
	perAddr := []string{"addr", "interface"}
	return &Collector{
		cfg:           cfg,
		buildInfo:     desc("vip_build_info", "A metric with a constant value of 1, labelled with the version and commit vip was built from and its Go version.", "version", "commit", "goversion"),
		claims:        desc("vip_claims", "Claims held, by state: announcing (a gratuitous window runs), holding, waiting (the interface is down or gone), conflict (a competing claimer was seen).", "state"),
		answered:      desc("vip_requests_answered_total", "ARP requests and neighbor solicitations answered for held addresses, released ones included."),
		gratuitous:    desc("vip_gratuitous_frames_sent_total", "Gratuitous ARP and unsolicited neighbor advertisement frames sent."),
		probes:        desc("vip_probes_sent_total", "Probes sent to find silent competing claimers (ARP probes and duplicate address detection solicitations)."),
		conflicts:     desc("vip_conflicts_total", "Reports of another MAC answering for a held address (a steady competing claimer is reported about once a second)."),
		claimerFrames: desc("vip_competing_claimer_frames_total", "Frames seen from competing claimers of held addresses."),
		claimers:      desc("vip_competing_claimers", "Competing claimers (an address held here and another MAC answering for it) seen within the last "+announce.ConflictHold.String()+"."),
		withoutSeries: desc("vip_claims_without_series", "Claims held beyond the per-address bound (vip agent --metrics-max-addrs), counted in the totals but without vip_claim_* series of their own."),
		captureUp:     desc("vip_capture_up", "Whether the capture that looks for competing claimers on the interface is open (1) or failed (0).", "interface"),
		captureReceived: desc("vip_capture_frames_received_total",
			"Frames the capture on the interface received from the kernel.", "interface"),
		captureDropped: desc("vip_capture_frames_dropped_total",
			"Frames the kernel dropped before the capture on the interface could read them.", "interface"),
		captureUndecodable: desc("vip_capture_frames_undecodable_total",
			"Frames the capture on the interface could not decode.", "interface"),
		evicted: desc("vip_whohas_table_evictions_total", "Targets dropped from the bounded who-has table to make room for others."),
		// The same counter by its name until this release, for the
		// dashboards and alerts that use it: dropped in the next one.
		evictedOld:      desc("vip_traffic_table_evictions_total", "Deprecated: vip_whohas_table_evictions_total, by its old name, until the next release."),
		claimGroup:      desc("vip_claim_group", "The group a held address belongs to (vip claim --group), as a label: 1 for each address in a group.", "addr", "interface", "group"),
		groups:          desc("vip_group_addresses", "Addresses this agent holds of each group (vip claim --group).", "group"),
		claimState:      desc("vip_claim_state", "The state of a held address: 1 for its current state, 0 for the others.", "addr", "interface", "state"),
		claimAnswered:   desc("vip_claim_requests_answered_total", "Requests answered for the address since it was claimed.", perAddr...),
		claimGratuitous: desc("vip_claim_gratuitous_frames_sent_total", "Gratuitous frames sent for the address since it was claimed.", perAddr...),
		claimClaimers:   desc("vip_claim_competing_claimers", "Other MACs seen answering for the address within the last "+announce.ConflictHold.String()+".", perAddr...),
		claimResponder: desc("vip_claim_responder", "What answers for the address, as a label: responder ebpf (hook tcx, xdp-generic or xdp-native), socket, or kernel (the address is on the interface); 1 for the current one.",
			"addr", "interface", "responder", "hook"),
		trafficPackets: desc("vip_traffic_packets_total", "Packets arrived whose IPv4 or IPv6 destination is the address, since it was claimed; only where the eBPF responder counts them.", perAddr...),
		trafficBytes:   desc("vip_traffic_bytes_total", "Bytes of the frames arrived whose IPv4 or IPv6 destination is the address, since it was claimed; only where the eBPF responder counts them.", perAddr...),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.buildInfo, c.claims, c.answered, c.gratuitous, c.probes, c.conflicts, c.claimerFrames, c.claimers,
		c.withoutSeries, c.captureUp, c.captureReceived, c.captureDropped, c.captureUndecodable, c.evicted, c.evictedOld,
		c.claimState, c.claimAnswered, c.claimGratuitous, c.claimClaimers,
		c.claimResponder, c.trafficPackets, c.trafficBytes, c.claimGroup, c.groups,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(c.buildInfo, 1, c.cfg.Version, c.cfg.Commit, runtime.Version())

	t := c.cfg.Engine.Totals()
	counter(c.answered, t.Answered)
	counter(c.gratuitous, t.GratuitousFrames)
	counter(c.probes, t.ProbeFrames)
	counter(c.conflicts, t.Conflicts)
	counter(c.claimerFrames, t.ClaimerFrames)

	now := c.cfg.Now()
	st := c.cfg.Engine.Status() // ordered by address: the bound keeps the lowest
	byState := make(map[string]int, len(claimStates))
	byGroup := map[string]int{}
	claimers := 0
	for i := range st {
		s := &st[i]
		byState[s.State]++
		if g := s.Options.Group; g != "" {
			byGroup[g]++
		}
		recent := recentClaimers(s.Claimers, now)
		claimers += recent
		if i >= c.cfg.MaxAddrs {
			continue
		}
		addr := s.Addr.String()
		for _, state := range claimStates {
			gauge(c.claimState, b2f(s.State == state), addr, s.Interface, state)
		}
		counter(c.claimAnswered, s.Answered, addr, s.Interface)
		counter(c.claimGratuitous, s.GratuitousFrames, addr, s.Interface)
		gauge(c.claimClaimers, float64(recent), addr, s.Interface)
		if s.Responder != "" {
			gauge(c.claimResponder, 1, addr, s.Interface, s.Responder, s.Hook)
		}
		if g := s.Options.Group; g != "" {
			gauge(c.claimGroup, 1, addr, s.Interface, g)
		}
		if s.Traffic != nil {
			counter(c.trafficPackets, s.Traffic.Packets, addr, s.Interface)
			counter(c.trafficBytes, s.Traffic.Bytes, addr, s.Interface)
		}
	}
	for _, state := range claimStates {
		gauge(c.claims, float64(byState[state]), state)
	}
	gauge(c.claimers, float64(claimers))
	for g, n := range byGroup {
		gauge(c.groups, float64(n), g)
	}
	gauge(c.withoutSeries, float64(max(len(st)-c.cfg.MaxAddrs, 0)))

	if c.cfg.Sniffer == nil {
		return
	}
	for _, cs := range c.cfg.Sniffer.Captures() {
		gauge(c.captureUp, b2f(cs.Error == ""), cs.Interface)
		counter(c.captureReceived, cs.Received, cs.Interface)
		counter(c.captureDropped, cs.Dropped, cs.Interface)
		counter(c.captureUndecodable, cs.Undecodable, cs.Interface)
	}
	counter(c.evicted, c.cfg.Sniffer.Evicted())
	counter(c.evictedOld, c.cfg.Sniffer.Evicted())
}

// recentClaimers counts the claimers seen within announce.ConflictHold,
// those that put a claim in state conflict.
func recentClaimers(cs []announce.Claimer, now time.Time) int {
	n := 0
	for _, c := range cs {
		if now.Sub(c.LastSeen) < announce.ConflictHold {
			n++
		}
	}
	return n
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// NewRegistry returns a registry with c, any more collectors (the store's),
// and the Go runtime's and the process's standard collectors (go_*,
// process_*), which every Prometheus exporter offers.
func NewRegistry(c *Collector, more ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(more...)
	return reg
}
