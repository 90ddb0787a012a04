package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/netcheck"
)

var now = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

type fakeEngine struct {
	st     []announce.Status
	totals announce.Totals
}

func (f *fakeEngine) Status(...netip.Addr) []announce.Status { return f.st }
func (f *fakeEngine) Totals() announce.Totals                { return f.totals }

type fakeSniffer struct{ caps []api.CaptureStat }

func (f fakeSniffer) Captures() []api.CaptureStat { return f.caps }
func (fakeSniffer) Evicted() uint64               { return 3 }

func status(addr, iface, state string, answered uint64, claimers ...time.Time) announce.Status {
	s := announce.Status{State: state, Answered: answered, GratuitousFrames: 2 * answered}
	s.Addr, s.Interface = netip.MustParseAddr(addr), iface
	for _, seen := range claimers {
		s.Claimers = append(s.Claimers, announce.Claimer{LastSeen: seen})
	}
	return s
}

func testCollector(maxAddrs int) *Collector {
	ebpf := status("192.0.2.10", "eth0", api.StateAnnouncing, 5)
	ebpf.Responder, ebpf.Hook, ebpf.Traffic = "ebpf", "tcx", &announce.Traffic{Packets: 7, Bytes: 686, PacketsPerSecond: 1}
	socket := status("192.0.2.11", "eth0", api.StateConflict, 1, now.Add(-time.Second), now.Add(-time.Hour))
	socket.Responder = announce.KindSocket
	eng := &fakeEngine{
		st: []announce.Status{
			ebpf,
			socket,
			status("2001:db8::10", "eth1", api.StateWaiting, 0),
		},
		totals: announce.Totals{Answered: 40, GratuitousFrames: 12, ProbeFrames: 2, Conflicts: 1, ClaimerFrames: 6},
	}
	sniffer := fakeSniffer{caps: []api.CaptureStat{
		{Interface: "eth0", Received: 100, Dropped: 1, Undecodable: 2},
		{Interface: "eth1", Error: "no such device"},
	}}
	return NewCollector(Config{Engine: eng, Sniffer: sniffer, Version: "v1.2.3", Commit: "abc1234", MaxAddrs: maxAddrs, Now: func() time.Time { return now }})
}

