package announce

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// TestProbesOfManyClaims claims more addresses at once than one hold of
// the lock arms probes for: each is probed once FirstProbeDelay after the
// claim and once per DefaultProbeEvery after that, and a released one no
// more.
func TestProbesOfManyClaims(t *testing.T) {
	h := newEngineHarness(t, nil)
	const n = probeBatch + 44
	var reqs []Request
	for i := range n {
		reqs = append(reqs, Request{netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), "eth0"})
	}
	// Two claims so that the batch spans claims made apart.
	if _, err := h.claim(t, reqs[:10]...); err != nil {
		t.Fatal(err)
	}
	if _, err := h.claim(t, reqs[10:]...); err != nil {
		t.Fatal(err)
	}
	p := h.ports["eth0"]
	// probed reports whether each address was probed want times, the
	// first released one once.
	probed := func(want int) func() bool {
		return func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			count := map[netip.Addr]int{}
			for _, a := range p.probed {
				count[a]++
			}
			for i, r := range reqs {
				want := want
				if i == 0 {
					want = 1 // released after its first probe
				}
				if count[r.Addr] != want {
					return false
				}
			}
			return len(count) == n
		}
	}
	h.fc.Advance(FirstProbeDelay - time.Nanosecond)
	if got := p.probes(); got != 0 {
		t.Fatalf("got %d probes before FirstProbeDelay, want none", got)
	}
	h.fc.Advance(time.Nanosecond)
	waitFor(t, probed(1), "every claim probed once after FirstProbeDelay")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := h.e.Release(ctx, []netip.Addr{reqs[0].Addr}); err != nil {
		t.Fatal(err)
	}
	h.fc.Advance(DefaultProbeEvery)
	waitFor(t, probed(2), "every claim but the released one probed again after DefaultProbeEvery")
	h.fc.Advance(DefaultProbeEvery)
	waitFor(t, probed(3), "every claim but the released one probed a third time")
}
