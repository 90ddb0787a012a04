package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// etcdSample is what the fleet step reads of etcd's own /metrics at one
// moment: its gRPC calls by method, and the counters that tell writes and
// lease renewals apart.
type etcdSample struct {
	At time.Time
	// Started counts the calls (unary) or streams begun, Received the
	// messages received and Sent those sent, by "Service/Method".
	Started, Received, Sent map[string]float64
	// Proposals counts the raft proposals committed: every write.
	Proposals float64
	// Renewed counts the leases renewed (etcd_debugging_lease_renewed_total).
	Renewed float64
	// CPU is etcd's process_cpu_seconds_total, RSS its resident bytes.
	CPU, RSS float64
	// SlowWatchers are watchers behind the store, still being sent events.
	SlowWatchers float64
	// Keys is how many keys the store holds.
	Keys float64
}

// etcdScraper reads an etcd member's /metrics with every connection made by
// dial (from inside a lab host).
type etcdScraper struct {
	url string
	hc  *http.Client
}

func newEtcdScraper(endpoint string, dial func(ctx context.Context, addr string) (net.Conn, error)) *etcdScraper {
	return &etcdScraper{
		url: strings.TrimSuffix(endpoint, "/") + "/metrics",
		hc: &http.Client{
			Timeout: 10 * time.Second,
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) },
			},
		},
	}
}

func (s *etcdScraper) close() { s.hc.CloseIdleConnections() }

// sample reads /metrics once.
func (s *etcdScraper) sample(ctx context.Context) (etcdSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return etcdSample{}, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return etcdSample{}, fmt.Errorf("read etcd's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return etcdSample{}, fmt.Errorf("read etcd's metrics: %s", resp.Status)
	}
	smp, err := parseEtcdMetrics(resp.Body)
	smp.At = time.Now()
	return smp, err
}

// parseEtcdMetrics reads the Prometheus text etcd serves.
func parseEtcdMetrics(r io.Reader) (etcdSample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return etcdSample{}, fmt.Errorf("etcd's metrics do not parse: %w", err)
	}
	smp := etcdSample{Started: byMethod(fams["grpc_server_started_total"]), Received: byMethod(fams["grpc_server_msg_received_total"]),
		Sent: byMethod(fams["grpc_server_msg_sent_total"])}
	for name, v := range map[string]*float64{
		"etcd_server_proposals_committed_total":  &smp.Proposals,
		"etcd_debugging_lease_renewed_total":     &smp.Renewed,
		"process_cpu_seconds_total":              &smp.CPU,
		"process_resident_memory_bytes":          &smp.RSS,
		"etcd_debugging_mvcc_slow_watcher_total": &smp.SlowWatchers,
		"etcd_debugging_mvcc_keys_total":         &smp.Keys,
	} {
		*v = sum(fams[name])
	}
	return smp, nil
}

// value is a counter's, gauge's or untyped metric's value.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func sum(f *dto.MetricFamily) float64 {
	var n float64
	for _, m := range f.GetMetric() {
		n += value(m)
	}
	return n
}

// byMethod adds a gRPC metric up by "Service/Method", the service without
// its package (etcdserverpb.Lease becomes Lease).
func byMethod(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		var svc, method string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "grpc_service":
				svc = l.GetValue()
			case "grpc_method":
				method = l.GetValue()
			}
		}
		if method == "" {
			continue
		}
		svc = svc[strings.LastIndexByte(svc, '.')+1:]
		out[svc+"/"+method] += value(m)
	}
	return out
}

// methodRate is one gRPC method's traffic between two samples.
type methodRate struct {
	Method string
	// Started, Received and Sent are per second; Calls is the calls or
	// streams begun in all.
	Started, Received, Sent float64
	Calls                   float64
}

// etcdRates is the traffic between two samples of the same member.
type etcdRates struct {
	Wall time.Duration
	// Methods are those with any traffic, the busiest first.
	Methods []methodRate
	// Proposals and Renewed are per second; CPU is etcd's share of one
	// core.
	Proposals, Renewed, CPU float64
}

// ratesBetween returns what happened from a to b.
func ratesBetween(a, b etcdSample) etcdRates {
	r := etcdRates{Wall: b.At.Sub(a.At)}
	secs := r.Wall.Seconds()
	if secs <= 0 {
		return r
	}
	for m, n := range b.Received {
		started, received, sent := b.Started[m]-a.Started[m], n-a.Received[m], b.Sent[m]-a.Sent[m]
		if started <= 0 && received <= 0 && sent <= 0 {
			continue
		}
		r.Methods = append(r.Methods, methodRate{Method: m, Started: started / secs, Received: received / secs, Sent: sent / secs, Calls: started})
	}
	slices.SortFunc(r.Methods, func(x, y methodRate) int {
		if x.Received != y.Received {
			if x.Received > y.Received {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Method, y.Method)
	})
	r.Proposals = (b.Proposals - a.Proposals) / secs
	r.Renewed = (b.Renewed - a.Renewed) / secs
	r.CPU = (b.CPU - a.CPU) / secs
	return r
}

// method returns the rate of one method, zero when it had no traffic.
func (r etcdRates) method(name string) methodRate {
	i := slices.IndexFunc(r.Methods, func(m methodRate) bool { return m.Method == name })
	if i < 0 {
		return methodRate{Method: name}
	}
	return r.Methods[i]
}