func TestCollectorTotalsAndStates(t *testing.T) {
	c := testCollector(DefaultMaxAddrs)
	want := `
# HELP vip_requests_answered_total ARP requests and neighbor solicitations answered for held addresses, released ones included.
# TYPE vip_requests_answered_total counter
vip_requests_answered_total 40
# HELP vip_claims Claims held, by state: announcing (a gratuitous window runs), holding, waiting (the interface is down or gone), conflict (a competing claimer was seen).
# TYPE vip_claims gauge
vip_claims{state="announcing"} 1
vip_claims{state="conflict"} 1
vip_claims{state="holding"} 0
vip_claims{state="waiting"} 1
# HELP vip_competing_claimers Competing claimers (an address held here and another MAC answering for it) seen within the last 10s.
# TYPE vip_competing_claimers gauge
vip_competing_claimers 1
# HELP vip_capture_up Whether the capture that looks for competing claimers on the interface is open (1) or failed (0).
# TYPE vip_capture_up gauge
vip_capture_up{interface="eth0"} 1
vip_capture_up{interface="eth1"} 0
# HELP vip_capture_frames_dropped_total Frames the kernel dropped before the capture on the interface could read them.
# TYPE vip_capture_frames_dropped_total counter
vip_capture_frames_dropped_total{interface="eth0"} 1
vip_capture_frames_dropped_total{interface="eth1"} 0
# HELP vip_claim_requests_answered_total Requests answered for the address since it was claimed.
# TYPE vip_claim_requests_answered_total counter
vip_claim_requests_answered_total{addr="192.0.2.10",interface="eth0"} 5
vip_claim_requests_answered_total{addr="192.0.2.11",interface="eth0"} 1
vip_claim_requests_answered_total{addr="2001:db8::10",interface="eth1"} 0
# HELP vip_claim_responder What answers for the address, as a label: responder ebpf (hook tcx, xdp-generic or xdp-native), socket, or kernel (the address is on the interface); 1 for the current one.
# TYPE vip_claim_responder gauge
vip_claim_responder{addr="192.0.2.10",hook="tcx",interface="eth0",responder="ebpf"} 1
vip_claim_responder{addr="192.0.2.11",hook="",interface="eth0",responder="socket"} 1
# HELP vip_traffic_packets_total Packets arrived whose IPv4 or IPv6 destination is the address, since it was claimed; only where the eBPF responder counts them.
# TYPE vip_traffic_packets_total counter
vip_traffic_packets_total{addr="192.0.2.10",interface="eth0"} 7
# HELP vip_traffic_bytes_total Bytes of the frames arrived whose IPv4 or IPv6 destination is the address, since it was claimed; only where the eBPF responder counts them.
# TYPE vip_traffic_bytes_total counter
vip_traffic_bytes_total{addr="192.0.2.10",interface="eth0"} 686
# HELP vip_claims_without_series Claims held beyond the per-address bound (vip agent --metrics-max-addrs), counted in the totals but without vip_claim_* series of their own.
# TYPE vip_claims_without_series gauge
vip_claims_without_series 0
# HELP vip_build_info A metric with a constant value of 1, labelled with the version and commit vip was built from and its Go version.
# TYPE vip_build_info gauge
vip_build_info{commit="abc1234",goversion="` + runtime.Version() + `",version="v1.2.3"} 1
# HELP vip_whohas_table_evictions_total Targets dropped from the bounded who-has table to make room for others.
# TYPE vip_whohas_table_evictions_total counter
vip_whohas_table_evictions_total 3
# HELP vip_traffic_table_evictions_total Deprecated: vip_whohas_table_evictions_total, by its old name, until the next release.
# TYPE vip_traffic_table_evictions_total counter
vip_traffic_table_evictions_total 3
`
	names := []string{"vip_requests_answered_total", "vip_claims", "vip_competing_claimers", "vip_capture_up",
		"vip_capture_frames_dropped_total", "vip_claim_requests_answered_total", "vip_claim_responder", "vip_traffic_packets_total",
		"vip_traffic_bytes_total", "vip_claims_without_series", "vip_build_info", "vip_whohas_table_evictions_total", "vip_traffic_table_evictions_total"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "vip_claim_state"); n != 3*4 {
		t.Errorf("got %d vip_claim_state series, want 4 states for each of 3 claims", n)
	}
}

// TestCollectorBound checks the per-address bound: the lowest addresses
// keep their series, the others are only counted.
func TestCollectorBound(t *testing.T) {
	for _, tc := range []struct {
		max, series, without int
	}{{max: 0, series: 0, without: 3}, {max: 2, series: 2, without: 1}, {max: 3, series: 3, without: 0}, {max: 100, series: 3, without: 0}} {
		c := testCollector(tc.max)
		for _, name := range []string{"vip_claim_requests_answered_total", "vip_claim_gratuitous_frames_sent_total", "vip_claim_competing_claimers"} {
			if got := testutil.CollectAndCount(c, name); got != tc.series {
				t.Errorf("max %d: got %d series of %s, want %d", tc.max, got, name, tc.series)
			}
		}
		// Only the lowest address has traffic (eBPF); the waiting one has
		// no responder.
		if got, want := testutil.CollectAndCount(c, "vip_traffic_packets_total"), min(tc.series, 1); got != want {
			t.Errorf("max %d: got %d series of vip_traffic_packets_total, want %d", tc.max, got, want)
		}
		if got, want := testutil.CollectAndCount(c, "vip_claim_responder"), min(tc.series, 2); got != want {
			t.Errorf("max %d: got %d series of vip_claim_responder, want %d", tc.max, got, want)
		}
		if got := testutil.CollectAndCount(c, "vip_claim_state"); got != 4*tc.series {
			t.Errorf("max %d: got %d vip_claim_state series, want %d", tc.max, got, 4*tc.series)
		}
		want := "# HELP vip_claims_without_series Claims held beyond the per-address bound (vip agent --metrics-max-addrs), counted in the totals but without vip_claim_* series of their own.\n" +
			"# TYPE vip_claims_without_series gauge\nvip_claims_without_series " + strconv.Itoa(tc.without) + "\n"
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vip_claims_without_series"); err != nil {
			t.Errorf("max %d: %v", tc.max, err)
		}
		if err := testutil.CollectAndCompare(c, strings.NewReader("# HELP vip_requests_answered_total ARP requests and neighbor solicitations answered for held addresses, released ones included.\n# TYPE vip_requests_answered_total counter\nvip_requests_answered_total 40\n"), "vip_requests_answered_total"); err != nil {
			t.Errorf("max %d: the totals must not depend on the bound: %v", tc.max, err)
		}
	}
}

