package sniff

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/internal/wire"
)

// Defaults of TableConfig.
const (
	DefaultMaxEntries   = 4096
	DefaultMaxAskers    = 8
	DefaultMaxAnswerers = 4
	DefaultRateWindow   = 10 * time.Second
)

// maxRateWindow bounds the rate window: it costs one counter per second per
// entry.
const maxRateWindow = 60 * time.Second

// TableConfig configures a Table. The zero value gives the defaults.
type TableConfig struct {
	// MaxEntries caps how many addresses the table tracks. When it is full,
	// a new address evicts the least recently seen one, and Stats counts
	// the eviction. Zero means DefaultMaxEntries.
	MaxEntries int
	// MaxAskers caps the distinct askers kept per address; beyond it the
	// least recently seen asker makes room. Zero means DefaultMaxAskers.
	MaxAskers int
	// MaxAnswerers caps the distinct MACs kept per address as answering
	// for it; beyond it the least recently seen one makes room. Zero means
	// DefaultMaxAnswerers.
	MaxAnswerers int
	// RateWindow is the span, in whole seconds from one to sixty, over
	// which Entry.Rate averages requests. Zero means DefaultRateWindow.
	RateWindow time.Duration
	// Clock says what time it is when a snapshot computes rates; the
	// observations' own timestamps place the requests. Nil means the
	// real clock.
	Clock clockwork.Clock
}

// Table counts neighbour traffic per target address: the requests for it,
// their recent rate, who asked, and which MACs answered. Its memory is
// bounded by TableConfig however many addresses and askers appear. A Table
// is an Observer, and is safe for concurrent use.
type Table struct {
	mu           sync.Mutex
	entries      *lru[netip.Addr, entry]
	window       int64 // RateWindow in seconds
	maxAskers    int
	maxAnswerers int
	clock        clockwork.Clock
}

// entry is what a Table keeps per address. Its slices survive eviction, so
// that a reused entry allocates nothing.
type entry struct {
	requests      uint64
	first, last   time.Time
	buckets       []bucket
	lastAsker     Asker
	lastAskerAt   time.Time
	askers        []AskerCount
	moreAskers    bool
	answerers     []Answerer
	moreAnswerers bool
}

// bucket counts the requests of one second, sec in Unix time.
type bucket struct {
	sec int64
	n   uint64
}

