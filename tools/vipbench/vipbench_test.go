package main

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/tools/loadgen"
)

func TestParseGoBench(t *testing.T) {
	out := []byte(`goos: linux
goarch: amd64
pkg: github.com/vipctl/vip/announce
cpu: Intel(R) Xeon(R) Processor
BenchmarkLinkAnswer/arp/socketpair-2         	   81850	     13107 ns/op	       0 B/op	       0 allocs/op
BenchmarkSchedulerRound/arm-10000-2        	      80	  17636373 ns/op	      1764 ns/key	 2601395 B/op	   20004 allocs/op
PASS
ok  	github.com/vipctl/vip/announce	11.491s
pkg: github.com/vipctl/vip/sniff
BenchmarkDecode-2   	20000000	        55.3 ns/op	  18083112 frames/s	       0 B/op	       0 allocs/op
BenchmarkNoProcs 	     100	        10 ns/op
`)
	got, err := parseGoBench(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		pkg, name string
		n         int64
		nsop      float64
		allocs    float64
		hasAllocs bool
	}{
		{"github.com/vipctl/vip/announce", "BenchmarkLinkAnswer/arp/socketpair", 81850, 13107, 0, true},
		{"github.com/vipctl/vip/announce", "BenchmarkSchedulerRound/arm-10000", 80, 17636373, 20004, true},
		{"github.com/vipctl/vip/sniff", "BenchmarkDecode", 20000000, 55.3, 0, true},
		{"github.com/vipctl/vip/sniff", "BenchmarkNoProcs", 100, 10, 0, false},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		ns, _ := g.Metric("ns/op")
		allocs, ok := g.Metric("allocs/op")
		if g.Pkg != w.pkg || g.Name != w.name || g.N != w.n || ns != w.nsop || ok != w.hasAllocs || allocs != w.allocs {
			t.Errorf("result %d: got %+v, want %+v", i, g, w)
		}
	}
	if v, ok := got[1].Metric("ns/key"); !ok || v != 1764 {
		t.Errorf("custom metric: got %v, %v, want 1764 ns/key", v, ok)
	}
	if _, err := parseGoBench([]byte("BenchmarkOdd-2  10  5 ns/op 7\n")); err == nil {
		t.Error("a metric without a unit: got no error")
	}
}

func TestParseProc(t *testing.T) {
	stat := []byte("4242 (vip agent) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 12345 1000000 2000 18446744073709551615\n")
	if got, err := parseStatTicks(stat); err != nil || got != 325 {
		t.Errorf("parseStatTicks: got %d, %v; want 325 (250 user + 75 system)", got, err)
	}
	if _, err := parseStatTicks([]byte("4242 (vip) S 1")); err == nil {
		t.Error("parseStatTicks of a short line: got no error")
	}
	status := "Name:\tvip\nVmPeak:\t 1300000 kB\nVmRSS:\t   21504 kB\nThreads:\t9\n"
	if got, err := parseVmRSS(strings.NewReader(status)); err != nil || got != 21504 {
		t.Errorf("parseVmRSS: got %d, %v; want 21504", got, err)
	}
	if _, err := parseVmRSS(strings.NewReader("Name:\tkthreadd\n")); err == nil {
		t.Error("parseVmRSS without VmRSS (a kernel thread): got no error")
	}
	busy, total, err := parseProcStat([]byte("cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 1 2 3 4\n"))
	if err != nil || busy != 170 || total != 990 {
		t.Errorf("parseProcStat: got busy %d, total %d, %v; want 170, 990", busy, total, err)
	}
	u := cpuUse{CPU: 30 * time.Millisecond, Wall: 60 * time.Second}
	if p := u.Percent(); p < 0.0499 || p > 0.0501 {
		t.Errorf("30ms over 60s: got %v%%, want 0.05%%", p)
	}
	if r := u.Resolution(); r < 0.0166 || r > 0.0167 {
		t.Errorf("resolution over 60s: got %v%%, want 1/60%%", r)
	}
}

