package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// spliceReports are a full run and a later run of some of its steps, as
// report.write renders them.
func spliceReports(t *testing.T) (full, partial *report) {
	t.Helper()
	m := machine{CPU: "Test CPU", Cores: 2, Kernel: "6.18", Go: "go1.26", Date: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Source: "commit aaaaaaa, no uncommitted changes to non-test code"}
	full = &report{
		Machine: m, Command: "vipbench", LoadBefore: "1.00 1.00 1.00", LoadAfter: "1.10 1.00 1.00",
		Rows: []row{
			{Scenario: "IPv4 1,000/s: median reply latency", Kernel: "3.0 µs", Vip: "45.0 µs", Ratio: "15.0×", Target: "≤ 3× kernel", Met: notMet},
			{Scenario: "IPv4 100,000/s: requests without a reply within 1 s", Kernel: "0 of 500,000", Vip: "0 of 500,000", Ratio: "—", Target: "none lost", Met: met},
			{Scenario: "fleet, 1,000 agents × 100 claims: move p99", Kernel: "—", Vip: "624 ms", Ratio: "—", Target: "≤ 250 ms", Met: notMet},
		},
		Steps: []step{{Name: "fleet", Took: 20 * time.Minute}, {Name: "kernel IPv4 1,000/s", Took: 10 * time.Second},
			{Name: "vip IPv4 1,000/s", Took: 10 * time.Second}, {Name: "claim to the wire", Took: 5 * time.Second, Err: errors.New("arping is missing")}},
		Notes: []string{"Claim to the wire, every repeat: vip [16ms]; arping -U [1ms].", "10,000 claims: `vip status --json` printed 4,165,093 bytes."},
		Clock: "the clock", IdleSecs: 60,
	}
	partial = &report{
		Machine: m, Command: "vipbench -run ^(vip IPv4|claim)", LoadBefore: "0.50 0.60 0.70", LoadAfter: "0.80 0.60 0.70",
		Rows: []row{
			{Scenario: "IPv4 1,000/s: median reply latency", Kernel: "not run", Vip: "3.0 µs", Ratio: "—", Target: "≤ 1× kernel", Met: noGoal},
			{Scenario: "IPv4 100,000/s: median reply latency", Kernel: "not run", Vip: "2.5 µs", Ratio: "—", Target: "≤ 1× kernel", Met: noGoal},
			{Scenario: "IPv4 100,000/s: requests without a reply within 1 s", Kernel: "not run", Vip: "0 of 500,000", Ratio: "—", Target: "none lost", Met: met},
		},
		Steps: []step{{Name: "build vip", Took: 2 * time.Second}, {Name: "lab up", Took: 100 * time.Millisecond},
			{Name: "vip IPv4 1,000/s", Took: 11 * time.Second}, {Name: "claim to the wire", Took: 6 * time.Second}},
		Notes: []string{"Claim to the wire, every repeat: vip [12ms]; arping -U [1ms]."},
		Clock: "the clock", IdleSecs: 60,
	}
	partial.Machine.Date = m.Date.Add(time.Hour)
	partial.Machine.Source = "commit bbbbbbb, no uncommitted changes to non-test code"
	return full, partial
}

func render(t *testing.T, r *report) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.write(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestSpliceGolden splices a small partial report into a small full one
// and compares the result with a golden file.
func TestSpliceGolden(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "splice", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	prov := runProvenance{Command: "vipbench -run ^(vip IPv4|claim)", Source: "commit bbbbbbb", Mode: "full run",
		Date: time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC), LoadBefore: "0.50 0.60 0.70", LoadAfter: "0.80 0.60 0.70",
		Steps: []step{{Name: "build vip"}, {Name: "vip IPv4 1,000/s"}, {Name: "claim to the wire"}}}
	got := splice(read("old.md"), read("fresh.md"), prov)
	golden := filepath.Join("testdata", "splice", "spliced.md.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want := read("spliced.md.golden"); got != want {
		t.Errorf("spliced file differs from %s (go test -update rewrites it): got\n%s", golden, got)
	}
}

