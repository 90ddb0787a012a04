package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// goBench is one line of `go test -bench` output.
type goBench struct {
	Pkg     string
	Name    string // without the -GOMAXPROCS suffix
	N       int64
	Metrics []metric // in the order printed: ns/op, B/op, allocs/op, custom ones
}

type metric struct {
	Value float64
	Unit  string
}

// Metric returns the value of the metric with unit, and whether the line
// has it.
func (g goBench) Metric(unit string) (float64, bool) {
	for _, m := range g.Metrics {
		if m.Unit == unit {
			return m.Value, true
		}
	}
	return 0, false
}

var (
	benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.+)$`)
	pkgLine   = regexp.MustCompile(`^pkg:\s+(\S+)`)
)

// parseGoBench reads `go test -bench` output. Lines that are not results
// (headers, PASS, ok, logs) are skipped.
func parseGoBench(out []byte) ([]goBench, error) {
	var res []goBench
	pkg := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := pkgLine.FindStringSubmatch(line); m != nil {
			pkg = m[1]
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("benchmark %s: count %q: %w", m[1], m[2], err)
		}
		fields := strings.Fields(m[3])
		if len(fields)%2 != 0 {
			return nil, fmt.Errorf("benchmark %s: metrics %q are not value-unit pairs", m[1], m[3])
		}
		b := goBench{Pkg: pkg, Name: m[1], N: n}
		for i := 0; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark %s: value %q: %w", m[1], fields[i], err)
			}
			b.Metrics = append(b.Metrics, metric{v, fields[i+1]})
		}
		res = append(res, b)
	}
	return res, sc.Err()
}

// runGoBench runs the benchmarks of pkgs with -benchmem and returns the
// results and the command line.
func runGoBench(ctx context.Context, goTool string, pkgs []string) ([]goBench, string, error) {
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "1"}, pkgs...)
	cmdline := goTool + " " + strings.Join(args, " ")
	cmd := exec.CommandContext(ctx, goTool, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, cmdline, fmt.Errorf("%s: %w\n%s", cmdline, err, tail(out, 40))
	}
	res, err := parseGoBench(out)
	if err != nil {
		return nil, cmdline, err
	}
	if len(res) == 0 {
		return nil, cmdline, fmt.Errorf("%s: no benchmark results in the output:\n%s", cmdline, tail(out, 40))
	}
	return res, cmdline, nil
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
