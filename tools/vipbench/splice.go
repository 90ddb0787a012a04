package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// A run of some steps (-run) re-measures part of BENCHMARKS.md, so it
// splices what it measured into the file as it is instead of rewriting it:
// its rows replace the rows of the same scenario in each table, its
// sections (the fleet's, the floor's) replace theirs, the rest stays, and
// the run log at the end gains a line naming the run, its commit and the
// steps it measured. The file is the only record of the earlier runs, so the splice
// works on its Markdown: sections by their "## " heading, table rows by
// their first cells, list items by the words before their first colon.

// mdDoc is BENCHMARKS.md cut into its parts.
type mdDoc struct {
	title    string   // the "# " line
	preamble []string // lines between the title and the first section (the run log, in files written before it moved to the end)
	sections []mdSection
}

// mdSection is one "## " section: its heading line and the lines after it.
type mdSection struct {
	heading string
	lines   []string
}

func parseMarkdown(s string) mdDoc {
	var d mdDoc
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	var cur *mdSection
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "# ") && d.title == "" && cur == nil:
			d.title = l
		case strings.HasPrefix(l, "## "):
			d.sections = append(d.sections, mdSection{heading: l})
			cur = &d.sections[len(d.sections)-1]
		case cur == nil:
			d.preamble = append(d.preamble, l)
		default:
			cur.lines = append(cur.lines, l)
		}
	}
	return d
}

