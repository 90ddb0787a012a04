package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/tools/loadgen"
)

// The 10,000 claims' gratuitous frames on the wire: a packet socket on the
// lab's client host keeps every ARP frame and neighbor solicitation or
// advertisement from b's MAC, with kernel receive timestamps, from before
// `vip claim -f` until every window it opened has closed. The same
// definitions as the in-process runs apply (sched.go), with the agent's
// rounds read off the wire.

// tenKStep names the lab step the recording runs in.
const tenKStep = "vip 10,000 claims"

// roundGap separates two rounds of one address on the wire: the frames of
// a round go out back to back, rounds are 1.1 s apart.
const roundGap = 100 * time.Millisecond

// wireVariant is the rows' variant for the wire, with cfg's defaults
// filled in (the agent runs with the scheduler's defaults).
func wireVariant(cfg announce.SchedulerConfig) *schedVariant {
	v4 := 0
	for _, a := range tenKAddrs() {
		if !strings.Contains(a, ":") {
			v4++
		}
	}
	n := len(tenKAddrs())
	return &schedVariant{
		name: fmt.Sprintf("gratuitous frames on the wire, %s claims through the agent in the lab (%s IPv4, %s IPv6; probes too)", fmtCount(n), fmtCount(v4), fmtCount(n-v4)),
		step: tenKStep, from: "the first frame", cfg: announce.NewScheduler(cfg, nil).Config(),
	}
}

// wireWait is how long after the claims were armed the recording goes on:
// until their windows have closed, and a late last round (up to an
// Interval after its window's end) has gone out.
func wireWait(cfg announce.SchedulerConfig) time.Duration {
	return cfg.Window + cfg.Interval + 500*time.Millisecond
}

// wireRecording is a recording in progress.
type wireRecording struct {
	rec     *loadgen.Recorder
	stopped bool
}

// startWire starts recording what b sends, as the client receives it.
func (b *bench) startWire() (*wireRecording, error) {
	rec, err := loadgen.Record(netnsPath(b.client), "eth0", b.b.Links[0].MAC)
	if err != nil {
		return nil, err
	}
	return &wireRecording{rec: rec}, nil
}

// abort stops a recording that finishWire did not.
func (w *wireRecording) abort() {
	if !w.stopped {
		w.rec.Stop()
	}
}

// finishWire waits until the windows of claims made before armedBy have
// closed, stops the recording and keeps what it shows.
func (b *bench) finishWire(ctx context.Context, w *wireRecording, armedBy time.Time, addrs []string) error {
	v := wireVariant(announce.SchedulerConfig{})
	select {
	case <-time.After(time.Until(armedBy.Add(wireWait(v.cfg)))):
	case <-ctx.Done():
		return ctx.Err()
	}
	heard, drops, err := w.rec.Stop()
	w.stopped = true
	if err != nil {
		return err
	}
	run, other, err := wireRun(heard, addrs, v.cfg)
	if err != nil {
		return err
	}
	st := run.stats()
	v.stats, v.busy = []*schedStats{st}, []float64{-1}
	if drops > 0 {
		v.invalid = fmt.Sprintf("the client's packet socket dropped %s frames", fmtCount(drops))
	}
	if other > 0 {
		b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("On the wire, %s frames from b were about none of the 10,000 addresses; they count in the pace.", fmtCount(other)))
	}
	b.wire = v
	b.logf("  on the wire: %s", st.summary())
	return nil
}

// wireRun reads the rounds of addrs off a recording: an address's frames
// less than roundGap apart are one round. Probes, and frames about other
// addresses, count in the pace only. The first frame on the wire stands
// for every key's Arm: the agent's arm times are not seen from outside.
func wireRun(heard []loadgen.Heard, addrs []string, cfg announce.SchedulerConfig) (run *schedRun, other int, err error) {
	index := make(map[netip.Addr]int32, len(addrs))
	for i, a := range addrs {
		p, err := netip.ParseAddr(a)
		if err != nil {
			return nil, 0, err
		}
		index[p] = int32(i)
	}
	run = &schedRun{cfg: cfg, arms: make([]time.Duration, len(addrs))}
	if len(heard) == 0 {
		return nil, 0, fmt.Errorf("no frame from b reached the client")
	}
	heard = slices.Clone(heard)
	slices.SortStableFunc(heard, func(x, y loadgen.Heard) int { return x.At.Compare(y.At) })
	base := heard[0].At
	last := make(map[int32]int, len(addrs)) // key → its latest round in run.sends
	for _, h := range heard {
		at := h.At.Sub(base)
		k, ok := index[h.Addr]
		if !ok {
			other++
		}
		if !ok || h.Probe {
			run.sends = append(run.sends, schedSend{frames: 1, at: at, probe: true})
			continue
		}
		if i, seen := last[k]; seen && at-run.sends[i].at < roundGap {
			run.sends[i].frames++
			continue
		}
		last[k] = len(run.sends)
		run.sends = append(run.sends, schedSend{key: k, frames: 1, at: at})
	}
	return run, other, nil
}