// TestSplice splices a partial run into a full run's file, both as
// report.write renders them, and checks the parts one by one.
func TestSplice(t *testing.T) {
	full, partial := spliceReports(t)
	got := splice(render(t, full), render(t, partial), partial.provenance())
	for _, tt := range []struct {
		name     string
		want     string
		wantNot  string
		before   string // want appears before this
		wantOnce bool
	}{
		{name: "a re-measured row replaces the old one", want: "| IPv4 1,000/s: median reply latency | not run | 3.0 µs | — | ≤ 1× kernel | — |", wantNot: "45.0 µs", wantOnce: true},
		{name: "a new row follows the row before it in the run", want: "| IPv4 100,000/s: median reply latency |", before: "| IPv4 100,000/s: requests without a reply within 1 s |"},
		{name: "a row the run did not measure stays", want: "| fleet, 1,000 agents × 100 claims: move p99 | — | 624 ms |"},
		{name: "the old run stays named", want: "Written by `vipbench`; every number in this file is from that one run, but for what the runs listed under *Re-measured since* measured."},
		{name: "the partial run is named with its commit and steps", want: "- `vipbench -run ^(vip IPv4|claim)`, 2026-12-01 13:00 UTC, commit bbbbbbb, no uncommitted changes to non-test code, full run; load average 0.50 0.60 0.70 before, 0.80 0.60 0.70 after: vip IPv4 1,000/s; claim to the wire."},
		{name: "a re-measured step's time replaces the old one", want: "| vip IPv4 1,000/s | 11s | ok |", wantNot: "| vip IPv4 1,000/s | 10s |"},
		{name: "a step only the partial run had joins the steps table", want: "| build vip | 2s | ok |"},
		{name: "the total is over every step kept", want: "| total | 20m29.1s | |", wantOnce: true},
		{name: "a note of the same subject is replaced", want: "- Claim to the wire, every repeat: vip [12ms]", wantNot: "vip [16ms]"},
		{name: "a note of another subject stays", want: "- 10,000 claims: `vip status --json` printed 4,165,093 bytes."},
		{name: "a failure measured away leaves", wantNot: "## Failures"},
		{name: "the tables' headings are not doubled", want: "## vip against the kernel", wantOnce: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("got no %q in:\n%s", tt.want, got)
			}
			if tt.wantNot != "" && strings.Contains(got, tt.wantNot) {
				t.Errorf("got %q, want it gone:\n%s", tt.wantNot, got)
			}
			if tt.wantOnce && strings.Count(got, tt.want) != 1 {
				t.Errorf("got %q %d times, want once", tt.want, strings.Count(got, tt.want))
			}
			if tt.before != "" && strings.Index(got, tt.want) > strings.Index(got, tt.before) {
				t.Errorf("got %q after %q, want it before", tt.want, tt.before)
			}
		})
	}

	// A second partial run adds its own line and keeps the first's.
	partial.Command, partial.Steps = "vipbench -run ^fleet$", []step{{Name: "fleet", Took: 19 * time.Minute}}
	partial.Rows, partial.Notes = nil, nil
	again := splice(got, render(t, partial), partial.provenance())
	if n := strings.Count(again, remeasuredHead); n != 1 {
		t.Errorf("second splice: got the re-measured heading %d times, want once", n)
	}
	for _, want := range []string{"- `vipbench -run ^(vip IPv4|claim)`", "- `vipbench -run ^fleet$`", "| fleet | 19m0s | ok |", "| IPv4 1,000/s: median reply latency | not run | 3.0 µs |"} {
		if !strings.Contains(again, want) {
			t.Errorf("second splice: got no %q in:\n%s", want, again)
		}
	}
}

// TestSpliceNothingToSpliceInto: a file that is not a report is replaced.
func TestSpliceNothingToSpliceInto(t *testing.T) {
	_, partial := spliceReports(t)
	fresh := render(t, partial)
	if got := splice("", fresh, partial.provenance()); got != fresh {
		t.Errorf("splice into an empty file: got\n%s\nwant the fresh report", got)
	}
}

// TestWriteReport: a run of every step rewrites the file, a run of some
// (-run) splices itself into it.
func TestWriteReport(t *testing.T) {
	full, partial := spliceReports(t)
	for _, tt := range []struct {
		name     string
		run      string
		want     []string
		wantGone []string
	}{
		{"every step", "", []string{"Written by `vipbench -run ^(vip IPv4|claim)`; every number in this file is from that one run."}, []string{"fleet, 1,000 agents"}},
		{"some steps", "^(vip IPv4|claim)", []string{remeasuredHead, "fleet, 1,000 agents × 100 claims: move p99"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
			if err := os.WriteFile(out, []byte(render(t, full)), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"-out", out}
			if tt.run != "" {
				args = append(args, "-run", tt.run)
			}
			var stderr bytes.Buffer
			o, err := parseFlags(args, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			if err := writeReport(o, partial, &stderr, &stderr); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("got no %q in:\n%s", w, b)
				}
			}
			for _, w := range tt.wantGone {
				if strings.Contains(string(b), w) {
					t.Errorf("got %q, want it gone", w)
				}
			}
		})
	}
}
