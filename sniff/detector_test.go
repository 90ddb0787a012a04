package sniff_test

import (
	"encoding/json"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/sniff"
)

// events collects what a Detector reports.
type events struct {
	mu  sync.Mutex
	got []sniff.Event
}

func (e *events) add(ev sniff.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func (e *events) take() []sniff.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	got := e.got
	e.got = nil
	return got
}

func newDetector(t testing.TB, cfg sniff.DetectorConfig) (*sniff.Detector, *events) {
	t.Helper()
	evs := &events{}
	if cfg.OnEvent == nil {
		cfg.OnEvent = evs.add
	}
	d, err := sniff.NewDetector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d, evs
}

func hold(t testing.TB, d *sniff.Detector, addr netip.Addr, ours ...wire.MAC) {
	t.Helper()
	var hws []net.HardwareAddr
	for _, m := range ours {
		hws = append(hws, hw(m))
	}
	if err := d.Hold(addr, hws...); err != nil {
		t.Fatal(err)
	}
}

// decoded returns the observation of a test frame, at time d after ts0.
func decoded(t testing.TB, frame []byte, d time.Duration) sniff.Observation {
	t.Helper()
	o, err := sniff.Decode(frame, at(d))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return o
}

// TestConflict checks which frames about a held address are conflicts
// (RFC 5227 section 2.4, and its NDP counterpart) and which are not.
func TestConflict(t *testing.T) {
	withARP := func(s arpSpec, f func(*arpSpec)) arpSpec { f(&s); return s }
	withNDP := func(s ndpSpec, f func(*ndpSpec)) ndpSpec { f(&s); return s }
	tests := []struct {
		name  string
		frame []byte
		// want is the competing MAC and kind, zero for no conflict.
		want     wire.MAC
		wantKind sniff.Kind
	}{
		{"announcement by another MAC", buildARP(t, announcement(rogueMAC)), rogueMAC, sniff.KindAnnouncement},
		{"gratuitous reply by another MAC", buildARP(t, gratuitousReply(rogueMAC)), rogueMAC, sniff.KindGratuitousReply},
		{"reply by another MAC", buildARP(t, reply(rogueMAC)), rogueMAC, sniff.KindReply},
		{"who-has from the held address by another MAC", buildARP(t, withARP(whoHas(), func(s *arpSpec) {
			s.ethSrc, s.senderMAC, s.sender, s.target = rogueMAC, rogueMAC, vip4, client4
		})), rogueMAC, sniff.KindWhoHas},
		{"sender hardware address, not the Ethernet source, is the claimer", buildARP(t, withARP(announcement(rogueMAC), func(s *arpSpec) {
			s.ethSrc = clientMAC
		})), rogueMAC, sniff.KindAnnouncement},
		{"probe for the held address", buildARP(t, withARP(probe(), func(s *arpSpec) { s.ethSrc, s.senderMAC = rogueMAC, rogueMAC })), wire.MAC{}, 0},
		{"who-has for the held address", buildARP(t, whoHas()), wire.MAC{}, 0},
		{"our own announcement", buildARP(t, announcement(ourMAC)), wire.MAC{}, 0},
		{"our own reply", buildARP(t, reply(ourMAC)), wire.MAC{}, 0},
		{"our second MAC", buildARP(t, announcement(otherMAC)), wire.MAC{}, 0},
		{"sent from our wire.MAC on behalf of another", buildARP(t, withARP(announcement(rogueMAC), func(s *arpSpec) { s.ethSrc = ourMAC })), wire.MAC{}, 0},
		{"announcement of another address", buildARP(t, withARP(announcement(rogueMAC), func(s *arpSpec) {
			s.sender, s.target = client4, client4
		})), wire.MAC{}, 0},
		{"announcement in another VLAN", buildARP(t, withARP(announcement(rogueMAC), func(s *arpSpec) { s.vlans = []uint16{10} })), wire.MAC{}, 0},

		{"unsolicited advertisement by another MAC", buildNDP(t, advertisement(rogueMAC, false)), rogueMAC, sniff.KindAdvertisement},
		{"solicited advertisement by another MAC", buildNDP(t, advertisement(rogueMAC, true)), rogueMAC, sniff.KindAdvertisement},
		{"advertisement without target link-layer option", buildNDP(t, withNDP(advertisement(rogueMAC, true), func(s *ndpSpec) { s.lla = nil })), rogueMAC, sniff.KindAdvertisement},
		{"advertisement of our wire.MAC by a proxy", buildNDP(t, withNDP(advertisement(ourMAC, false), func(s *ndpSpec) { s.ethSrc = rogueMAC })), wire.MAC{}, 0},
		{"solicitation from the held address by another MAC", buildNDP(t, withNDP(solicitation(), func(s *ndpSpec) {
			s.ethSrc, s.lla, s.src, s.target = rogueMAC, mac(rogueMAC), vip6, client6
		})), rogueMAC, sniff.KindSolicitation},
		{"duplicate address detection for the held address", buildNDP(t, dad(rogueMAC)), wire.MAC{}, 0},
		{"solicitation for the held address", buildNDP(t, solicitation()), wire.MAC{}, 0},
		{"our own advertisement", buildNDP(t, advertisement(ourMAC, false)), wire.MAC{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, evs := newDetector(t, sniff.DetectorConfig{})
			hold(t, d, vip4, ourMAC, otherMAC)
			hold(t, d, vip6, ourMAC)
			o := decoded(t, tt.frame, time.Second)
			d.Observe(o)
			got := evs.take()
			if tt.want.IsZero() {
				if len(got) != 0 || len(d.Conflicts()) != 0 {
					t.Fatalf("got events %+v, conflicts %+v; want none", got, d.Conflicts())
				}
				return
			}
			addr, _, _ := o.Claim()
			want := sniff.Conflict{Addr: addr, MAC: tt.want, Kind: tt.wantKind, First: at(time.Second), Last: at(time.Second), Count: 1}
			if len(got) != 1 || got[0] != want {
				t.Fatalf("got events %+v, want [%+v]", got, want)
			}
			if cs := d.Conflicts(); len(cs) != 1 || cs[0] != want {
				t.Errorf("Conflicts: got %+v, want [%+v]", cs, want)
			}
		})
	}
}

