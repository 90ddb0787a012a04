package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHeadlines reads the headline figures of a small report and judges
// them against issue 34's targets.
func TestHeadlines(t *testing.T) {
	doc := parseMarkdown(`# Benchmarks

## vip against the kernel

| scenario | kernel | vip | ratio | target | met? |
|---|---|---|---|---|---|
| IPv4 1,000/s: median reply latency | 3.6 µs | 3.5 µs | 0.96× | ≤ 1.0× kernel | yes |
| IPv4 20,000/s: p99 reply latency | 6.8 µs | 9.6 µs | 1.42× | ≤ 1.0× kernel | **no** |
| IPv4 20,000/s: p99 reply latency, socket responder | 5.9 µs | 169.1 µs | 28.6× | ≤ 10.0× kernel | **no** |
| ` + "`vip claim`" + ` against a running agent: start to first gratuitous frame on the wire (median of 5) | 1.26 ms (arping -U) | 4.10 ms | 3.3× | ≤ 20 ms | yes |
| fleet, 1,000 agents × 100 claims: move p99 (fleet.Mover.Move called → live on the target) | — | 90.00 ms (p50 48.98 ms) over 200 moves | — | ≤ 250.00 ms | yes |

## The fleet: agents and their claims on one etcd

1,000 agents × 100 claims, each a real ` + "`fleet.Member`" + `.

| measure | value | target | met? |
|---|---|---|---|
| claim: one ` + "`Member.Claim`" + ` of 100 addresses, called → returned live | p50 640.57 ms, p99 3.34 s, max 4.19 s over 1000 claims | — | — |
| CPU at rest | etcd 23.6% of a core, the 1,000 agents 32.1% | — | — |
`)
	got := map[string]headline{}
	for _, h := range headlines(doc) {
		got[h.Measure] = h
	}
	for _, tt := range []struct {
		measure, figure string
		want            verdict
	}{
		{"vip (eBPF on tcx): every median and p99 reply latency, IPv4 and IPv6", "0.96–1.42× the kernel's, over 2 rows", "**no**: 1 of 2"},
		{"IPv4 20,000/s: p99 reply latency", "9.6 µs against the kernel's 6.8 µs: 1.42×", notMet},
		{"`vip claim` against a running agent: start to first gratuitous frame on the wire (median of 5)", "4.10 ms, 3.3× `arping -U` (1.26 ms)", notMet},
		{"fleet, 1,000 agents × 100 claims: move p99 (fleet.Mover.Move called → live on the target)", "90.00 ms (p50 48.98 ms) over 200 moves", met},
		{"fleet, 1,000 agents × 100 claims: one claim of 100 addresses while the fleet fills, p99", "p50 640.57 ms, p99 3.34 s, max 4.19 s over 1000 claims", notMet},
		{"fleet, 1,000 agents × 100 claims: etcd at rest", "etcd 23.6% of a core, the 1,000 agents 32.1%", met},
	} {
		h, ok := got[tt.measure]
		if !ok {
			t.Errorf("no headline %q in %v", tt.measure, got)
			continue
		}
		if h.Figure != tt.figure || h.Met != tt.want {
			t.Errorf("%s: got %q, %q; want %q, %q", tt.measure, h.Figure, h.Met, tt.figure, tt.want)
		}
	}
	if len(got) != 6 {
		t.Errorf("got %d headlines, want 6 (none for rows the report lacks)", len(got))
	}
}

// TestHeadlineFleetAtAnotherTTL: a fleet measured at a TTL other than the
// default (-fleet-ttl) says so in its etcd-at-rest figure and is not
// judged against the target, which is the default's.
func TestHeadlineFleetAtAnotherTTL(t *testing.T) {
	doc := parseMarkdown(`# Benchmarks

## The fleet: agents and their claims on one etcd

1,000 agents × 100 claims, each a real ` + "`fleet.Member`" + `. Lease TTL 6s (-fleet-ttl, not the default 2s): each agent renews every 1s.

| measure | value | target | met? |
|---|---|---|---|
| CPU at rest | etcd 23.6% of a core, the 1,000 agents 32.1% | — | — |
`)
	for _, h := range headlines(doc) {
		if h.Measure != "fleet, 1,000 agents × 100 claims: etcd at rest" {
			continue
		}
		if want := "at TTL 6s, not the default: etcd 23.6% of a core, the 1,000 agents 32.1%"; h.Figure != want || h.Met != noGoal {
			t.Errorf("got %q, %q; want %q, %q", h.Figure, h.Met, want, noGoal)
		}
		return
	}
	t.Error("no etcd-at-rest headline")
}

func TestFirstDuration(t *testing.T) {
	for _, tt := range []struct {
		s, after string
		want     time.Duration
		ok       bool
	}{
		{"737.86 ms (p50 48.98 ms)", "", 737860 * time.Microsecond, true},
		{"p50 640.57 ms, p99 3.34 s, max 4.19 s", "p99 ", 3340 * time.Millisecond, true},
		{"p50 5.97 s, p99 8.64 s", "p50 ", 5970 * time.Millisecond, true},
		{"18.67 ms (33.92 ms) over 120,000 rounds", "", 18670 * time.Microsecond, true},
		{"9.6 µs", "", 9600 * time.Nanosecond, true},
		{"not run", "", 0, false},
		{"p50 1 s", "p99 ", 0, false},
	} {
		got, ok := firstDuration(tt.s, tt.after)
		if got != tt.want || ok != tt.ok {
			t.Errorf("firstDuration(%q, %q) = %v, %v; want %v, %v", tt.s, tt.after, got, ok, tt.want, tt.ok)
		}
	}
}

// TestWithHeadline: the table opens the file, the run log closes it, and
// making it again changes nothing.
func TestWithHeadline(t *testing.T) {
	full, partial := spliceReports(t)
	for name, s := range map[string]string{
		"written":                render(t, full),
		"spliced":                splice(render(t, full), render(t, partial), partial.provenance()),
		"an older file":          readTestdata(t, "old.md"),
		"an older file, spliced": splice(readTestdata(t, "old.md"), readTestdata(t, "fresh.md"), partial.provenance()),
	} {
		t.Run(name, func(t *testing.T) {
			got := withHeadline(s)
			d := parseMarkdown(got)
			if len(d.sections) < 2 || d.sections[0].heading != headlineHeading || d.sections[len(d.sections)-1].heading != runLogHeading {
				var hs []string
				for _, s := range d.sections {
					hs = append(hs, s.heading)
				}
				t.Errorf("got sections %q, want %q first and %q last", hs, headlineHeading, runLogHeading)
			}
			if strings.Count(got, "Written by `") != 1 {
				t.Errorf("got %d run lines, want one:\n%s", strings.Count(got, "Written by `"), got)
			}
			if again := withHeadline(got); again != got {
				t.Errorf("made again, the file changed:\n%s\nthen\n%s", got, again)
			}
		})
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "splice", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBenchmarksFile: the committed BENCHMARKS.md opens with the headline
// table its sections make and ends with its run log; -update makes it so.
func TestBenchmarksFile(t *testing.T) {
	path := filepath.Join("..", "..", "BENCHMARKS.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := withHeadline(string(b))
	if string(b) == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("BENCHMARKS.md's headline table is stale or its run log is not last: run go test ./tools/vipbench -run %s -update", t.Name())
}
