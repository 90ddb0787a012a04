package bpfresp

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/sniff"
	"github.com/vipctl/vip/test/wiretest"
)

// askerID is an asker of an address, as the tests compare them.
type askerID struct {
	addr netip.Addr
	mac  wire.MAC
	from netip.Addr
}

// TestAskersAsTheCaptureSees runs the whole corpus through the program on
// each hook, twice, and checks that it remembers, for every request it
// answered, the asker that vip's capture decodes from the same frame
// (sniff.Decode, Observation.Asker): the who-has table can count the
// requests from the program's map instead of the capture, and name the
// same askers. Frames it does not answer leave no asker; each asker's last
// answer is stamped with the wall clock.
func TestAskersAsTheCaptureSees(t *testing.T) {
	for _, hook := range []Hook{TCX, XDPGeneric} {
		t.Run(hook.String(), func(t *testing.T) {
			r := requireBPF(t, hook)
			before := time.Now()
			want := map[askerID]uint64{}
			for range 2 {
				for _, c := range wiretest.Corpus() {
					out, err := runProgram(t, r, c.Frame)
					if errors.Is(err, errNotRun) || out == nil {
						continue
					}
					o, err := sniff.Decode(c.Frame, time.Now())
					if err != nil {
						t.Fatalf("%s: the program answers a frame the capture cannot decode: %v", c.Name, err)
					}
					if !o.Kind.IsRequest() {
						t.Fatalf("%s: the program answers a %v", c.Name, o.Kind)
					}
					a := o.Asker()
					want[askerID{o.Target, wire.MAC(a.MAC), a.Addr}]++
				}
			}
			t.Logf("askers answered: %v", sorted(want))
			if len(want) < 3 {
				t.Fatalf("the corpus gave %d askers answered, want several: %v", len(want), want)
			}
			after := time.Now()
			got := map[askerID]uint64{}
			err := r.Askers(func(a announce.AskerCount) {
				got[askerID{a.Addr, a.MAC, a.From}] += a.Requests
				// The clocks are read a few microseconds apart: allow a
				// millisecond either side.
				if a.Last.Before(before.Add(-time.Millisecond)) || a.Last.After(after.Add(time.Millisecond)) {
					t.Errorf("%v asked by %v from %v: last answered at %v, want between %v and %v", a.Addr, a.MAC, a.From, a.Last, before, after)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, want) {
				t.Errorf("askers remembered:\n got %v\nwant %v", sorted(got), sorted(want))
			}

			// A dropped address's askers are forgotten: held again, it
			// reports none until it is asked again.
			if err := r.LetGo(wiretest.CorpusHeld4); err != nil {
				t.Fatal(err)
			}
			if err := r.Hold(wiretest.CorpusHeld4); err != nil {
				t.Fatal(err)
			}
			runOK(t, r, corpusFrame(t, "ARP who-has"))
			var again []announce.AskerCount
			err = r.Askers(func(a announce.AskerCount) {
				if a.Addr == wiretest.CorpusHeld4 {
					again = append(again, a)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(again) != 1 || again[0].Requests != 1 {
				t.Errorf("%v dropped, held again and asked once: askers %+v, want one with one request", wiretest.CorpusHeld4, again)
			}
		})
	}
}

func sorted(m map[askerID]uint64) []string {
	var out []string
	for k, n := range m {
		out = append(out, fmt.Sprintf("%v by %v from %v: %d", k.addr, wire.MAC(k.mac), k.from, n))
	}
	slices.Sort(out)
	return out
}

// TestAskersFloodOfNewOnes: a CPU starts remembering at most NEW_ASKERS
// new askers a second; the requests of the others count, exactly, in one
// entry of their address reported as Others, so that a flood of requests
// each from its own MAC does not make every answer an insertion in a full
// LRU map.
func TestAskersFloodOfNewOnes(t *testing.T) {
	const newAskers = 256 // NEW_ASKERS of responder.c
	r := requireBPF(t, TCX)
	// One CPU, so that one budget counts.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var one, saved unix.CPUSet
	if err := unix.SchedGetaffinity(0, &saved); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &saved)
	one.Set(0)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	const n = newAskers + 44
	for i := range n {
		asker := net.HardwareAddr{0x02, 0x00, 0x5e, 0x00, byte(i >> 8), byte(i)}
		f, err := wiretest.ARPFrame(wire.Broadcast, asker, arp.OperationRequest, asker, netip.MustParseAddr("192.0.2.3"), make(net.HardwareAddr, 6), wiretest.CorpusHeld4)
		if err != nil {
			t.Fatal(err)
		}
		if runOK(t, r, f) == nil {
			t.Fatalf("request %d not answered", i)
		}
	}
	var named, others, total uint64
	err := r.Askers(func(a announce.AskerCount) {
		total += a.Requests
		switch {
		case a.Others:
			others += a.Requests
			if a.MAC != (wire.MAC{}) || a.From.IsValid() {
				t.Errorf("the others' entry names %v from %v", a.MAC, a.From)
			}
		case a.Requests != 1:
			t.Errorf("%v asked once, counted %d", a.MAC, a.Requests)
		default:
			named++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if total != n || named != newAskers || others != n-newAskers {
		t.Errorf("%d requests from as many askers: %d counted, %d askers named and %d requests from others; want %d, %d and %d",
			n, total, named, others, n, newAskers, n-newAskers)
	}
	if got := r.Answered(wiretest.CorpusHeld4); got != n {
		t.Errorf("answered %d, want %d", got, n)
	}
}