func TestCollectorLint(t *testing.T) {
	problems, err := testutil.CollectAndLint(testCollector(DefaultMaxAddrs))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestCollectorWithoutSniffer(t *testing.T) {
	c := NewCollector(Config{Engine: &fakeEngine{}})
	if n := testutil.CollectAndCount(c, "vip_capture_up", "vip_whohas_table_evictions_total", "vip_traffic_table_evictions_total"); n != 0 {
		t.Errorf("got %d capture series without a sniffer, want none", n)
	}
	if n := testutil.CollectAndCount(c, "vip_claims"); n != 4 {
		t.Errorf("got %d vip_claims series with nothing held, want every state at 0", n)
	}
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:9469", true}, {":9469", true}, {"[::1]:9469", true}, {"localhost:9469", true}, {"192.0.2.1:0", true},
		{"9469", false}, {"127.0.0.1", false}, {"127.0.0.1:http", false}, {"127.0.0.1:70000", false},
		{"metrics.example:9469", false}, {"", false},
	} {
		err := CheckAddr(tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q) = %v, want ok=%v", tc.addr, err, tc.ok)
		}
		if err != nil && !errors.Is(err, netcheck.ErrInvalid) {
			t.Errorf("CheckAddr(%q): %v does not satisfy netcheck.ErrInvalid (exit 2)", tc.addr, err)
		}
	}
}

func TestListenServesMetrics(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", NewRegistry(testCollector(DefaultMaxAddrs)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	resp, err := http.Get("http://" + srv.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"vip_requests_answered_total 40", "go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics: no %q in:\n%.2000s", want, body)
		}
	}
	// A busy address is an error at once, naming the flag to change.
	_, err = Listen(srv.Addr().String(), NewRegistry(testCollector(0)), nil)
	var op *net.OpError
	if !errors.As(err, &op) || !strings.Contains(err.Error(), "--metrics") {
		t.Errorf("Listen on a busy address: got %v, want the listen error naming --metrics", err)
	}
}

// TestCollectorGroups: an address in a group has a vip_claim_group series
// naming it, and each group counts its addresses held here.
func TestCollectorGroups(t *testing.T) {
	web1 := status("192.0.2.10", "eth0", api.StateHolding, 0)
	web2 := status("2001:db8::10", "eth0", api.StateHolding, 0)
	web1.Options.Group, web2.Options.Group = "web", "web"
	c := NewCollector(Config{Engine: &fakeEngine{st: []announce.Status{web1, status("192.0.2.11", "eth0", api.StateHolding, 0), web2}},
		MaxAddrs: DefaultMaxAddrs, Now: func() time.Time { return now }})
	want := `# HELP vip_claim_group The group a held address belongs to (vip claim --group), as a label: 1 for each address in a group.
# TYPE vip_claim_group gauge
vip_claim_group{addr="192.0.2.10",group="web",interface="eth0"} 1
vip_claim_group{addr="2001:db8::10",group="web",interface="eth0"} 1
# HELP vip_group_addresses Addresses this agent holds of each group (vip claim --group).
# TYPE vip_group_addresses gauge
vip_group_addresses{group="web"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vip_claim_group", "vip_group_addresses"); err != nil {
		t.Error(err)
	}
}