// TestConflictRepeat follows one competing claimer over time: reported at
// once, then at most once per Repeat with its count so far.
func TestConflictRepeat(t *testing.T) {
	d, evs := newDetector(t, sniff.DetectorConfig{Repeat: time.Second})
	hold(t, d, vip4, ourMAC)
	frame := buildARP(t, announcement(rogueMAC))
	reply := buildARP(t, gratuitousReply(rogueMAC))
	second := buildARP(t, announcement(otherMAC))
	steps := []struct {
		at    time.Duration
		frame []byte
		want  []sniff.Conflict
	}{
		{0, frame, []sniff.Conflict{{Addr: vip4, MAC: rogueMAC, Kind: sniff.KindAnnouncement, First: ts0, Last: ts0, Count: 1}}},
		{500 * time.Millisecond, frame, nil},
		{900 * time.Millisecond, second, []sniff.Conflict{{Addr: vip4, MAC: otherMAC, Kind: sniff.KindAnnouncement, First: at(900 * time.Millisecond), Last: at(900 * time.Millisecond), Count: 1}}},
		{time.Second, reply, []sniff.Conflict{{Addr: vip4, MAC: rogueMAC, Kind: sniff.KindGratuitousReply, First: ts0, Last: at(time.Second), Count: 3}}},
		{1200 * time.Millisecond, frame, nil},
		{1999 * time.Millisecond, frame, nil},
		{2500 * time.Millisecond, frame, []sniff.Conflict{{Addr: vip4, MAC: rogueMAC, Kind: sniff.KindAnnouncement, First: ts0, Last: at(2500 * time.Millisecond), Count: 6}}},
	}
	for _, s := range steps {
		d.Observe(decoded(t, s.frame, s.at))
		got := evs.take()
		if len(got) != len(s.want) {
			t.Fatalf("at %v: got events %+v, want %+v", s.at, got, s.want)
		}
		for i := range got {
			if got[i] != s.want[i] {
				t.Errorf("at %v: got event %+v, want %+v", s.at, got[i], s.want[i])
			}
		}
	}
	want := []sniff.Conflict{
		{Addr: vip4, MAC: rogueMAC, Kind: sniff.KindAnnouncement, First: ts0, Last: at(2500 * time.Millisecond), Count: 6},
		{Addr: vip4, MAC: otherMAC, Kind: sniff.KindAnnouncement, First: at(900 * time.Millisecond), Last: at(900 * time.Millisecond), Count: 1},
	}
	got := d.Conflicts()
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Conflicts:\n got %+v\nwant %+v", got, want)
	}

	// With a negative Repeat every frame is an event.
	d, evs = newDetector(t, sniff.DetectorConfig{Repeat: -1})
	hold(t, d, vip4, ourMAC)
	for i := range 5 {
		d.Observe(decoded(t, frame, time.Duration(i)*time.Millisecond))
	}
	if got := evs.take(); len(got) != 5 {
		t.Errorf("Repeat -1: got %d events for 5 frames, want 5", len(got))
	}
}