func TestCPUModel(t *testing.T) {
	x86 := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n"
	arm := "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n"
	for in, want := range map[string]string{x86: "Intel(R) Xeon(R) Processor", arm: "CPU part 0xd0c", "": "unknown CPU"} {
		if got := cpuModel([]byte(in)); got != want {
			t.Errorf("cpuModel: got %q, want %q", got, want)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{fmtCount(0), "0"},
		{fmtCount(999), "999"},
		{fmtCount(1000), "1,000"},
		{fmtCount(int64(-1234567)), "-1,234,567"},
		{fmtDur(4600 * time.Nanosecond), "4.6 µs"},
		{fmtDur(1379373 * time.Nanosecond), "1.38 ms"},
		{fmtDur(0), "0"},
		{fmtRatio(30, 10), "3.0×"},
		{fmtRatio(30, 0), "—"},
		{fmtRatio(104, 100), "1.04×"},
		{fmtPercent(0.0123), "0.012%"},
		{fmtPercent(39.45), "39.5%"},
		{fmtMB(29297), "30.0 MB"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// TestReport renders a report with a result, a failure and a Go
// benchmark, and checks each shows.
func TestReport(t *testing.T) {
	res := &loadgen.Result{Target: netip.MustParseAddr("192.0.2.10"), Rate: 1000, Sent: 3, Answered: 3,
		Latencies: []time.Duration{10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond}}
	r := &report{
		Machine: machine{CPU: "Test CPU", Cores: 2, Kernel: "6.1", Go: "go1.26", Date: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), Source: "commit abc"},
		Command: "vipbench -short", Short: true,
		Rows:    []row{{Scenario: "IPv4 1,000/s: median reply latency", Kernel: "5.0 µs", Vip: "20.0 µs", Ratio: "4.0×", Target: "≤ 3× kernel", Met: notMet}},
		Loads:   []loadRow{{Responder: "vip", Res: res, CaptureReceived: -1, Busy: 0.5}},
		GoBench: []goBench{{Pkg: "github.com/vipctl/vip/sniff", Name: "BenchmarkDecode", N: 10, Metrics: []metric{{55.3, "ns/op"}, {0, "B/op"}, {0, "allocs/op"}, {1.8e7, "frames/s"}}}},
		GoCmd:   "go test -bench .",
		Steps:   []step{{Name: "lab up", Took: time.Second}, {Name: "claim to the wire", Took: 2 * time.Second, Err: errors.New("arping is missing\nsecond line")}},
		Clock:   "the clock", IdleSecs: 5,
	}
	var buf bytes.Buffer
	if err := r.write(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"Test CPU, 2 cores, Linux 6.1, go1.26, 2026-01-02 03:04 UTC",
		"| IPv4 1,000/s: median reply latency | 5.0 µs | 20.0 µs | 4.0× | ≤ 3× kernel | **no** |",
		"| vip | 192.0.2.10 | 1,000 | 0 | 3 | 3 | 0 | 0 | 20.0 µs | 30.0 µs | 30.0 µs | 0 | — | — | 50% |",
		"| sniff | BenchmarkDecode | 55.3 | 0 | 0 | 18,000,000 frames/s |",
		"## Failures",
		"**claim to the wire**: arping is missing",
		"| total | 3s | |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestParseFlags(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseFlags([]string{"-short", "-run", "kernel"}, &stderr)
	if err != nil || !o.short || o.timeout != 15*time.Minute || !o.only.MatchString("kernel IPv4 1,000/s") || o.out != "BENCHMARKS.md" {
		t.Errorf("got %+v, %v", o, err)
	}
	if _, err := parseFlags([]string{"-run", "("}, &stderr); err == nil {
		t.Error("a bad -run expression: got no error")
	}
	if _, err := parseFlags([]string{"extra"}, &stderr); err == nil {
		t.Error("an argument: got no error")
	}
	if _, err := parseFlags([]string{"-fleet-agents", "1"}, &stderr); err == nil {
		t.Error("-fleet-agents 1, too few to move between: got no error")
	}
	if o, err := parseFlags([]string{"-fleet-agents", "300", "-fleet-moves", "20"}, &stderr); err != nil || o.fleetAgents != 300 || o.fleetMoves != 20 {
		t.Errorf("-fleet-agents 300 -fleet-moves 20: got %+v, %v", o, err)
	}
}