func (d mdDoc) String() string {
	var b strings.Builder
	b.WriteString(d.title + "\n")
	for _, l := range d.preamble {
		b.WriteString(l + "\n")
	}
	for i, s := range d.sections {
		b.WriteString(s.heading + "\n")
		lines := s.lines
		if i < len(d.sections)-1 {
			// A section taken from the end of the fresh file ends
			// without the blank line before the next heading.
			lines = append(trimBlank(lines), "")
		}
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func (d *mdDoc) section(heading string) int {
	for i, s := range d.sections {
		if s.heading == heading {
			return i
		}
	}
	return -1
}

// How each section takes a later run's version of itself. Sections not
// named here are replaced whole when the later run has them.
var (
	// tableKeys are the sections whose table is merged row by row, and how
	// many leading cells name a row.
	tableKeys = map[string]int{
		"## vip against the kernel": 1,
		"## Load runs":              3,
		"## What took how long":     1,
	}
	// listSections are merged item by item.
	listSections = map[string]bool{
		"## Notes from this run": true,
		"## Failures":            true,
	}
)

// runProvenance is the run log's line for one partial run.
type runProvenance struct {
	Command, Source, Mode, LoadBefore, LoadAfter string
	Date                                         time.Time
	Steps                                        []step
}

func (p runProvenance) line() string {
	var names []string
	for _, s := range p.Steps {
		switch s.Name {
		case "build vip", "lab up", etcdStep:
			continue
		}
		names = append(names, s.Name)
	}
	what := strings.Join(names, "; ")
	if what == "" {
		what = "no step measured, only the text sections written again as this commit writes them"
	}
	return fmt.Sprintf("- `%s`, %s, %s, %s; load average %s before, %s after: %s.",
		p.Command, p.Date.UTC().Format("2006-01-02 15:04 MST"), p.Source, p.Mode, p.LoadBefore, p.LoadAfter, what)
}

// remeasuredHead opens the run log's list of partial runs.
const remeasuredHead = "**Re-measured since** by runs of some steps: each row, section, note and step in this file is from the latest of these runs that measured it, the rest from the run above."

// oldRemeasuredHead is remeasuredHead as files said it before the run log
// moved to their end, below the rows.
const oldRemeasuredHead = "**Re-measured since** by runs of some steps: each row, section, note and step below is from the latest of these runs that measured it, the rest from the run above."

// splice returns old with what the partial run rendered in fresh put in
// place of the parts it measured.
func splice(old, fresh string, prov runProvenance) string {
	o, n := parseMarkdown(old), parseMarkdown(fresh)
	if o.title == "" {
		return fresh
	}
	o.moveRunLog()
	ok := map[string]bool{} // steps the partial run measured without error
	for _, s := range prov.Steps {
		if s.Err == nil {
			ok[s.Name] = true
		}
	}
	after := -1 // where the previous fresh section went
	for _, ns := range n.sections {
		if ns.heading == runLogHeading || ns.heading == headlineHeading {
			// The old run log gains this run's line below; the
			// headline table is made again from the spliced file.
			continue
		}
		i := o.section(ns.heading)
		if i < 0 {
			after++
			o.sections = append(o.sections[:after], append([]mdSection{ns}, o.sections[after:]...)...)
			continue
		}
		switch {
		case tableKeys[ns.heading] > 0:
			o.sections[i].lines = mergeTable(o.sections[i].lines, ns.lines, tableKeys[ns.heading])
		case listSections[ns.heading]:
			o.sections[i].lines = mergeList(o.sections[i].lines, ns.lines, ok)
		default:
			o.sections[i] = ns
		}
		after = i
	}
	// A failure the partial run measured away leaves with its section.
	if i := o.section("## Failures"); i >= 0 && n.section("## Failures") < 0 {
		o.sections[i].lines = mergeList(o.sections[i].lines, nil, ok)
		if len(listItems(o.sections[i].lines)) == 0 {
			o.sections = append(o.sections[:i], o.sections[i+1:]...)
		}
	}
	// The run log gains this run's line, and stays last.
	i := o.section(runLogHeading)
	runLog := o.sections[i]
	runLog.lines = spliceRunLog(runLog.lines, prov)
	o.sections = append(append(o.sections[:i:i], o.sections[i+1:]...), runLog)
	return o.String()
}

// runLogHeading heads the last section, which says which runs measured
// what: the run that wrote the file, then the runs of some steps spliced
// into it.
const runLogHeading = "## Run log"

// moveRunLog gives a file written before the run log moved to the end
// (it stood between the title and the first section) a run log section.
func (d *mdDoc) moveRunLog() {
	if d.section(runLogHeading) >= 0 {
		return
	}
	lines := trimBlank(d.preamble)
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for i, l := range lines {
		l = strings.Replace(l, "; every number below is from that one run", "; every number in this file is from that one run", 1)
		if l == oldRemeasuredHead {
			l = remeasuredHead
		}
		lines[i] = l
	}
	d.preamble = []string{""}
	d.sections = append(d.sections, mdSection{heading: runLogHeading, lines: append([]string{""}, lines...)})
}

func spliceRunLog(lines []string, prov runProvenance) []string {
	out := trimBlank(lines)
	has := false
	for i, l := range out {
		if strings.HasPrefix(l, "**Re-measured since**") {
			has = true
		}
		out[i] = strings.Replace(l, "; every number in this file is from that one run.", "; every number in this file is from that one run, but for what the runs listed under *Re-measured since* measured.", 1)
	}
	if !has {
		out = append(out, "", remeasuredHead, "")
	}
	return append(out, prov.line())
}

func trimBlank(lines []string) []string {
	out := append([]string(nil), lines...)
	for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
		out = out[:len(out)-1]
	}
	return out
}

// tableSpan finds a section's first table: the index of its header line
// and one past its last row; -1 when it has none.
func tableSpan(lines []string) (start, end int) {
	for i := 0; i+1 < len(lines); i++ {
		if strings.HasPrefix(lines[i], "|") && strings.HasPrefix(lines[i+1], "|---") {
			end = i + 2
			for end < len(lines) && strings.HasPrefix(lines[end], "|") {
				end++
			}
			return i, end
		}
	}
	return -1, -1
}

// rowKey is a table row's first n cells.
func rowKey(line string, n int) string {
	cells := strings.Split(strings.Trim(line, "|"), "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return strings.Join(cells[:min(n, len(cells))], "|")
}

// mergeTable puts the fresh table's rows into the old one: a row of the same
// key in its place, a new row after the row the fresh table has before it.
// A "total" row is summed again over the rows' times (the steps table).
// The text around the table is the fresh one's, as the code now writes it.
func mergeTable(old, fresh []string, keyCells int) []string {
	os, oe := tableSpan(old)
	ns, ne := tableSpan(fresh)
	if ns < 0 {
		return old
	}
	if os < 0 {
		return fresh
	}
	rows := append([]string(nil), old[os+2:oe]...)
	hadTotal := false
	if len(rows) > 0 && rowKey(rows[len(rows)-1], 1) == "total" {
		rows, hadTotal = rows[:len(rows)-1], true
	}
	at := -1
	for _, r := range fresh[ns+2 : ne] {
		k := rowKey(r, keyCells)
		if k == "total" {
			hadTotal = true
			continue
		}
		i := -1
		for j, or := range rows {
			if rowKey(or, keyCells) == k {
				i = j
				break
			}
		}
		if i >= 0 {
			rows[i], at = r, i
			continue
		}
		at++
		rows = append(rows[:at], append([]string{r}, rows[at:]...)...)
	}
	if hadTotal {
		rows = append(rows, fmt.Sprintf("| total | %s | |", sumTimes(rows).Round(100*time.Millisecond)))
	}
	out := append([]string(nil), fresh[:ns+2]...)
	out = append(out, rows...)
	return append(out, fresh[ne:]...)
}

// sumTimes adds up the second cells of the steps table.
func sumTimes(rows []string) time.Duration {
	var total time.Duration
	for _, r := range rows {
		cells := strings.Split(strings.Trim(r, "|"), "|")
		if len(cells) < 2 {
			continue
		}
		if d, err := time.ParseDuration(strings.TrimSpace(cells[1])); err == nil {
			total += d
		}
	}
	return total
}

// listItems cuts a list section into its items, each with the lines that
// continue it (a failure's code block).
func listItems(lines []string) [][]string {
	var items [][]string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "- "):
			items = append(items, []string{l})
		case len(items) > 0:
			items[len(items)-1] = append(items[len(items)-1], l)
		}
	}
	for i := range items {
		items[i] = trimBlank(items[i])
	}
	return items
}