func TestHoldAndDrop(t *testing.T) {
	d, evs := newDetector(t, sniff.DetectorConfig{})
	rogue := buildARP(t, announcement(rogueMAC))
	rogue6 := buildNDP(t, advertisement(rogueMAC, false))

	// Not held yet: the rogue is just the address's first owner.
	d.Observe(decoded(t, rogue, 0))
	if got := evs.take(); len(got) != 0 {
		t.Fatalf("before Hold: got %+v, want no event", got)
	}
	if m, seen, ok := d.Owner(vip4); !ok || m != rogueMAC || !seen.Equal(ts0) {
		t.Errorf("Owner before Hold: got %v %v %v, want %v at %v", m, seen, ok, rogueMAC, ts0)
	}

	// Held through its IPv4-mapped form: the same address.
	hold(t, d, netip.AddrFrom16(vip4.As16()), ourMAC)
	hold(t, d, vip6, ourMAC)
	if _, _, ok := d.Owner(vip4); ok {
		t.Error("Owner of a held address: got one, want none")
	}
	d.Observe(decoded(t, rogue, time.Second))
	d.Observe(decoded(t, rogue6, time.Second))
	if got := evs.take(); len(got) != 2 {
		t.Fatalf("while held: got %+v, want two conflicts", got)
	}
	// Holding again (a refresh, another MAC of ours) keeps the claimers.
	hold(t, d, vip4, ourMAC, otherMAC)
	if got := len(d.Conflicts()); got != 2 {
		t.Errorf("after holding again: got %d conflicts, want 2", got)
	}
	if st := d.Stats(); st.Held != 2 {
		t.Errorf("Stats: got %+v, want 2 held", st)
	}

	// Dropped: its claimers are forgotten, and the next claim starts a
	// new owner record without an event.
	d.Drop(vip4)
	d.Drop(vip4)
	d.Drop(netip.MustParseAddr("192.0.2.99"))
	if cs := d.Conflicts(); len(cs) != 1 || cs[0].Addr != vip6 {
		t.Errorf("after Drop: got conflicts %+v, want only %v's", cs, vip6)
	}
	d.Observe(decoded(t, rogue, 5*time.Second))
	if got := evs.take(); len(got) != 0 {
		t.Errorf("after Drop: got %+v, want no event", got)
	}
	if m, _, ok := d.Owner(vip4); !ok || m != rogueMAC {
		t.Errorf("Owner after Drop: got %v %v, want %v", m, ok, rogueMAC)
	}

	for _, tt := range []struct {
		addr netip.Addr
		ours []net.HardwareAddr
	}{
		{netip.Addr{}, []net.HardwareAddr{hw(ourMAC)}},
		{zero4, []net.HardwareAddr{hw(ourMAC)}},
		{vip4, nil},
		{vip4, []net.HardwareAddr{{1, 2, 3}}},
	} {
		if err := d.Hold(tt.addr, tt.ours...); err == nil {
			t.Errorf("Hold(%v, %v): got no error", tt.addr, tt.ours)
		}
	}
}

