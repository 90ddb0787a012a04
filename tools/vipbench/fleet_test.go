package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// etcdMetricsText is a cut of etcd 3.4's /metrics, two samples apart.
const etcdMetricsText = `# HELP grpc_server_started_total Total number of RPCs started on the server.
# TYPE grpc_server_started_total counter
grpc_server_started_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"} %d
grpc_server_started_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} %d
grpc_server_started_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 10
# TYPE grpc_server_msg_received_total counter
grpc_server_msg_received_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"} %d
grpc_server_msg_received_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} %d
grpc_server_msg_received_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 10
# TYPE grpc_server_msg_sent_total counter
grpc_server_msg_sent_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} %d
# TYPE etcd_server_proposals_committed_total gauge
etcd_server_proposals_committed_total %d
# TYPE etcd_debugging_lease_renewed_total counter
etcd_debugging_lease_renewed_total %d
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total %g
# TYPE etcd_debugging_mvcc_slow_watcher_total gauge
etcd_debugging_mvcc_slow_watcher_total 0
`

func sampleAt(t *testing.T, at time.Time, keepalives, ranges, watchSent, proposals int, cpu float64) etcdSample {
	t.Helper()
	s, err := parseEtcdMetrics(strings.NewReader(fmt.Sprintf(etcdMetricsText, keepalives, ranges, keepalives, ranges, watchSent, proposals, keepalives, cpu)))
	if err != nil {
		t.Fatal(err)
	}
	s.At = at
	return s
}

func TestEtcdRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name        string
		a, b        [5]int // keepalives, ranges, watch messages sent, proposals, cpu (ms)
		wantMethods []string
		wantOnly    bool
		keepalives  float64
	}{
		{"keepalives only", [5]int{100, 5, 7, 40, 0}, [5]int{300, 5, 7, 40, 1000}, []string{keepAliveMethod}, true, 20},
		{"a read at rest", [5]int{100, 5, 7, 40, 0}, [5]int{300, 6, 7, 40, 0}, []string{keepAliveMethod, "KV/Range"}, false, 20},
		{"a write at rest", [5]int{100, 5, 7, 40, 0}, [5]int{300, 5, 7, 41, 0}, []string{keepAliveMethod}, false, 20},
		{"watch events sent", [5]int{100, 5, 7, 40, 0}, [5]int{100, 5, 70, 40, 0}, []string{"Watch/Watch"}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := sampleAt(t, t0, tt.a[0], tt.a[1], tt.a[2], tt.a[3], float64(tt.a[4])/1000)
			b := sampleAt(t, t0.Add(10*time.Second), tt.b[0], tt.b[1], tt.b[2], tt.b[3], float64(tt.b[4])/1000)
			r := ratesBetween(a, b)
			var got []string
			for _, m := range r.Methods {
				got = append(got, m.Method)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantMethods) {
				t.Errorf("methods: got %v, want %v", got, tt.wantMethods)
			}
			if _, ok := r.onlyKeepAlives(); ok != tt.wantOnly {
				t.Errorf("only keepalives: got %v, want %v (%+v)", ok, tt.wantOnly, r)
			}
			if got := r.method(keepAliveMethod).Received; got != tt.keepalives {
				t.Errorf("keepalives/s: got %v, want %v", got, tt.keepalives)
			}
			if want := float64(tt.b[4]-tt.a[4]) / 1000 / 10; r.CPU != want {
				t.Errorf("CPU: got %v, want %v", r.CPU, want)
			}
		})
	}
	if _, err := parseEtcdMetrics(strings.NewReader("grpc_server_started_total{ 1\n")); err == nil {
		t.Error("metrics that do not parse: got no error")
	}
}

func TestFleetAddr(t *testing.T) {
	docs := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32")}
	seen := map[netip.Addr]int{}
	for k := range 100000 {
		a := fleetAddr(k)
		if j, dup := seen[a]; dup {
			t.Fatalf("fleetAddr(%d) = fleetAddr(%d) = %s", k, j, a)
		}
		seen[a] = k
		inDocs := false
		for _, p := range docs {
			inDocs = inDocs || p.Contains(a)
		}
		if !inDocs || a.As16()[15] == 0 && a.Is4() {
			t.Fatalf("fleetAddr(%d) = %s: want a documentation address, not a network address", k, a)
		}
	}
	for _, tt := range []struct {
		k    int
		want string
	}{{0, "198.51.100.1"}, {253, "198.51.100.254"}, {254, "203.0.113.1"}, {507, "203.0.113.254"}, {508, "2001:db8:f1::1fc"}} {
		if got := fleetAddr(tt.k).String(); got != tt.want {
			t.Errorf("fleetAddr(%d): got %s, want %s", tt.k, got, tt.want)
		}
	}
}

func TestFirstErrors(t *testing.T) {
	fenced := func(i int) error {
		return fmt.Errorf("agent%04d: claim 100 addresses: this agent is fenced since 12:01:%02d, so it claims nothing", i, i%60)
	}
	tests := []struct {
		name      string
		errs      []error
		wantNil   bool
		wantLines int
		want      string
	}{
		{"none", []error{nil, nil}, true, 0, ""},
		{"one", []error{nil, fenced(1)}, false, 1, "1 of 2 joins failed"},
		{"a thousand alike", func() []error {
			var e []error
			for i := range 1000 {
				e = append(e, fenced(i))
			}
			return e
		}(), false, 3, "1000 of 1000 joins failed"},
		{"another kind after the first few", []error{fenced(1), fenced(2), fenced(3), fenced(4), errors.New("agent0005: the store is unreachable")}, false, 4, "5 of 5 joins failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := firstErrors(len(tt.errs), "joins", tt.errs)
			if (err == nil) != tt.wantNil {
				t.Fatalf("got %v, want nil: %v", err, tt.wantNil)
			}
			if err == nil {
				return
			}
			if lines := strings.Count(err.Error(), "\n") + 1; lines != tt.wantLines || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("got %d lines %q, want %d starting %q", lines, err, tt.wantLines, tt.want)
			}
		})
	}
}

func TestLabTB(t *testing.T) {
	var logged []string
	tb := newLabTB(func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) })
	var order []int
	tests := []struct {
		name    string
		fn      func()
		wantErr string
		skipped bool
	}{
		{"passes", func() { tb.Cleanup(func() { order = append(order, 1) }) }, "", false},
		{"Fatalf ends the helper alone", func() {
			tb.Cleanup(func() { order = append(order, 2) })
			tb.Fatalf("etcd on %s exited", "store")
			panic("not reached")
		}, "etcd on store exited", false},
		{"Errorf goes on", func() { tb.Errorf("first"); tb.Errorf("second") }, "first; second", false},
		{"Skip", func() { tb.Skip("needs etcd") }, "needs etcd", true},
		{"a failing clean-up is logged", func() { tb.Cleanup(func() { tb.Fatalf("cannot clean up") }) }, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tb.Do(tt.fn)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error with %q", err, tt.wantErr)
			case errors.Is(err, errLabSkipped) != tt.skipped:
				t.Errorf("got %v, want skipped: %v", err, tt.skipped)
			}
		})
	}
	dir := tb.TempDir()
	tb.Close()
	if fmt.Sprint(order) != "[2 1]" {
		t.Errorf("clean-ups ran in the order %v, want [2 1] (last registered first)", order)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "cannot clean up") {
		t.Errorf("logged %q, want the failing clean-up", logged)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("TempDir %s after Close: got %v, want it removed", dir, err)
	}
}
