package sniff_test

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/sniff"
)

// at returns ts0 plus d, for observations on an explicit timeline.
func at(d time.Duration) time.Time { return ts0.Add(d) }

func newTable(t testing.TB, cfg sniff.TableConfig) *sniff.Table {
	t.Helper()
	tab, err := sniff.NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// ask is a request for target from asker, at time d after ts0.
func ask(d time.Duration, k sniff.Kind, target netip.Addr, asker wire.MAC, from netip.Addr) sniff.Observation {
	return sniff.Observation{Time: at(d), Kind: k, EthSrc: asker, Sender: from, SenderMAC: asker, Target: target}
}

// answer is an ARP answer or announcement for addr by m, at d after ts0.
func answer(d time.Duration, k sniff.Kind, addr netip.Addr, m wire.MAC) sniff.Observation {
	return sniff.Observation{Time: at(d), Kind: k, EthSrc: m, Sender: addr, SenderMAC: m, Target: addr}
}

func TestTableCounts(t *testing.T) {
	clock := clockwork.NewFakeClockAt(at(4 * time.Second))
	tab := newTable(t, sniff.TableConfig{Clock: clock, RateWindow: 10 * time.Second})
	for i := range 5 {
		tab.Observe(ask(time.Duration(i)*time.Second, sniff.KindWhoHas, vip4, clientMAC, client4))
	}
	tab.Observe(ask(4500*time.Millisecond, sniff.KindProbe, vip4, otherMAC, zero4))
	tab.Observe(answer(1*time.Second, sniff.KindReply, vip4, ourMAC))
	tab.Observe(answer(2*time.Second, sniff.KindReply, vip4, ourMAC))
	tab.Observe(answer(3*time.Second, sniff.KindGratuitousReply, vip4, rogueMAC))
	// Neither a request nor an answer: not counted.
	tab.Observe(sniff.Observation{Time: at(time.Second), Kind: sniff.KindUnknown, Target: vip4})

	got, ok := tab.Get(vip4)
	if !ok {
		t.Fatalf("Get(%v): no entry", vip4)
	}
	want := sniff.Entry{
		Addr:      vip4,
		Requests:  6,
		Rate:      0.6,
		LastAsker: sniff.Asker{MAC: otherMAC, Addr: zero4},
		Askers: []sniff.AskerCount{
			{Asker: sniff.Asker{MAC: otherMAC, Addr: zero4}, Requests: 1, LastSeen: at(4500 * time.Millisecond)},
			{Asker: sniff.Asker{MAC: clientMAC, Addr: client4}, Requests: 5, LastSeen: at(4 * time.Second)},
		},
		Answerers: []sniff.Answerer{
			{MAC: rogueMAC, Kind: sniff.KindGratuitousReply, Answers: 1, LastSeen: at(3 * time.Second)},
			{MAC: ourMAC, Kind: sniff.KindReply, Answers: 2, LastSeen: at(2 * time.Second)},
		},
		FirstSeen: ts0,
		LastSeen:  at(4500 * time.Millisecond),
	}
	if !entriesEqual(got, want) {
		t.Errorf("Get(%v):\n got %+v\nwant %+v", vip4, got, want)
	}
	// Who answered is kept under the address they answered for, not the
	// asker's: the asker's address has no entry.
	if e, ok := tab.Get(client4); ok {
		t.Errorf("Get(%v): got %+v, want no entry", client4, e)
	}
	if st := tab.Stats(); st != (sniff.TableStats{Entries: 1}) {
		t.Errorf("Stats: got %+v, want 1 entry, none evicted", st)
	}
}

func entriesEqual(a, b sniff.Entry) bool {
	return a.Addr == b.Addr && a.Requests == b.Requests && a.Rate == b.Rate && a.LastAsker == b.LastAsker &&
		slices.EqualFunc(a.Askers, b.Askers, func(x, y sniff.AskerCount) bool {
			return x.Asker == y.Asker && x.Requests == y.Requests && x.LastSeen.Equal(y.LastSeen)
		}) &&
		a.MoreAskers == b.MoreAskers &&
		slices.EqualFunc(a.Answerers, b.Answerers, func(x, y sniff.Answerer) bool {
			return x.MAC == y.MAC && x.Kind == y.Kind && x.Answers == y.Answers && x.LastSeen.Equal(y.LastSeen)
		}) &&
		a.MoreAnswerers == b.MoreAnswerers && a.FirstSeen.Equal(b.FirstSeen) && a.LastSeen.Equal(b.LastSeen)
}

// TestTableRate checks the rate against the clock: requests count while
// their second is within the window that ends at the clock's second.
func TestTableRate(t *testing.T) {
	clock := clockwork.NewFakeClockAt(at(-time.Second))
	tab := newTable(t, sniff.TableConfig{Clock: clock, RateWindow: 4 * time.Second})
	// 10 requests in second 0, 2 in second 1, 4 in second 3.
	for i := range 10 {
		tab.Observe(ask(time.Duration(i)*50*time.Millisecond, sniff.KindSolicitation, vip6, clientMAC, client6))
	}
	tab.Observe(ask(1100*time.Millisecond, sniff.KindUnreachability, vip6, clientMAC, client6))
	tab.Observe(ask(1900*time.Millisecond, sniff.KindDAD, vip6, otherMAC, zero6))
	for range 4 {
		tab.Observe(ask(3*time.Second, sniff.KindSolicitation, vip6, clientMAC, client6))
	}
	tests := []struct {
		now  time.Duration // clock time after ts0, in increasing order
		want float64       // requests per second over 4 s
	}{
		{-time.Second, 0}, // the clock behind the frames: none counted yet
		{0, 10.0 / 4},
		{1500 * time.Millisecond, 12.0 / 4},
		{3 * time.Second, 16.0 / 4},
		{3999 * time.Millisecond, 16.0 / 4},
		{4 * time.Second, 6.0 / 4}, // second 0 left the window
		{5 * time.Second, 4.0 / 4}, // and second 1
		{7 * time.Second, 0},       // and second 3
		{100 * time.Second, 0},
	}
	for _, tt := range tests {
		clock.Advance(at(tt.now).Sub(clock.Now()))
		e, ok := tab.Get(vip6)
		if !ok {
			t.Fatalf("Get(%v): no entry", vip6)
		}
		if e.Rate != tt.want {
			t.Errorf("rate at %v: got %v, want %v", tt.now, e.Rate, tt.want)
		}
		if e.Requests != 16 {
			t.Errorf("requests at %v: got %d, want 16", tt.now, e.Requests)
		}
	}
}

func TestTableBoundsAskersAndAnswerers(t *testing.T) {
	tab := newTable(t, sniff.TableConfig{MaxAskers: 3, MaxAnswerers: 2, Clock: clockwork.NewFakeClockAt(ts0)})
	for i := range 10 {
		m := wire.MAC{0x00, 0x00, 0x5e, 0x00, 0x53, byte(0x10 + i)}
		tab.Observe(ask(time.Duration(i)*time.Second, sniff.KindWhoHas, vip4, m, client4))
		tab.Observe(answer(time.Duration(i)*time.Second, sniff.KindReply, vip4, m))
	}
	e, _ := tab.Get(vip4)
	var askers, answerers []byte
	for _, a := range e.Askers {
		askers = append(askers, a.MAC[5])
	}
	for _, a := range e.Answerers {
		answerers = append(answerers, a.MAC[5])
	}
	if want := []byte{0x19, 0x18, 0x17}; !slices.Equal(askers, want) || !e.MoreAskers {
		t.Errorf("askers: got %x (more %v), want the 3 latest %x and more", askers, e.MoreAskers, want)
	}
	if want := []byte{0x19, 0x18}; !slices.Equal(answerers, want) || !e.MoreAnswerers {
		t.Errorf("answerers: got %x (more %v), want the 2 latest %x and more", answerers, e.MoreAnswerers, want)
	}
	if e.Requests != 10 || e.LastAsker.MAC[5] != 0x19 {
		t.Errorf("got %d requests, last asker %v; want 10, ...:19", e.Requests, e.LastAsker.MAC)
	}
}

func TestTableSnapshotOrder(t *testing.T) {
	clock := clockwork.NewFakeClockAt(at(10 * time.Second))
	tab := newTable(t, sniff.TableConfig{Clock: clock, RateWindow: 5 * time.Second})
	a := netip.MustParseAddr("192.0.2.1")
	b := netip.MustParseAddr("192.0.2.2")
	c := netip.MustParseAddr("2001:db8::1")
	d := netip.MustParseAddr("2001:db8::2")
	// a: many requests long ago; b: a few recent ones; c: seen last, by
	// an answer only; d: as many recent requests as b.
	for range 20 {
		tab.Observe(ask(0, sniff.KindWhoHas, a, clientMAC, client4))
	}
	for range 3 {
		tab.Observe(ask(9*time.Second, sniff.KindWhoHas, b, clientMAC, client4))
	}
	for range 3 {
		tab.Observe(ask(8*time.Second, sniff.KindSolicitation, d, clientMAC, client6))
	}
	tab.Observe(sniff.Observation{Time: at(10 * time.Second), Kind: sniff.KindAdvertisement, EthSrc: ourMAC, Target: c, Sender: c, Dst: allNodes})
	tests := []struct {
		order sniff.Order
		want  []netip.Addr
	}{
		{sniff.ByRate, []netip.Addr{b, d, a, c}},
		{sniff.ByRequests, []netip.Addr{a, b, d, c}},
		{sniff.ByLastSeen, []netip.Addr{c, b, d, a}},
		{sniff.ByAddr, []netip.Addr{a, b, c, d}},
	}
	for _, tt := range tests {
		var got []netip.Addr
		for _, e := range tab.Snapshot(tt.order) {
			got = append(got, e.Addr)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Snapshot(%v): got %v, want %v", tt.order, got, tt.want)
		}
		name := tt.order.String()
		if o, err := sniff.ParseOrder(name); err != nil || o != tt.order {
			t.Errorf("ParseOrder(%q): got %v, %v; want %v", name, o, err, tt.order)
		}
	}
	if _, err := sniff.ParseOrder("size"); err == nil {
		t.Error("ParseOrder(\"size\"): got no error")
	}
	// A snapshot is a copy: changing it changes nothing in the table.
	snap := tab.Snapshot(sniff.ByAddr)
	snap[0].Askers[0].Requests = 1000
	if e, _ := tab.Get(a); e.Askers[0].Requests != 20 {
		t.Errorf("after changing a snapshot: got %d requests from the asker, want 20", e.Askers[0].Requests)
	}
}

func TestNewTableRefuses(t *testing.T) {
	for _, cfg := range []sniff.TableConfig{
		{MaxEntries: -1},
		{MaxAskers: -1},
		{RateWindow: 1500 * time.Millisecond},
		{RateWindow: 61 * time.Second},
		{RateWindow: -time.Second},
	} {
		if _, err := sniff.NewTable(cfg); err == nil {
			t.Errorf("NewTable(%+v): got no error", cfg)
		}
	}
}

// TestTableFlood feeds a million requests for distinct targets from random
// askers: the table never holds more than its cap, counts every eviction,
// and its heap stays flat once full.
func TestTableFlood(t *testing.T) {
	const maxEntries = 1024
	const n = 1_000_000
	tab := newTable(t, sniff.TableConfig{MaxEntries: maxEntries, Clock: clockwork.NewFakeClockAt(ts0)})
	rng := rand.New(rand.NewPCG(1, 2))
	flood := func(from, to int) {
		for i := from; i < to; i++ {
			var asker wire.MAC
			for j := range asker {
				asker[j] = byte(rng.Uint32())
			}
			// Distinct targets in 2001:db8::/32, and a few IPv4 ones.
			var target netip.Addr
			if i%8 == 0 {
				target = netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
			} else {
				b := netip.MustParseAddr("2001:db8::").As16()
				b[8], b[9], b[10], b[11] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
				target = netip.AddrFrom16(b)
			}
			tab.Observe(ask(time.Duration(i)*time.Microsecond, sniff.KindWhoHas, target, asker, client4))
			if i%4096 == 0 {
				if st := tab.Stats(); st.Entries > maxEntries {
					t.Fatalf("after %d requests: %d entries, want at most %d", i+1, st.Entries, maxEntries)
				}
			}
		}
	}
	flood(0, n/2)
	heapHalf := heapInUse()
	flood(n/2, n)
	heapEnd := heapInUse()

	st := tab.Stats()
	// Every eighth request is for one of 32 IPv4 targets, each asked for
	// again every 256 requests, so they stay; every other target is new.
	distinct := n - n/8 + 32
	if st.Entries != maxEntries || st.Evicted != uint64(distinct-maxEntries) {
		t.Errorf("Stats: got %+v, want %d entries and %d evicted", st, maxEntries, distinct-maxEntries)
	}
	if heapEnd > heapHalf+heapHalf/4+1<<20 {
		t.Errorf("heap grew from %d to %d bytes over the second half of the flood, want it flat", heapHalf, heapEnd)
	}
	if got := len(tab.Snapshot(sniff.ByRate)); got != maxEntries {
		t.Errorf("snapshot: got %d entries, want %d", got, maxEntries)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestTableObserveAllocates checks that a full table recycles entries
// instead of allocating.
func TestTableObserveAllocates(t *testing.T) {
	tab := newTable(t, sniff.TableConfig{MaxEntries: 64, Clock: clockwork.NewFakeClockAt(ts0)})
	i := 0
	next := func() {
		target := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		tab.Observe(ask(time.Duration(i)*time.Millisecond, sniff.KindWhoHas, target, wire.MAC{0, 0, 0x5e, 0, 0x53, byte(i)}, client4))
		i++
	}
	for range 1000 {
		next()
	}
	if allocs := testing.AllocsPerRun(10000, next); allocs > 0.01 {
		t.Errorf("Observe on a full table: got %v allocations per request, want none", allocs)
	}
}

func BenchmarkTableObserve(b *testing.B) {
	tab := newTable(b, sniff.TableConfig{Clock: clockwork.NewFakeClockAt(ts0)})
	targets := make([]netip.Addr, 8192)
	for i := range targets {
		targets[i] = netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tab.Observe(ask(time.Duration(i)*time.Microsecond, sniff.KindWhoHas, targets[i%len(targets)], clientMAC, client4))
	}
}

// TestTableObserveRequests: counts reported in bulk (an in-kernel
// responder's askers) add to what the capture saw, per asker, in the rate
// of the second of their latest request; the latest asker is the one with
// the latest request, whatever the order of the reports.
func TestTableObserveRequests(t *testing.T) {
	clock := clockwork.NewFakeClockAt(at(5 * time.Second))
	tab := newTable(t, sniff.TableConfig{Clock: clock, RateWindow: 10 * time.Second})
	tab.Observe(ask(0, sniff.KindWhoHas, vip4, clientMAC, client4))
	tab.ObserveRequests(vip4, sniff.Asker{MAC: otherMAC, Addr: zero4}, 5, at(3*time.Second))
	tab.ObserveRequests(vip4, sniff.Asker{MAC: clientMAC, Addr: client4}, 2, at(2*time.Second))
	tab.ObserveRequests(vip4, sniff.Asker{MAC: clientMAC, Addr: client4}, 0, at(4*time.Second)) // nothing new
	got, ok := tab.Get(vip4)
	if !ok {
		t.Fatalf("Get(%v): no entry", vip4)
	}
	if got.Requests != 8 || got.Rate != 0.8 {
		t.Errorf("requests %d at %v/s, want 8 at 0.8/s", got.Requests, got.Rate)
	}
	if want := (sniff.Asker{MAC: otherMAC, Addr: zero4}); got.LastAsker != want {
		t.Errorf("last asker %+v, want %+v (its request, at 3s, is the latest)", got.LastAsker, want)
	}
	want := []sniff.AskerCount{
		{Asker: sniff.Asker{MAC: otherMAC, Addr: zero4}, Requests: 5, LastSeen: at(3 * time.Second)},
		{Asker: sniff.Asker{MAC: clientMAC, Addr: client4}, Requests: 3, LastSeen: at(2 * time.Second)},
	}
	if !slices.Equal(got.Askers, want) {
		t.Errorf("askers %+v, want %+v", got.Askers, want)
	}
	if !got.LastSeen.Equal(at(3 * time.Second)) {
		t.Errorf("last seen %v, want %v", got.LastSeen, at(3*time.Second))
	}
	// Beyond the window, the rate falls to nothing and the totals stay.
	clock.Advance(20 * time.Second)
	if got, _ := tab.Get(vip4); got.Rate != 0 || got.Requests != 8 {
		t.Errorf("20s later: %d requests at %v/s, want 8 at 0/s", got.Requests, got.Rate)
	}
}

// TestTableObserveUnnamedRequests: requests reported without an asker (a
// responder's count of the askers it did not remember) count and rate
// like any, name no asker, and mark the entry as having more askers than
// it names.
func TestTableObserveUnnamedRequests(t *testing.T) {
	clock := clockwork.NewFakeClockAt(at(5 * time.Second))
	tab := newTable(t, sniff.TableConfig{Clock: clock, RateWindow: 10 * time.Second})
	tab.ObserveRequests(vip4, sniff.Asker{MAC: clientMAC, Addr: client4}, 1, at(time.Second))
	tab.ObserveRequests(vip4, sniff.Asker{}, 9, at(2*time.Second))
	got, _ := tab.Get(vip4)
	if got.Requests != 10 || got.Rate != 1 || !got.MoreAskers || len(got.Askers) != 1 || got.LastAsker.MAC != clientMAC {
		t.Errorf("got %d requests at %v/s, more askers %v, askers %+v, last %+v; want 10 at 1/s, more askers, the client alone named",
			got.Requests, got.Rate, got.MoreAskers, got.Askers, got.LastAsker)
	}
}

// TestTableLastAskerIsTheLatest: the latest asker is the one whose request
// came last by its capture time, not by the order the table was told.
func TestTableLastAskerIsTheLatest(t *testing.T) {
	tab := newTable(t, sniff.TableConfig{Clock: clockwork.NewFakeClockAt(at(5 * time.Second))})
	tab.Observe(ask(2*time.Second, sniff.KindWhoHas, vip4, clientMAC, client4))
	tab.Observe(ask(time.Second, sniff.KindProbe, vip4, otherMAC, zero4)) // read late
	got, _ := tab.Get(vip4)
	if want := (sniff.Asker{MAC: clientMAC, Addr: client4}); got.LastAsker != want || got.Requests != 2 {
		t.Errorf("last asker %+v of %d requests, want %+v (its request, at 2s, is the latest) of 2", got.LastAsker, got.Requests, want)
	}
}