// itemKey names a list item by what comes before its first colon: a
// note's subject, or a failure's step.
func itemKey(item []string) string {
	k, _, _ := strings.Cut(strings.TrimPrefix(item[0], "- "), ":")
	return k
}

var fromNumber = regexp.MustCompile(`[\s,]*[0-9].*$`)

// looseKey is what an item's key says before its first number, for a
// subject that holds its figure ("Idle RSS 39.2 MB" is "Idle RSS", as is
// "Idle RSS"); "" when the key starts with one, which matches nothing.
func looseKey(item []string) string { return fromNumber.ReplaceAllString(itemKey(item), "") }

// mergeList puts the fresh items in place of the old items of the same key
// and after them the new ones; an old failure of a step that now measured
// without error leaves.
func mergeList(old, fresh []string, ok map[string]bool) []string {
	items := listItems(old)
	kept := items[:0]
	for _, it := range items {
		if step := strings.Trim(itemKey(it), "*"); strings.HasPrefix(itemKey(it), "**") && ok[step] {
			continue
		}
		kept = append(kept, it)
	}
	items = kept
	// Each old item is replaced once at most: by the fresh item of its
	// key, else by one whose key differs from its in numbers alone ("run 1
	// of 3" finds its own run first).
	fr := listItems(fresh)
	at := make([]int, len(fr))
	used := map[int]bool{}
	for pass, key := range []func([]string) string{itemKey, looseKey} {
		for i, it := range fr {
			if pass > 0 && at[i] >= 0 {
				continue
			}
			at[i] = -1
			for j, o := range items {
				if !used[j] && key(o) != "" && key(o) == key(it) {
					at[i], used[j] = j, true
					break
				}
			}
		}
	}
	for i, it := range fr {
		if at[i] >= 0 {
			items[at[i]] = it
		} else {
			items = append(items, it)
		}
	}
	out := []string{""}
	for _, it := range items {
		out = append(out, it...)
	}
	return append(out, "")
}
