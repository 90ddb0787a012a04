package bpfresp

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/internal/wiretest"
	"github.com/vipctl/vip/sniff"
)

var _ announce.AskerRecorder = (*Responder)(nil)

// askerID is an asker of an address, as the tests compare them.
type askerID struct {
	addr netip.Addr
	mac  wire.MAC
	from netip.Addr
}

// TestAskersAsTheCaptureSees runs the whole corpus through the program on
// each hook, twice, and checks that it remembers, for every request it
// answered, the asker that vip's capture decodes from the same frame
// (sniff.Decode, Observation.Asker): the traffic table can count the
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
			if err := r.Drop(wiretest.CorpusHeld4); err != nil {
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
		out = append(out, fmt.Sprintf("%v by %v from %v: %d", k.addr, sniff.MAC(k.mac), k.from, n))
	}
	slices.Sort(out)
	return out
}