// Entry is a copy of what a Table knows about one address.
type Entry struct {
	// Addr is the address asked for or answered for.
	Addr netip.Addr `json:"addr"`
	// Requests counts the requests for Addr (ARP who-has and probes,
	// neighbor solicitations of every kind) since the table started
	// tracking it.
	Requests uint64 `json:"requests"`
	// Rate is the number of requests per second over the table's rate
	// window, ending at the time of the snapshot.
	Rate float64 `json:"rate"`
	// LastAsker is who sent the latest request; zero before any request.
	LastAsker Asker `json:"last_asker"`
	// Askers are the distinct askers kept, most recently seen first.
	Askers []AskerCount `json:"askers"`
	// MoreAskers reports that more distinct askers were seen than Askers
	// holds.
	MoreAskers bool `json:"more_askers,omitempty"`
	// Answerers are the MACs that answered or announced for Addr (ARP
	// replies, gratuitous ARP of either form, neighbor advertisements),
	// most recently seen first.
	Answerers []Answerer `json:"answerers"`
	// MoreAnswerers reports that more distinct MACs answered than
	// Answerers holds.
	MoreAnswerers bool `json:"more_answerers,omitempty"`
	// FirstSeen and LastSeen are the capture times of the first and the
	// latest frame about Addr.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}

// AskerCount is one asker of an address and how often it asked.
type AskerCount struct {
	Asker
	Requests uint64    `json:"requests"`
	LastSeen time.Time `json:"last_seen"`
}

// Answerer is one MAC that answered for an address.
type Answerer struct {
	MAC wire.MAC `json:"mac"`
	// Kind is the kind of its latest answer.
	Kind     Kind      `json:"kind"`
	Answers  uint64    `json:"answers"`
	LastSeen time.Time `json:"last_seen"`
}

// TableStats says how full a Table is and how much it forgot.
type TableStats struct {
	// Entries is the number of addresses tracked.
	Entries int `json:"entries"`
	// Evicted counts addresses forgotten to make room for new ones.
	Evicted uint64 `json:"evicted"`
}

// NewTable returns an empty Table. It fails on a negative cap or a rate
// window outside one to sixty whole seconds.
func NewTable(cfg TableConfig) (*Table, error) {
	if cfg.MaxEntries < 0 || cfg.MaxAskers < 0 || cfg.MaxAnswerers < 0 {
		return nil, fmt.Errorf("table caps must not be negative: entries %d, askers %d, answerers %d", cfg.MaxEntries, cfg.MaxAskers, cfg.MaxAnswerers)
	}
	if cfg.RateWindow == 0 {
		cfg.RateWindow = DefaultRateWindow
	}
	if cfg.RateWindow < time.Second || cfg.RateWindow > maxRateWindow || cfg.RateWindow%time.Second != 0 {
		return nil, fmt.Errorf("rate window %v: want whole seconds from 1s to %v", cfg.RateWindow, maxRateWindow)
	}
	t := &Table{
		entries:      newLRU[netip.Addr, entry](orDefault(cfg.MaxEntries, DefaultMaxEntries)),
		window:       int64(cfg.RateWindow / time.Second),
		maxAskers:    orDefault(cfg.MaxAskers, DefaultMaxAskers),
		maxAnswerers: orDefault(cfg.MaxAnswerers, DefaultMaxAnswerers),
		clock:        cfg.Clock,
	}
	if t.clock == nil {
		t.clock = clockwork.NewRealClock()
	}
	return t, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Observe counts o: a request for its target address, or an answer for the
// address it claims. Other observations are ignored.
func (t *Table) Observe(o Observation) {
	switch {
	case o.Kind.IsRequest():
		t.mu.Lock()
		e := t.touch(o.Target, o.Time)
		e.requests++
		t.countSecond(e, o.Time.Unix(), 1)
		a := o.Asker()
		if !o.Time.Before(e.lastAskerAt) {
			e.lastAsker, e.lastAskerAt = a, o.Time
		}
		e.addAsker(a, 1, o.Time, t.maxAskers)
		t.mu.Unlock()
	case o.Kind.IsAnswer():
		addr, mac, _ := o.Claim()
		t.mu.Lock()
		e := t.touch(addr, o.Time)
		e.addAnswerer(mac, o.Kind, o.Time, t.maxAnswerers)
		t.mu.Unlock()
	}
}

// ObserveRequests counts n requests for addr from one asker, the latest of
// them at ts, as an in-kernel responder that answered them reports them
// (announce.AskerCount) where the capture did not see them: the rate
// counts all n in ts's second, so a caller reports every second or so.
// A zero asker is requests from askers the responder did not name: they
// count, and the entry says that more askers were seen than it names.
func (t *Table) ObserveRequests(addr netip.Addr, a Asker, n uint64, ts time.Time) {
	if n == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.touch(addr, ts)
	e.requests += n
	t.countSecond(e, ts.Unix(), n)
	if a == (Asker{}) {
		e.moreAskers = true
		return
	}
	if !ts.Before(e.lastAskerAt) {
		e.lastAsker, e.lastAskerAt = a, ts
	}
	e.addAsker(a, n, ts, t.maxAskers)
}

// touch returns the entry of addr, made (or recycled) if need be, marked as
// seen at ts.
func (t *Table) touch(addr netip.Addr, ts time.Time) *entry {
	e, ok := t.entries.get(addr)
	if !ok {
		e = t.entries.add(addr)
		e.reset(ts)
	}
	if ts.After(e.last) {
		e.last = ts
	}
	return e
}

func (e *entry) reset(ts time.Time) {
	*e = entry{
		first:     ts,
		last:      ts,
		buckets:   e.buckets[:0],
		askers:    e.askers[:0],
		answerers: e.answerers[:0],
	}
}

func (t *Table) countSecond(e *entry, sec int64, n uint64) {
	if len(e.buckets) == 0 {
		e.buckets = slices.Grow(e.buckets, int(t.window))[:t.window]
		clear(e.buckets)
	}
	b := &e.buckets[((sec%t.window)+t.window)%t.window]
	if b.sec != sec {
		if b.sec > sec {
			return // older than the window: its second's count is gone
		}
		*b = bucket{sec: sec}
	}
	b.n += n
}

func (e *entry) addAsker(a Asker, n uint64, ts time.Time, max int) {
	for i := range e.askers {
		if e.askers[i].Asker == a {
			e.askers[i].Requests += n
			e.askers[i].LastSeen = later(e.askers[i].LastSeen, ts)
			return
		}
	}
	c := AskerCount{Asker: a, Requests: n, LastSeen: ts}
	if len(e.askers) < max {
		e.askers = append(e.askers, c)
		return
	}
	e.moreAskers = true
	oldest := 0
	for i := range e.askers {
		if e.askers[i].LastSeen.Before(e.askers[oldest].LastSeen) {
			oldest = i
		}
	}
	e.askers[oldest] = c
}

func (e *entry) addAnswerer(mac wire.MAC, k Kind, ts time.Time, max int) {
	for i := range e.answerers {
		if e.answerers[i].MAC == mac {
			a := &e.answerers[i]
			a.Answers++
			a.Kind = k
			a.LastSeen = later(a.LastSeen, ts)
			return
		}
	}
	a := Answerer{MAC: mac, Kind: k, Answers: 1, LastSeen: ts}
	if len(e.answerers) < max {
		e.answerers = append(e.answerers, a)
		return
	}
	e.moreAnswerers = true
	oldest := 0
	for i := range e.answerers {
		if e.answerers[i].LastSeen.Before(e.answerers[oldest].LastSeen) {
			oldest = i
		}
	}
	e.answerers[oldest] = a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// rate returns the requests per second over the window ending at second
// now.
func (t *Table) rate(e *entry, now int64) float64 {
	var n uint64
	for _, b := range e.buckets {
		if b.sec > now-t.window && b.sec <= now {
			n += b.n
		}
	}
	return float64(n) / float64(t.window)
}

func (t *Table) export(addr netip.Addr, e *entry, now int64) Entry {
	out := Entry{
		Addr:          addr,
		Requests:      e.requests,
		Rate:          t.rate(e, now),
		LastAsker:     e.lastAsker,
		Askers:        slices.Clone(e.askers),
		MoreAskers:    e.moreAskers,
		Answerers:     slices.Clone(e.answerers),
		MoreAnswerers: e.moreAnswerers,
		FirstSeen:     e.first,
		LastSeen:      e.last,
	}
	slices.SortStableFunc(out.Askers, func(a, b AskerCount) int { return b.LastSeen.Compare(a.LastSeen) })
	slices.SortStableFunc(out.Answerers, func(a, b Answerer) int { return b.LastSeen.Compare(a.LastSeen) })
	return out
}

// Get returns a copy of what the table knows about addr.
func (t *Table) Get(addr netip.Addr) (Entry, bool) {
	now := t.clock.Now().Unix()
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries.peek(addr)
	if !ok {
		return Entry{}, false
	}
	return t.export(addr, e, now), true
}

// Snapshot returns a copy of every entry, sorted in the given order.
func (t *Table) Snapshot(order Order) []Entry {
	now := t.clock.Now().Unix()
	t.mu.Lock()
	out := make([]Entry, 0, t.entries.len())
	t.entries.each(func(addr netip.Addr, e *entry) {
		out = append(out, t.export(addr, e, now))
	})
	t.mu.Unlock()
	slices.SortFunc(out, order.compare)
	return out
}

// Stats returns how many addresses the table holds and how many it evicted.
func (t *Table) Stats() TableStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return TableStats{Entries: t.entries.len(), Evicted: t.entries.evicted}
}

// Order is an order for Table.Snapshot. Ties are broken by address.
type Order uint8

// The orders of a snapshot.
const (
	// ByRate puts the highest request rate first.
	ByRate Order = iota
	// ByRequests puts the most requests first.
	ByRequests
	// ByLastSeen puts the most recently seen address first.
	ByLastSeen
	// ByAddr sorts by address, IPv4 before IPv6.
	ByAddr
)

var orderNames = [...]string{ByRate: "rate", ByRequests: "requests", ByLastSeen: "last-seen", ByAddr: "addr"}

// String returns the order's name: rate, requests, last-seen or addr.
func (o Order) String() string {
	if int(o) < len(orderNames) {
		return orderNames[o]
	}
	return fmt.Sprintf("order(%d)", uint8(o))
}

// ParseOrder returns the Order that String names s.
func ParseOrder(s string) (Order, error) {
	for i, name := range orderNames {
		if s == name {
			return Order(i), nil
		}
	}
	return 0, fmt.Errorf("sort order %q: want one of rate, requests, last-seen, addr", s)
}

func (o Order) compare(a, b Entry) int {
	var c int
	switch o {
	case ByRate:
		c = cmp.Compare(b.Rate, a.Rate)
	case ByRequests:
		c = cmp.Compare(b.Requests, a.Requests)
	case ByLastSeen:
		c = b.LastSeen.Compare(a.LastSeen)
	}
	if c != 0 {
		return c
	}
	return a.Addr.Compare(b.Addr)
}
