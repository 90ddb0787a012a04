package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vipctl/vip/internal/api"
)

// Store is what the store's metrics read of an agent guarded by one
// (fleet.Member).
type Store interface {
	Info() api.Store
	// Kept counts the claims the member keeps out of the engine, by
	// state (fenced, lost, standby).
	Kept() map[string]int
}

// storeStates are the states a guarded agent adds to the engine's.
var storeStates = []string{api.StateFenced, api.StateLost, api.StateStandby}

// StoreCollector shows an agent's place in the store: whether it is fenced,
// its lease, how long since its last renewal, and its claims that the store
// keeps out of the engine.
type StoreCollector struct {
	s                          Store
	now                        func() time.Time
	fenced, ttl, age, fenceAft *prometheus.Desc
	deadline, withheld         *prometheus.Desc
	claims                     *prometheus.Desc
	cordoned, cordonLeft       *prometheus.Desc
	fsEnabled, fsAnswering     *prometheus.Desc
	fsAckAge, fsPromised       *prometheus.Desc
}

// NewStoreCollector returns the store's metrics of s; now nil is time.Now.
func NewStoreCollector(s Store, now func() time.Time) *StoreCollector {
	if now == nil {
		now = time.Now
	}
	return &StoreCollector{
		s: s, now: now,
		fenced:      desc("vip_store_fenced", "Whether the agent is fenced (1): it could not renew its lease in the store and stopped answering for every guarded claim.", "node"),
		ttl:         desc("vip_store_lease_ttl_seconds", "The time to live of the agent's lease in the store.", "node"),
		fenceAft:    desc("vip_store_fence_after_seconds", "How long after the last renewal sent the agent fences: the TTL less the margin.", "node"),
		age:         desc("vip_store_last_renewal_age_seconds", "Seconds since the agent sent the last renewal of its lease that succeeded; it fences when this reaches vip_store_fence_after_seconds.", "node"),
		deadline:    desc("vip_store_answer_deadline_seconds", "Seconds left before the answer deadline (negative once it passed): no frame for a guarded claim leaves after it unless a renewal the store acknowledges moves it. It is checked where frames leave, in the kernel too, on CLOCK_BOOTTIME.", "node"),
		withheld:    desc("vip_store_withheld_frames_total", "Frames not sent because the answer deadline had passed: answers (the in-kernel responder's requests passed on unanswered included), gratuitous frames and probes.", "node"),
		cordoned:    desc("vip_store_cordoned", "Whether the agent's node is cordoned (1, vip cordon): it takes no address by move, take-over or standby, and keeps what it holds.", "node"),
		cordonLeft:  desc("vip_store_cordon_remaining_seconds", "Seconds until the node's cordon lifts by itself; absent for a cordon that holds until vip uncordon, or none.", "node"),
		fsEnabled:   desc("vip_store_failsafe_enabled", "Whether the agent runs with --failsafe (1): while the store is unreachable, it may answer on the promises of the other nodes.", "node"),
		fsAnswering: desc("vip_store_failsafe_answering", "Whether the agent answers on failsafe (1): the store is unreachable past the answer deadline, and every node of its failsafe set said it does not reach it either and promised to take none of its addresses.", "node"),
		fsAckAge:    desc("vip_store_failsafe_ack_age_seconds", "Seconds since the last round of failsafe acknowledgements, while the agent answers on failsafe; absent otherwise.", "node"),
		fsPromised:  desc("vip_store_failsafe_promise_remaining_seconds", "Seconds left of the last promise in force this node made to an owner answering on failsafe (0 when none): it takes nothing through the store until it ends.", "node"),
		claims:      desc("vip_store_claims", "Claims the store keeps out of the engine, by state: fenced (waiting for the store), lost (another node took it while this one was fenced), standby.", "node", "state"),
	}
}

// Describe sends the descriptions of the metrics.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.fenced, c.ttl, c.fenceAft, c.age, c.deadline, c.withheld, c.claims, c.cordoned, c.cordonLeft,
		c.fsEnabled, c.fsAnswering, c.fsAckAge, c.fsPromised} {
		ch <- d
	}
}

// Collect reads the store's state now.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	info := c.s.Info()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.fenced, b2f(!info.Fenced.IsZero()), info.Node)
	gauge(c.ttl, time.Duration(info.LeaseTTL).Seconds(), info.Node)
	gauge(c.fenceAft, time.Duration(info.FenceAfter).Seconds(), info.Node)
	gauge(c.age, c.now().Sub(info.Renewed).Seconds(), info.Node)
	if !info.Deadline.IsZero() || info.DeadlineClosed {
		// Closed (fenced, or no lease granted yet): no time left.
		gauge(c.deadline, time.Duration(info.DeadlineLeft).Seconds(), info.Node)
		ch <- prometheus.MustNewConstMetric(c.withheld, prometheus.CounterValue, float64(info.Withheld), info.Node)
	}
	gauge(c.cordoned, b2f(info.Cordon != nil), info.Node)
	if info.Cordon != nil && info.Cordon.Left != nil {
		gauge(c.cordonLeft, time.Duration(*info.Cordon.Left).Seconds(), info.Node)
	}
	gauge(c.fsEnabled, b2f(info.FailsafeEnabled), info.Node)
	gauge(c.fsAnswering, b2f(info.Failsafe != nil), info.Node)
	if f := info.Failsafe; f != nil {
		gauge(c.fsAckAge, c.now().Sub(f.AckedAt).Seconds(), info.Node)
	}
	var promised time.Duration
	if p := info.Promised; p != nil {
		promised = max(p.Until.Sub(c.now()), 0)
	}
	gauge(c.fsPromised, promised.Seconds(), info.Node)
	counts := c.s.Kept()
	for _, s := range storeStates {
		gauge(c.claims, float64(counts[s]), info.Node, s)
	}
}
