// Command vipbench measures vip against the Linux kernel on a lab segment
// and writes BENCHMARKS.md.
//
// It runs the Go benchmarks of the hot paths, builds vip, builds a lab of
// network namespaces (internal/lab: hosts a, b and client on a bridge,
// documentation prefixes only), and runs the same load from the client
// (tools/loadgen) against the kernel on a and against a vip agent on b:
// reply latency at 1,000, 20,000 and 100,000 requests/s, loss at 100,000/s, for IPv4
// and IPv6; then vip's CPU under a flood for addresses it does not hold, its
// CPU and memory idle and with 10,000 claims, and how soon a claim reaches
// the wire, next to arping. The agent answers with its eBPF responder on
// tcx, then, one agent after another, with its sockets and with the
// program on XDP generic; the kernel's runs and vip's are repeated with a
// core busy. Before the lab, in a lab of its own, the fleet
// step simulates 1,000 agents guarded by one real etcd (100 with -short):
// claim and move latency, etcd's traffic at rest, memory per agent. After
// the build, the failover step kills an owner again and again in a lab of
// its own, keepalived's VRRP master and vip's agent in turn, and times the
// standby's first answer on the client's wire (issue 32). It needs root.
//
// A run of some steps (-run) splices what it measured into the -out file
// as it is (splice.go): its rows, sections, notes and step times replace
// theirs, the rest stays, and the file's run log, at its end, names the
// run, its commit and its steps. So a single step can be re-measured.
// Whole or spliced, the file then opens with the table of its headline
// figures, read from its own sections (headline.go).
//
// Every scenario is bounded in time. One that cannot run is reported as
// failed, in the output and in BENCHMARKS.md, and the driver goes on with
// the others and exits 1 at the end; the lab is removed in every case.
//
//	sudo go run ./tools/vipbench                 # about 25 minutes
//	sudo go run ./tools/vipbench -short          # about 3 minutes
//	sudo go run ./tools/vipbench -run '^fleet$'  # the fleet step alone
//	sudo go run ./tools/vipbench -run '^failover$' -gobench=false  # beside keepalived
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/vipctl/vip/internal/fleet"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// options are the command line.
type options struct {
	short   bool
	out     string
	vip     string
	goBench bool
	pkgs    string
	only    *regexp.Regexp
	timeout time.Duration
	goTool  string
	// agentFlags are added to the agent's command line (profiling).
	agentFlags []string
	// fleetAgents and fleetMoves, when set, size the fleet step.
	fleetAgents, fleetMoves int
	// fleetTTL, when set, is the fleet's lease TTL instead of the
	// default.
	fleetTTL      time.Duration
	fleetFailsafe bool
	fleetProfile  string
	etcd          string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("vipbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.short, "short", false, "shorter load runs, 5 s of idle instead of 60 s, 100 agents in the fleet: about 3 minutes in all")
	fs.StringVar(&o.out, "out", "BENCHMARKS.md", "where to write the report (- for standard output)")
	fs.StringVar(&o.vip, "vip", "", "the vip binary to measure (default: build ./cmd/vip)")
	fs.BoolVar(&o.goBench, "gobench", true, "run the Go benchmarks of the hot paths first")
	fs.StringVar(&o.pkgs, "gobench-pkgs", "./announce ./sniff", "packages whose Go benchmarks to run")
	only := fs.String("run", "", "run only the lab scenarios whose name matches this regular expression, and splice what they measure into -out")
	fs.DurationVar(&o.timeout, "timeout", 0, "give up after this long (default: 75m, 15m with -short)")
	fs.StringVar(&o.etcd, "etcd", "", "the etcd binary the fleet and failover steps run (default: built from go.mod's go.etcd.io/etcd/server/v3; give Debian's, /usr/bin/etcd, to measure that)")
	fs.StringVar(&o.goTool, "go", "go", "the go command, to build vip and run the Go benchmarks")
	fs.IntVar(&o.fleetAgents, "fleet-agents", 0, "agents in the fleet step, each holding 100 claims (default: 1,000, 100 with -short)")
	fs.IntVar(&o.fleetMoves, "fleet-moves", 0, "moves in the fleet step, one after another (default: 200, 100 with -short)")
	fs.BoolVar(&o.fleetFailsafe, "fleet-failsafe", false, "run the fleet step's agents with the failsafe, as vip agent runs by default")
	fs.StringVar(&o.fleetProfile, "fleet-profile", "", "write the fleet step's agents' CPU profile (join to rest) and heap profile to this directory")
	fs.DurationVar(&o.fleetTTL, "fleet-ttl", 0, "the fleet step's lease TTL (default: the agent's, fleet.DefaultTTL); the section and the headline say when it is not the default")
	agentFlags := fs.String("agent-flags", "", "extra flags for the measured agent, separated by spaces, e.g. \"--cpuprofile /tmp/agent.prof\"")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vipbench [-short] [-out BENCHMARKS.md] [-run REGEXP] [-vip PATH]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.agentFlags = strings.Fields(*agentFlags)
	if o.fleetTTL != 0 {
		if err := fleet.CheckTTL(o.fleetTTL); err != nil {
			return nil, fmt.Errorf("-fleet-ttl: %w", err)
		}
	}
	if o.fleetAgents != 0 && o.fleetAgents < 2 {
		return nil, fmt.Errorf("-fleet-agents %d: a move needs two agents or more", o.fleetAgents)
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return nil, fmt.Errorf("-run: %w", err)
		}
		o.only = re
	}
	if o.timeout == 0 {
		// The fleet step takes about 20 minutes, 2 with -short, and
		// is allowed more than twice that.
		o.timeout = 75 * time.Minute
		if o.short {
			o.timeout = 15 * time.Minute
		}
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "vipbench:", err)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "vipbench: it builds network namespaces and opens packet sockets: run it as root (make bench does, through sudo when not root)")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	b := newBench(o, stderr)
	rep := b.run(ctx)
	rep.Command = commandLine(args)

	if err := writeReport(o, rep, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "vipbench: write the report:", err)
		return 1
	}
	code := 0
	for _, s := range rep.Steps {
		if s.Err != nil {
			fmt.Fprintf(stderr, "vipbench: %s failed: %v\n", s.Name, s.Err)
			code = 1
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "vipbench: stopped early:", context.Cause(ctx))
		code = 1
	}
	return code
}

// writeReport writes the report to -out: the whole file after a run of
// every step, spliced into the file as it is after a run of some (-run).
func writeReport(o *options, rep *report, stdout, stderr io.Writer) error {
	var buf bytes.Buffer
	if err := rep.write(&buf); err != nil {
		return err
	}
	out := buf.String()
	how := "wrote"
	if o.only != nil && o.out != "-" {
		old, err := os.ReadFile(o.out)
		switch {
		case err == nil:
			out, how = splice(string(old), out, rep.provenance()), "spliced this run's rows and sections into"
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("read %s to splice this run into it: %w", o.out, err)
		}
	}
	out = withHeadline(out)
	if o.out == "-" {
		_, err := io.WriteString(stdout, out)
		return err
	}
	if err := os.WriteFile(o.out, []byte(out), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "vipbench: %s %s\n", how, o.out)
	return nil
}

// commandLine is how the report names the run.
func commandLine(args []string) string {
	if len(args) == 0 {
		return "vipbench"
	}
	return "vipbench " + strings.Join(args, " ")
}