// TestOwnerChanges follows an address nobody here holds, as arpwatch would:
// its first owner is no event, a new MAC is a change, going back to the
// previous one is a flip-flop.
func TestOwnerChanges(t *testing.T) {
	d, evs := newDetector(t, sniff.DetectorConfig{Repeat: time.Second})
	addr := netip.MustParseAddr("192.0.2.20")
	a, b, c := clientMAC, rogueMAC, otherMAC
	e := wire.MAC{0x00, 0x00, 0x5e, 0x00, 0x53, 0x05}
	claim := func(m wire.MAC, k sniff.Kind) sniff.Observation {
		return sniff.Observation{Kind: k, EthSrc: m, Sender: addr, SenderMAC: m, Target: addr}
	}
	steps := []struct {
		at   time.Duration
		o    sniff.Observation
		want *sniff.OwnerChange
	}{
		{0, claim(a, sniff.KindReply), nil},
		{time.Second, claim(a, sniff.KindWhoHas), nil},
		{5 * time.Second, claim(b, sniff.KindAnnouncement),
			&sniff.OwnerChange{Addr: addr, Old: a, New: b, Kind: sniff.KindAnnouncement, Time: at(5 * time.Second), OldLastSeen: at(time.Second)}},
		{10 * time.Second, claim(a, sniff.KindGratuitousReply),
			&sniff.OwnerChange{Addr: addr, Old: b, New: a, FlipFlop: true, Kind: sniff.KindGratuitousReply, Time: at(10 * time.Second), OldLastSeen: at(5 * time.Second)}},
		{15 * time.Second, claim(c, sniff.KindReply),
			&sniff.OwnerChange{Addr: addr, Old: a, New: c, Kind: sniff.KindReply, Time: at(15 * time.Second), OldLastSeen: at(10 * time.Second)}},
		// Within Repeat of the last event: counted, not reported.
		{15500 * time.Millisecond, claim(e, sniff.KindReply), nil},
		{16 * time.Second, claim(e, sniff.KindReply), nil},
		{17 * time.Second, claim(c, sniff.KindReply),
			&sniff.OwnerChange{Addr: addr, Old: e, New: c, FlipFlop: true, Kind: sniff.KindReply, Time: at(17 * time.Second), OldLastSeen: at(16 * time.Second), Unreported: 1}},
	}
	for _, s := range steps {
		o := s.o
		o.Time = at(s.at)
		d.Observe(o)
		got := evs.take()
		switch {
		case s.want == nil && len(got) != 0:
			t.Errorf("at %v: got %+v, want no event", s.at, got)
		case s.want != nil && (len(got) != 1 || got[0] != *s.want):
			t.Errorf("at %v: got %+v, want [%+v]", s.at, got, *s.want)
		}
	}
	if m, seen, ok := d.Owner(addr); !ok || m != c || !seen.Equal(at(17*time.Second)) {
		t.Errorf("Owner: got %v %v %v, want %v at 17s", m, seen, ok, c)
	}
	// Neither a probe nor a DAD solicitation names an owner.
	d.Observe(sniff.Observation{Time: at(20 * time.Second), Kind: sniff.KindProbe, EthSrc: b, SenderMAC: b, Sender: zero4, Target: addr})
	if got := evs.take(); len(got) != 0 {
		t.Errorf("probe: got %+v, want no event", got)
	}
}

