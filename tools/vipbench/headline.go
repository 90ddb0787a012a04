package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// BENCHMARKS.md opens with one table of its headline figures, each read
// from a row of the file's own tables, against its target: issue 34's
// where that issue set one, else the row's own. It is made from the file,
// not from the run, because after a run of some steps (-run) the figures
// of the other steps exist only there: withHeadline runs on the file as
// written or spliced, so the table always says what the sections below it
// say. A row whose source is absent (a step never run) is left out.

// headlineHeading heads the file's first section.
const headlineHeading = "## Headline figures"

// Sections the headline reads.
const (
	kernelHeading = "## vip against the kernel"
	fleetHeading  = "## The fleet: agents and their claims on one etcd"
)

// headlineIntro is the text above the table.
const headlineIntro = "Each figure is read from a row of the section named beside it, and `vipbench` makes this table again from those sections whenever it writes or splices this file. " +
	"The target is issue 34's where it set one, else that of the row the figure comes from. " +
	"Which run measured what is in the run log at the end."

// headline is one row of the table.
type headline struct {
	Measure, Figure, Target string
	Met                     verdict
	From                    string // the section read, without its "## "
}

// table is a section's first table: its rows' cells, trimmed.
func (d mdDoc) table(heading string) [][]string {
	i := d.section(heading)
	if i < 0 {
		return nil
	}
	lines := d.sections[i].lines
	start, end := tableSpan(lines)
	if start < 0 {
		return nil
	}
	var rows [][]string
	for _, l := range lines[start+2 : end] {
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows = append(rows, cells)
	}
	return rows
}

// rowsWhere are the rows whose first cell matches re.
func rowsWhere(rows [][]string, re *regexp.Regexp) [][]string {
	var out [][]string
	for _, r := range rows {
		if len(r) > 0 && re.MatchString(r[0]) {
			out = append(out, r)
		}
	}
	return out
}

