package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/vipctl/vip/tools/loadgen"
)

// The floor: the same IPv4 load against the smallest userspace responder
// (loadgen.Floor) on b, before vip runs there, sleeping between frames and
// spinning. It tells apart what vip adds from what any responder in user
// space pays on this machine: the kernel answers inside the sender's own
// context, while a process that sleeps has to be woken for every frame that
// finds it idle.

// floorAddr is the address the floor responder answers for on b.
var floorAddr = netip.MustParseAddr("192.0.2.20")

// floorResponders are the floor's two variants, as the load table names
// them.
var floorResponders = []struct {
	name string
	spin bool
}{{"floor", false}, {"floor, spinning", true}}

// floorRun measures one variant of the floor at rate.
func (b *bench) floorRun(ctx context.Context, name string, spin bool, rate int) error {
	if b.lab == nil {
		return fmt.Errorf("%w: no lab: %v", errSkipped, b.labErr)
	}
	f, err := loadgen.StartFloor(loadgen.FloorConfig{Netns: netnsPath(b.b), Interface: "eth0", Addr: floorAddr, Spin: spin})
	if err != nil {
		return err
	}
	err = b.loadRun(ctx, name, v4, rate, floorAddr)
	if _, serr := f.Stop(); err == nil && serr != nil {
		err = fmt.Errorf("stop the floor responder: %w", serr)
	}
	return err
}

// floorStep names a floor step, for -run and the step list.
func floorStep(name string, rate int) string {
	return fmt.Sprintf("%s IPv4 %s/s", name, fmtCount(rate))
}

// floorRow is one line of the floor table: one quantile at one rate.
type floorRow struct {
	Scenario                     string
	Kernel, Floor, Spinning, Vip time.Duration
}

// floorRows gathers the floor table from the load runs.
func (b *bench) floorRows() []floorRow {
	get := func(responder string, rate int, q func(*loadgen.Result) time.Duration) time.Duration {
		lr := b.loads[loadKey(responder, v4, rate)]
		if lr == nil || lr.Res == nil || lr.Res.Answered == 0 {
			return 0
		}
		return q(lr.Res)
	}
	var out []floorRow
	for _, rate := range rates[:2] {
		for _, q := range []struct {
			name string
			get  func(*loadgen.Result) time.Duration
		}{{"median", (*loadgen.Result).Median}, {"p99", (*loadgen.Result).P99}} {
			r := floorRow{
				Scenario: fmt.Sprintf("IPv4 %s/s: %s reply latency", fmtCount(rate), q.name),
				Kernel:   get("kernel", rate, q.get),
				Floor:    get(floorResponders[0].name, rate, q.get),
				Spinning: get(floorResponders[1].name, rate, q.get),
				Vip:      get(vipResponders[1].name, rate, q.get),
			}
			if r.Floor > 0 || r.Spinning > 0 {
				out = append(out, r)
			}
		}
	}
	return out
}

// writeFloor renders the floor table.
func writeFloor(w io.Writer, rows []floorRow) {
	if len(rows) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("## The userspace floor\n\n")
	p("The same IPv4 load against `loadgen.Floor` on b, before vip runs there: one thread locked to itself reads an ARP packet socket and writes the reply, with nothing else around it, ")
	p("sleeping in read(2) between frames (*floor*) or polling the socket without ever sleeping, a whole core spent on it (*spinning*). ")
	p("The kernel answers inside the sender's own context; any responder in user space that sleeps is woken for every frame that finds it idle. ")
	p("*vip / floor* is what vip's own socket responder (`--responder socket`) adds to that; its eBPF responder answers in the kernel, as the kernel does.\n\n")
	p("| scenario | kernel | floor | spinning | vip, socket | floor / kernel | vip / floor |\n|---|---|---|---|---|---|---|\n")
	cell := func(d time.Duration) string {
		if d <= 0 {
			return "—"
		}
		return fmtDur(d)
	}
	for _, r := range rows {
		p("| %s | %s | %s | %s | %s | %s | %s |\n", r.Scenario, cell(r.Kernel), cell(r.Floor), cell(r.Spinning), cell(r.Vip),
			fmtRatio(float64(r.Floor), float64(r.Kernel)), fmtRatio(float64(r.Vip), float64(r.Floor)))
	}
	p("\n")
}