func TestDetectorBounds(t *testing.T) {
	d, evs := newDetector(t, sniff.DetectorConfig{MaxOwners: 100, MaxClaimers: 4})
	hold(t, d, vip4, ourMAC)
	for i := range 10_000 {
		m := wire.MAC{0x00, 0x00, 0x5e, 0x00, byte(i >> 8), byte(i)}
		b := netip.MustParseAddr("2001:db8::").As16()
		b[14], b[15] = byte(i>>8), byte(i)
		addr := netip.AddrFrom16(b)
		d.Observe(sniff.Observation{Time: at(time.Duration(i) * time.Millisecond), Kind: sniff.KindAdvertisement, EthSrc: m, Sender: addr, Target: addr, Dst: allNodes})
		if i < 10 {
			d.Observe(answer(time.Duration(i)*time.Millisecond, sniff.KindAnnouncement, vip4, m))
		}
	}
	want := sniff.DetectorStats{Held: 1, Owners: 100, OwnersEvicted: 9900, ClaimersEvicted: 6}
	if st := d.Stats(); st != want {
		t.Errorf("Stats: got %+v, want %+v", st, want)
	}
	cs := d.Conflicts()
	if len(cs) != 4 || cs[0].MAC[5] != 6 || cs[3].MAC[5] != 9 {
		t.Errorf("Conflicts: got %+v, want the 4 latest claimers", cs)
	}
	if got := len(evs.take()); got != 10 {
		t.Errorf("got %d events, want 10 (one per new claimer)", got)
	}
}

// TestOnEventMayHoldAndDrop yields from the event callback, as the agent's
// yield policy does: the Detector must not hold its lock while calling it.
func TestOnEventMayHoldAndDrop(t *testing.T) {
	var d *sniff.Detector
	var got []sniff.Event
	d, _ = newDetector(t, sniff.DetectorConfig{OnEvent: func(ev sniff.Event) {
		got = append(got, ev)
		if c, ok := ev.(sniff.Conflict); ok {
			d.Drop(c.Addr)
			_ = d.Conflicts()
		}
	}})
	hold(t, d, vip4, ourMAC)
	d.Observe(decoded(t, buildARP(t, announcement(rogueMAC)), 0))
	d.Observe(decoded(t, buildARP(t, announcement(rogueMAC)), 2*time.Second))
	if len(got) != 1 || d.Stats().Held != 0 {
		t.Errorf("got events %+v and %d held, want one conflict and the address dropped", got, d.Stats().Held)
	}
}

func TestNewDetectorRefuses(t *testing.T) {
	for _, cfg := range []sniff.DetectorConfig{{MaxOwners: -1}, {MaxClaimers: -1}} {
		if _, err := sniff.NewDetector(cfg); err == nil {
			t.Errorf("NewDetector(%+v): got no error", cfg)
		}
	}
}

func BenchmarkDetectorObserve(b *testing.B) {
	d, _ := newDetector(b, sniff.DetectorConfig{OnEvent: func(sniff.Event) {}})
	hold(b, d, vip4, ourMAC)
	obs := []sniff.Observation{
		decoded(b, buildARP(b, whoHas()), 0),
		decoded(b, buildARP(b, reply(ourMAC)), 0),
		decoded(b, buildNDP(b, solicitation()), 0),
		decoded(b, buildNDP(b, advertisement(clientMAC, true)), 0),
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		o := obs[i%len(obs)]
		o.Time = at(time.Duration(i) * time.Microsecond)
		d.Observe(o)
	}
}

// TestEventJSON checks that events survive JSON, as the agent sends them
// to its clients.
func TestEventJSON(t *testing.T) {
	want := sniff.Conflict{Addr: vip6, MAC: rogueMAC, Kind: sniff.KindAdvertisement, First: ts0, Last: at(time.Second), Count: 3}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	const wantJSON = `{"addr":"2001:db8::10","mac":"00:00:5e:00:53:03","kind":"advertisement","first":"2024-05-01T12:00:00Z","last":"2024-05-01T12:00:01Z","count":3}`
	if string(b) != wantJSON {
		t.Errorf("JSON: got %s, want %s", b, wantJSON)
	}
	var got sniff.Conflict
	if err := json.Unmarshal(b, &got); err != nil || got != want {
		t.Errorf("round trip: got %+v, %v; want %+v", got, err, want)
	}
	var k sniff.Kind
	if err := k.UnmarshalText([]byte("gossip")); err == nil {
		t.Error(`Kind.UnmarshalText("gossip"): got no error`)
	}
	var m wire.MAC
	if err := m.UnmarshalText([]byte("00:00:5e:00:53:03:01:02")); err == nil {
		t.Error("MAC.UnmarshalText of 8 bytes: got no error")
	}
}