var (
	durationRe = regexp.MustCompile(`([0-9][0-9,]*(?:\.[0-9]+)?) (µs|ms|s)\b`)
	ratioRe    = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)×$`)
	percentRe  = regexp.MustCompile(`([0-9]+(?:\.[0-9]+)?)% of a core`)
)

// firstDuration reads the first duration written in s ("737.86 ms (p50
// 48.98 ms)" is 737.86 ms); after, when not empty, is what must come
// before it ("p99 ").
func firstDuration(s, after string) (time.Duration, bool) {
	if after != "" {
		i := strings.Index(s, after)
		if i < 0 {
			return 0, false
		}
		s = s[i+len(after):]
	}
	m := durationRe.FindStringSubmatchIndex(s)
	if m == nil || (after != "" && m[0] != 0) {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s[m[2]:m[3]], ",", ""), 64)
	if err != nil {
		return 0, false
	}
	unit := map[string]time.Duration{"µs": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[s[m[4]:m[5]]]
	return time.Duration(v * float64(unit)), true
}

func parseRatio(s string) (float64, bool) {
	m := ratioRe.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// judged is the verdict of a figure read as ok, or "—" when it could not
// be read.
func judged(ok, read bool) verdict {
	if !read {
		return noGoal
	}
	return verdictOf(ok)
}

// allMet is "yes" when every row met its target (the last cell), else
// how many did not.
func allMet(rows [][]string) verdict {
	missed := 0
	for _, r := range rows {
		if r[len(r)-1] != string(met) {
			missed++
		}
	}
	if missed == 0 {
		return met
	}
	return verdict(fmt.Sprintf("%s: %d of %d", notMet, missed, len(rows)))
}

// cells joins column i of rows with " / ".
func cells(rows [][]string, i int) string {
	var out []string
	for _, r := range rows {
		if i < len(r) {
			out = append(out, r[i])
		}
	}
	return strings.Join(out, " / ")
}

// headlines reads the headline figures from the file's tables.
func headlines(d mdDoc) []headline {
	const kernelFrom, fleetFrom = "vip against the kernel", "The fleet"
	var hs []headline
	add := func(h headline) { hs = append(hs, h) }
	kernel := d.table(kernelHeading)
	one := func(re string) []string {
		if rs := rowsWhere(kernel, regexp.MustCompile(re)); len(rs) > 0 && len(rs[0]) >= 6 {
			return rs[0]
		}
		return nil
	}

	// The in-kernel answers against the kernel's own.
	if rs := rowsWhere(kernel, regexp.MustCompile(`^IPv[46] [0-9,]+/s: (median|p99) reply latency$`)); len(rs) > 0 {
		lo, hi, n := 0.0, 0.0, 0
		for _, r := range rs {
			if v, ok := parseRatio(r[3]); ok {
				if n == 0 || v < lo {
					lo = v
				}
				if n == 0 || v > hi {
					hi = v
				}
				n++
			}
		}
		fig := "not measured"
		if n > 0 {
			fig = fmt.Sprintf("%.2f–%.2f× the kernel's, over %d rows", lo, hi, n)
		}
		add(headline{Measure: "vip (eBPF on tcx): every median and p99 reply latency, IPv4 and IPv6", Figure: fig, Target: rs[0][4], Met: allMet(rs), From: kernelFrom})
	}
	if r := one(`^IPv4 20,000/s: p99 reply latency$`); r != nil {
		add(headline{Measure: "IPv4 20,000/s: p99 reply latency", Figure: fmt.Sprintf("%s against the kernel's %s: %s", r[2], r[1], r[3]),
			Target: "≤ 1.0× kernel", Met: verdict(r[5]), From: kernelFrom})
	}
	if rs := rowsWhere(kernel, regexp.MustCompile(`^IPv[46] 100,000/s: requests without a reply within 1 s$`)); len(rs) > 0 {
		add(headline{Measure: "IPv4 / IPv6 100,000/s: requests without a reply within 1 s", Figure: cells(rs, 2), Target: rs[0][4], Met: allMet(rs), From: kernelFrom})
	}
	if rs := rowsWhere(kernel, regexp.MustCompile(`^IPv[46] 100,000/s for a held address: vip CPU$`)); len(rs) > 0 {
		add(headline{Measure: "IPv4 / IPv6 100,000/s for a held address: vip CPU", Figure: cells(rs, 2), Target: rs[0][4], Met: allMet(rs), From: kernelFrom})
	}
	for _, re := range []string{`^idle with one claim: RSS$`, `^10,000 claims: RSS$`} {
		if r := one(re); r != nil {
			add(headline{Measure: r[0], Figure: r[2], Target: r[4], Met: verdict(r[5]), From: kernelFrom})
		}
	}
	if r := one("^10,000 claims: `vip status --json`"); r != nil {
		add(headline{Measure: r[0], Figure: r[2], Target: "< 50 ms under the bench's load", Met: verdict(r[5]), From: kernelFrom})
	}
	if r := one("^`vip claim` against a running agent: start to first gratuitous frame on the wire"); r != nil {
		dur, okD := firstDuration(r[2], "")
		x, okX := parseRatio(r[3])
		add(headline{Measure: r[0], Figure: fmt.Sprintf("%s, %s `arping -U` (%s)", r[2], r[3], strings.TrimSuffix(r[1], " (arping -U)")),
			Target: "≤ 5 ms and ≤ 2× arping -U", Met: judged(dur <= 5*time.Millisecond && x <= 2, okD && okX), From: kernelFrom})
	}
	if r := one(`^gratuitous scheduler, 10,000 IPv4 VIPs armed at once: lateness of every later round, p99 \(max\)$`); r != nil {
		fig, _, _ := strings.Cut(r[2], " over ")
		dur, ok := firstDuration(r[2], "")
		add(headline{Measure: r[0], Figure: fig, Target: "≤ 5 ms", Met: judged(dur <= 5*time.Millisecond, ok), From: kernelFrom})
	}
	if r := one(`^fleet, .*: move p99 `); r != nil {
		dur, ok := firstDuration(r[2], "")
		add(headline{Measure: r[0], Figure: r[2], Target: "≤ 100 ms", Met: judged(dur <= 100*time.Millisecond, ok), From: kernelFrom})
	}

	// The fleet's section: its size opens its first paragraph.
	fleet := d.table(fleetHeading)
	if len(fleet) == 0 {
		return hs
	}
	size := "fleet"
	// otherTTL is the fleet's lease TTL when the section says it is not
	// the default (-fleet-ttl): etcd's load at rest is then not the one
	// the target is for.
	var otherTTL string
	if i := d.section(fleetHeading); i >= 0 {
		for _, l := range d.sections[i].lines {
			if s, _, ok := strings.Cut(l, ", each a real"); ok {
				size = "fleet, " + s
				if m := otherTTLRe.FindStringSubmatch(l); m != nil {
					otherTTL = m[1]
				}
				break
			}
		}
	}
	frow := func(re string) []string {
		if rs := rowsWhere(fleet, regexp.MustCompile(re)); len(rs) > 0 && len(rs[0]) >= 2 {
			return rs[0]
		}
		return nil
	}
	if r := frow("^claim: one `Member.Claim` of "); r != nil {
		dur, ok := firstDuration(r[1], "p99 ")
		add(headline{Measure: size + ": one claim of 100 addresses while the fleet fills, p99", Figure: r[1],
			Target: "≤ 300 ms", Met: judged(dur <= 300*time.Millisecond, ok), From: fleetFrom})
	}
	if r, rest := frow(`^CPU at rest$`), frow(`^etcd at rest over `); r != nil {
		fig := r[1]
		if rest != nil {
			keepalives, _, _ := strings.Cut(rest[1], ",")
			fig += "; " + keepalives
		}
		m := percentRe.FindStringSubmatch(r[1])
		var pct float64
		if m != nil {
			pct, _ = strconv.ParseFloat(m[1], 64)
		}
		met := judged(pct <= 25, m != nil)
		if otherTTL != "" {
			fig = "at TTL " + otherTTL + ", not the default: " + fig
			met = noGoal
		}
		add(headline{Measure: size + ": etcd at rest", Figure: fig, Target: "≤ 25% of a core at the new default TTL",
			Met: met, From: fleetFrom})
	}
	if r := frow("^read: `store.Client.History` of one node "); r != nil {
		dur, ok := firstDuration(r[1], "p50 ")
		add(headline{Measure: size + ": the history of one node", Figure: r[1], Target: "≤ 50 ms, without a scan",
			Met: judged(dur <= 50*time.Millisecond, ok), From: fleetFrom})
	}
	if r := frow(`^etcd while the fleet filled$`); r != nil {
		if m := regexp.MustCompile(`[0-9][0-9,.]* ranges/s`).FindString(r[1]); m != "" {
			add(headline{Measure: size + ": the history's trims while the fleet filled", Figure: m + " (a count after every write)",
				Target: "trims in batches", Met: noGoal, From: fleetFrom})
		}
	}
	return hs
}

// otherTTLRe reads the fleet's lease TTL off its section's first
// paragraph when it is not the default (fleetreport.go's ttlWhy).
var otherTTLRe = regexp.MustCompile(`Lease TTL (\S+) \(-fleet-ttl, not the default`)

// withHeadline returns the report s with its headline table made again
// from its sections, first, and its run log last.
func withHeadline(s string) string {
	d := parseMarkdown(s)
	if d.title == "" {
		return s
	}
	if i := d.section(headlineHeading); i >= 0 {
		d.sections = append(d.sections[:i], d.sections[i+1:]...)
	}
	d.moveRunLog()
	if i := d.section(runLogHeading); i >= 0 && i != len(d.sections)-1 {
		log := d.sections[i]
		d.sections = append(append(d.sections[:i:i], d.sections[i+1:]...), log)
	}
	hs := headlines(d)
	if len(hs) == 0 {
		return d.String()
	}
	lines := []string{"", headlineIntro, "", "| measure | figure | target | met? | from |", "|---|---|---|---|---|"}
	for _, h := range hs {
		lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s | %s |", h.Measure, h.Figure, h.Target, h.Met, h.From))
	}
	d.sections = append([]mdSection{{heading: headlineHeading, lines: append(lines, "")}}, d.sections...)
	d.preamble = []string{""}
	return d.String()
}
