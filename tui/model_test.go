package tui

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/netcheck"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// connected returns a harness whose model has connected to b, polled once
// and received the fixture's events.
func connected(t *testing.T, b *fakeBackend, o Options, w, h int) *harness {
	t.Helper()
	hs := newHarness(t, b, o, w, h)
	hs.until("the first poll", func() bool { return hs.m.conn == connUp && !hs.m.polling })
	for _, ev := range fixtureEvents() {
		b.source().ch <- ev
	}
	hs.until("the fixture's events", func() bool { return hs.m.log.len() == len(fixtureEvents()) })
	hs.draw()
	return hs
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./tui -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("view differs from %s (run go test ./tui -update to accept it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// checkFits fails unless the view is exactly h lines of at most w cells.
func checkFits(t *testing.T, view string, w, h int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) != h {
		t.Errorf("view has %d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			t.Errorf("line %d is %d cells wide, want at most %d: %q", i+1, n, w, l)
		}
	}
}

// TestHelpBarKeepsQuit: at 80 columns, with the fleet's move key too, the
// help bar still names help and quit; what it leaves off is at its end.
func TestHelpBarKeepsQuit(t *testing.T) {
	t.Parallel()
	h := connected(t, fleetFixture(), Options{}, 80, 24)
	h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
	lines := strings.Split(h.draw(), "\n")
	bar := lines[len(lines)-1]
	for _, want := range []string{"m move", "? help", "q quit"} {
		if !strings.Contains(bar, want) {
			t.Errorf("help bar at 80 columns: %q, want %q in it", bar, want)
		}
	}
}

func TestViewGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fleet bool // the agent has a store: fleetFixture
		setup func(*fakeBackend, *Options)
		act   func(*harness)
	}{
		{name: "main"},
		{name: "fleet", fleet: true},
		{name: "fleet-focused", fleet: true, act: func(h *harness) { h.keys("tab", "tab", "tab", "down") }},
		{name: "move-picker", fleet: true, act: func(h *harness) { h.keys("m", "down") }},
		{name: "group", fleet: true, setup: func(b *fakeBackend, _ *Options) { grouped(b) }},
		{name: "group-history", fleet: true, setup: func(b *fakeBackend, _ *Options) { grouped(b) }, act: func(h *harness) {
			h.keys("h")
			h.until("the history", func() bool { return h.m.hist != nil && h.m.hist.loaded })
		}},
		{name: "group-move-picker", fleet: true, setup: func(b *fakeBackend, _ *Options) { grouped(b) }, act: func(h *harness) { h.keys("m") }},
		{name: "full-help", act: func(h *harness) { h.keys("?") }},
		{name: "claim-rejected", act: func(h *harness) {
			h.keys("c")
			h.typeText("224.0.0.1")
			h.keys("enter")
		}},
		{name: "confirm-release", act: func(h *harness) { h.keys("r") }},
		{name: "traffic-focused-sorted", act: func(h *harness) { h.keys("tab", "s", "down") }},
		{name: "filtered", act: func(h *harness) {
			h.keys("/")
			h.typeText("2001")
			h.keys("enter")
		}},
		{name: "interface", setup: func(_ *fakeBackend, o *Options) { o.Interface = "eth1" }},
		{name: "empty", setup: func(b *fakeBackend, _ *Options) {
			b.status.Claims, b.whoHas = nil, api.WhoHasResponse{}
			b.whoHasErr = &api.RemoteError{Status: 404, Code: api.CodeNotFound, Message: "no endpoint GET /v1/whohas"}
		}},
		{name: "crowded", fleet: true, setup: func(b *fakeBackend, _ *Options) { crowded(b) }},
		{name: "crowded-fleet-scrolled", fleet: true, setup: func(b *fakeBackend, _ *Options) { crowded(b) },
			act: func(h *harness) { h.keys("tab", "tab", "tab", "down", "down", "down", "down") }},
		{name: "unreachable", fleet: true, act: func(h *harness) {
			h.now = h.now.Add(2 * time.Second)
			h.b.setDown(true)
			h.until("the agent is seen gone", func() bool { return h.m.conn == connDown })
			h.now = h.now.Add(12 * time.Second)
		}},
	}
	for _, tt := range tests {
		for _, sz := range [][2]int{{80, 24}, {120, 40}} {
			name := fmt.Sprintf("%s-%dx%d", tt.name, sz[0], sz[1])
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b, o := fixture(), Options{}
				if tt.fleet {
					b = fleetFixture()
				}
				if tt.setup != nil {
					tt.setup(b, &o)
				}
				h := connected(t, b, o, sz[0], sz[1])
				if tt.fleet {
					h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
				}
				if tt.act != nil {
					tt.act(h)
				}
				got := h.draw()
				checkFits(t, got, sz[0], sz[1])
				checkGolden(t, name, got)
			})
		}
	}
}

func TestResizeReflows(t *testing.T) {
	t.Parallel()
	h := connected(t, fixture(), Options{}, 80, 24)
	for _, sz := range [][2]int{{120, 40}, {60, 16}, {200, 60}, {80, 24}} {
		h.send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		checkFits(t, h.m.View(), sz[0], sz[1])
	}
}

func TestTabCyclesPanes(t *testing.T) {
	t.Parallel()
	h := connected(t, fixture(), Options{}, 80, 24)
	want := []pane{paneWhoHas, paneClaimers, paneEvents, paneClaims, paneWhoHas}
	for i, w := range want {
		h.keys("tab")
		if h.m.focus != w {
			t.Fatalf("after %d tabs: got pane %d, want %d", i+1, h.m.focus, w)
		}
	}
	h.keys("shift+tab")
	if h.m.focus != paneClaims {
		t.Errorf("shift+tab: got pane %d, want the claims pane", h.m.focus)
	}
	if !strings.Contains(h.m.View(), "▸ Claims") {
		t.Errorf("the focused pane's title is not marked:\n%s", h.m.View())
	}
}

func TestClaimPrompt(t *testing.T) {
	t.Parallel()
	_, wantErr := netcheck.ParseAddr("224.0.0.1")
	tests := []struct {
		name      string
		iface     string // Options.Interface
		typed     string
		wantErr   string
		wantClaim *api.ClaimRequest
	}{
		{name: "multicast", typed: "224.0.0.1", wantErr: wantErr.Error()},
		{name: "not an address", typed: "192.0.2", wantErr: `"192.0.2" is not an IP address`},
		{name: "nothing", typed: "  ", wantErr: "type an address to claim"},
		{name: "too many words", typed: "192.0.2.12 eth0 eth1", wantErr: "give one address and at most one interface"},
		{name: "with interface", typed: "192.0.2.12 eth0", wantClaim: &api.ClaimRequest{Addrs: []string{"192.0.2.12"}, Interface: "eth0"}},
		{name: "without interface", typed: "2001:db8::12", wantClaim: &api.ClaimRequest{Addrs: []string{"2001:db8::12"}}},
		{name: "watched interface", iface: "eth1", typed: "192.0.2.12", wantClaim: &api.ClaimRequest{Addrs: []string{"192.0.2.12"}, Interface: "eth1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := fixture()
			h := connected(t, b, Options{Interface: tt.iface}, 80, 24)
			h.keys("c")
			if h.m.mode != modeClaim || !strings.Contains(h.m.View(), "claim ") {
				t.Fatalf("c: got mode %d, want the claim prompt:\n%s", h.m.mode, h.m.View())
			}
			h.typeText(tt.typed)
			h.keys("enter")
			if tt.wantErr != "" {
				if !strings.Contains(h.m.inputErr, tt.wantErr) {
					t.Errorf("got error %q, want one with %q", h.m.inputErr, tt.wantErr)
				}
				if h.m.mode != modeClaim {
					t.Error("the prompt closed on bad input; want it open to fix the input")
				}
				if len(b.claims) != 0 {
					t.Errorf("bad input was sent to the agent: %+v", b.claims)
				}
				// The sentence is on screen, wrapped to the width.
				if flat := strings.Join(strings.Fields(h.draw()), " "); !strings.Contains(flat, tt.wantErr) {
					t.Errorf("the view does not show %q:\n%s", tt.wantErr, h.m.View())
				}
				// Typing again clears it; esc closes the prompt.
				h.typeText("x")
				if h.m.inputErr != "" {
					t.Errorf("after typing: got error %q, want it cleared", h.m.inputErr)
				}
				h.keys("esc")
				if h.m.mode != modeNormal {
					t.Error("esc did not close the prompt")
				}
				return
			}
			h.until("the claim's answer", func() bool { return strings.HasPrefix(h.m.flash, "claimed") })
			if len(b.claims) != 1 || !slices.Equal(b.claims[0].Addrs, tt.wantClaim.Addrs) || b.claims[0].Interface != tt.wantClaim.Interface {
				t.Fatalf("got claims %+v, want %+v", b.claims, *tt.wantClaim)
			}
			if h.m.mode != modeNormal {
				t.Error("the prompt stayed open after a claim")
			}
		})
	}
}

func TestClaimRefusedByAgent(t *testing.T) {
	t.Parallel()
	b := fixture()
	b.claimErr = &api.RemoteError{Status: 400, Code: api.CodeBadInput, Message: `interface "eth9" does not exist: list the interfaces with "ip link"`}
	h := connected(t, b, Options{}, 80, 24)
	h.keys("c")
	h.typeText("192.0.2.12 eth9")
	h.keys("enter")
	h.until("the refusal", func() bool { return h.m.flashErr })
	if want := `claim 192.0.2.12: interface "eth9" does not exist`; !strings.HasPrefix(h.m.flash, want) {
		t.Errorf("got %q, want it to start %q", h.m.flash, want)
	}
	if h.m.conn != connUp {
		t.Error("a refusal made the view think the agent is gone")
	}
}

// TestClaimRefusalShown: a claim the agent refuses, whether in the
// answer's refused list (another node holds it: HTTP 200, no claim) or as
// an error, ends the "claiming…" line with the sentence the CLI prints for
// it, the node that holds it named.
func TestClaimRefusalShown(t *testing.T) {
	t.Parallel()
	const held = `192.0.2.10 is held by node b since 10:00:00: move it here with "vip move 192.0.2.10 --to a", or take it with "vip claim 192.0.2.10 --take-over"`
	tests := []struct {
		name    string
		refused []api.Refused
		err     error
		want    string
	}{
		{name: "refused in the answer", refused: []api.Refused{{Addr: "192.0.2.10", Error: held, HeldBy: "b", ClaimedAt: t0, Code: api.CodeHeld}},
			want: "refused 192.0.2.10: " + held},
		{name: "refused as an error", err: &api.RemoteError{Status: 409, Code: api.CodeHeld, Message: held},
			want: "refused 192.0.2.10: " + held},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := fixture()
			b.claimRefused, b.claimErr = tt.refused, tt.err
			h := connected(t, b, Options{}, 80, 24)
			h.keys("c")
			h.typeText("192.0.2.10")
			h.keys("enter")
			h.until("the claim sent", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.claims) == 1 })
			h.settle()
			if h.m.flash != tt.want || !h.m.flashErr {
				t.Errorf("got flash %q (error %v), want the error %q", h.m.flash, h.m.flashErr, tt.want)
			}
			if flat := strings.Join(strings.Fields(h.draw()), " "); !strings.Contains(flat, tt.want) {
				t.Errorf("the view does not show %q:\n%s", tt.want, h.m.View())
			}
		})
	}
}

// TestFooterWrapsAtSpaces: a long line in the footer wraps at its spaces
// only, at every width, so that a flag like --take-over stays whole.
func TestFooterWrapsAtSpaces(t *testing.T) {
	t.Parallel()
	b := fixture()
	b.claimErr = &api.RemoteError{Status: 400, Code: api.CodeBadInput,
		Message: `192.0.2.10 is not yours: move it here with "vip move 192.0.2.10 --to a", or take it with "vip claim 192.0.2.10 --take-over --force-now"`}
	h := connected(t, b, Options{}, 80, 24)
	h.keys("c")
	h.typeText("192.0.2.10")
	h.keys("enter")
	h.until("the refusal", func() bool { return h.m.flashErr })
	for w := 60; w <= 120; w++ {
		h.send(tea.WindowSizeMsg{Width: w, Height: 24})
		v := h.m.View()
		checkFits(t, v, w, 24)
		words := strings.Fields(v)
		for _, want := range strings.Fields(h.m.flash) {
			if !slices.Contains(words, want) {
				t.Errorf("at %d columns the word %q is cut:\n%s", w, want, v)
			}
		}
	}
}

func TestReleaseAsksFirst(t *testing.T) {
	t.Parallel()
	b := fixture()
	h := connected(t, b, Options{}, 80, 24)
	for _, no := range []string{"n", "esc", "x"} {
		h.keys("r")
		if h.m.mode != modeConfirm || !strings.Contains(h.m.View(), "release 192.0.2.10 on eth0?") {
			t.Fatalf("r: want a confirmation for 192.0.2.10 on eth0:\n%s", h.m.View())
		}
		h.keys(no)
		h.settle()
		if len(b.releases) != 0 || h.m.mode != modeNormal {
			t.Fatalf("r then %q: got releases %+v, mode %d; want nothing released", no, b.releases, h.m.mode)
		}
	}
	h.keys("down", "r", "y")
	h.until("the release's answer", func() bool { return strings.HasPrefix(h.m.flash, "released") })
	if len(b.releases) != 1 || !slices.Equal(b.releases[0].Addrs, []string{"192.0.2.11"}) {
		t.Errorf("down, r, y: got releases %+v, want 192.0.2.11 (the second row)", b.releases)
	}
}

func TestRefreshSelected(t *testing.T) {
	t.Parallel()
	b := fixture()
	h := connected(t, b, Options{}, 80, 24)
	h.keys("g")
	h.until("the refresh's answer", func() bool { return strings.HasPrefix(h.m.flash, "refreshed") })
	// From the claimers pane, g refreshes the contested address.
	h.keys("tab", "tab", "g")
	h.until("the second refresh", func() bool { return len(b.refreshes) == 2 })
	got := [][]string{b.refreshes[0].Addrs, b.refreshes[1].Addrs}
	want := [][]string{{"192.0.2.10"}, {"2001:db8::10"}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("refresh %d: got %v, want %v", i+1, got[i], want[i])
		}
	}
}

func TestSortCyclesWhoHas(t *testing.T) {
	t.Parallel()
	h := connected(t, fixture(), Options{}, 80, 24)
	want := []struct {
		by    whoHasSort
		order []string
	}{
		{sortRequests, []string{"192.0.2.77", "2001:db8::10", "192.0.2.10"}},
		{sortTarget, []string{"192.0.2.10", "192.0.2.77", "2001:db8::10"}},
		{sortLastSeen, []string{"2001:db8::10", "192.0.2.10", "192.0.2.77"}},
		{sortRate, []string{"192.0.2.77", "192.0.2.10", "2001:db8::10"}},
	}
	for _, w := range want {
		h.keys("s")
		if h.m.sort != w.by {
			t.Fatalf("s: got sort %v, want %v", h.m.sort, w.by)
		}
		if got := h.m.rowKeys[paneWhoHas]; !slices.Equal(got, w.order) {
			t.Errorf("sorted by %v: got %v, want %v", w.by, got, w.order)
		}
		if !strings.Contains(h.m.View(), "sorted by "+w.by.String()) {
			t.Errorf("the traffic title does not say it is sorted by %v", w.by)
		}
	}
}

func TestFilter(t *testing.T) {
	t.Parallel()
	h := connected(t, fixture(), Options{}, 80, 24)
	h.keys("/")
	h.typeText("2001")
	// The panes follow as the filter is typed.
	if got := h.m.rowKeys[paneClaims]; !slices.Equal(got, []string{"2001:db8::10"}) {
		t.Errorf("filter 2001: got claims %v, want only 2001:db8::10", got)
	}
	h.keys("enter")
	if h.m.filter != "2001" || h.m.mode != modeNormal {
		t.Fatalf("enter: got filter %q mode %d, want the filter kept and the prompt closed", h.m.filter, h.m.mode)
	}
	if got := h.m.rowKeys[paneWhoHas]; !slices.Equal(got, []string{"2001:db8::10"}) {
		t.Errorf("filter 2001: got traffic %v, want only 2001:db8::10", got)
	}
	if v := h.m.View(); strings.Contains(v, "192.0.2.10") || !strings.Contains(v, `filter "2001"`) {
		t.Errorf("filtered view still shows 192.0.2.10, or does not say it is filtered:\n%s", v)
	}
	h.keys("/", "esc")
	if h.m.filter != "" || len(h.m.rowKeys[paneClaims]) != 3 {
		t.Errorf("/ then esc: got filter %q and %d claims, want the filter cleared", h.m.filter, len(h.m.rowKeys[paneClaims]))
	}
}

func TestQuit(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"q", "ctrl+c"} {
		h := connected(t, fixture(), Options{}, 80, 24)
		h.keys(k)
		h.until(k+" to quit", func() bool { return h.quit })
	}
	// In a prompt, q is a letter.
	h := connected(t, fixture(), Options{}, 80, 24)
	h.keys("/", "q")
	if h.quit || h.m.input.Value() != "q" {
		t.Errorf("q in the filter prompt: got quit=%v value %q, want the letter typed", h.quit, h.m.input.Value())
	}
	b := h.b
	if len(b.releases) != 0 {
		t.Errorf("quitting released %+v; claims stay with the agent", b.releases)
	}
}

func TestWindowCountsDown(t *testing.T) {
	t.Parallel()
	h := connected(t, fixture(), Options{}, 80, 24)
	if !strings.Contains(h.m.View(), "3.2s") {
		t.Fatalf("want the window's 3.2s left:\n%s", h.m.View())
	}
	h.now = h.now.Add(time.Second)
	if v := h.draw(); !strings.Contains(v, "2.2s") {
		t.Errorf("a second later: want 2.2s left:\n%s", v)
	}
	h.now = h.now.Add(5 * time.Second)
	if v := h.draw(); strings.Contains(v, "announcing   ") && strings.Contains(v, "s       12") {
		t.Errorf("after the window: want no countdown:\n%s", v)
	}
}

// TestEventFloodIsBounded: 100,000 events keep the last logSize and draw
// nothing until the render tick, which draws once.
func TestEventFloodIsBounded(t *testing.T) {
	t.Parallel()
	h := connected(t, fixture(), Options{}, 80, 24)
	h.settle()
	renders, ticks := h.m.renders, func() int { n, _ := h.pending(renderTickMsg{}); return n }
	a := netip.MustParseAddr("192.0.2.10")
	const n = 100_000
	for i := range n {
		h.m.Update(eventsMsg{gen: h.m.gen, events: []api.Event{{Time: t0, Kind: "burst-end", Addr: a, Rounds: i}}})
	}
	if got := h.m.log.len(); got != logSize {
		t.Errorf("after %d events the log holds %d, want %d", n, got, logSize)
	}
	if got := h.m.log.at(logSize - 1).Rounds; got != n-1 {
		t.Errorf("newest event kept: got rounds %d, want %d", got, n-1)
	}
	if got := h.m.renders - renders; got != 0 {
		t.Errorf("%d events drew %d frames before the render tick, want none", n, got)
	}
	if got := ticks(); got > 1 {
		t.Errorf("%d render ticks pending, want at most one", got)
	}
	h.m.tickPending = false // the Update calls above dropped their commands
	h.send(renderTickMsg{})
	if got := h.m.renders - renders; got != 1 {
		t.Errorf("render tick: got %d frames, want 1", got)
	}
}

// TestEventFloodThroughStream pushes 100,000 events through the event
// stream: they arrive in batches, and no frame is drawn without a tick.
func TestEventFloodThroughStream(t *testing.T) {
	t.Parallel()
	h := connected(t, fixture(), Options{}, 80, 24)
	h.settle()
	renders := h.m.renders
	src := h.b.source()
	const n = 100_000
	go func() {
		a := netip.MustParseAddr("192.0.2.10")
		for i := range n {
			src.ch <- api.Event{Time: t0, Kind: "lost", Addr: a, Count: i}
		}
	}()
	h.until("every event", func() bool { return h.m.log.total == uint64(n+len(fixtureEvents())) })
	if got := h.m.log.len(); got != logSize {
		t.Errorf("log holds %d, want %d", got, logSize)
	}
	if got := h.m.renders - renders; got != 0 {
		t.Errorf("drew %d frames without a render tick, want none", got)
	}
	if n, _ := h.pending(renderTickMsg{}); n != 1 {
		t.Errorf("%d render ticks pending, want one for the whole flood", n)
	}
}

// TestRedrawRateUnderFlood runs the model in a real program on the real
// clock and floods it: it draws at most about ten frames a second.
func TestRedrawRateUnderFlood(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for a second")
	}
	b := fixture()
	m := New(t.Context(), b, Options{Socket: testSocket, Renderer: asciiRenderer()})
	defer m.Close()
	p := tea.NewProgram(m, tea.WithInput(nil), tea.WithOutput(io.Discard), tea.WithoutSignalHandler())
	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := p.Run(); done <- err }()
	deadline := time.Now().Add(5 * time.Second)
	for b.opened() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the program never subscribed to events")
		}
		time.Sleep(time.Millisecond)
	}
	src := b.source()
	a := netip.MustParseAddr("192.0.2.10")
	sent := 0
	for time.Since(start) < time.Second {
		select {
		case src.ch <- api.Event{Time: t0, Kind: "burst-end", Addr: a}:
			sent++
		default:
			time.Sleep(time.Microsecond)
		}
	}
	p.Quit()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	// One frame per tick, plus the first and a spare for the edges.
	limit := int(elapsed/frameEvery) + 2
	t.Logf("%d events in %v: %d frames (limit %d), %d events kept", sent, elapsed, m.renders, limit, m.log.len())
	if m.renders > limit {
		t.Errorf("drew %d frames in %v, want at most %d", m.renders, elapsed, limit)
	}
	if m.log.len() > logSize {
		t.Errorf("log holds %d, want at most %d", m.log.len(), logSize)
	}
}

func TestReconnects(t *testing.T) {
	t.Parallel()
	b := fixture()
	b.down = true
	h := newHarness(t, b, Options{}, 80, 24)
	h.until("the first attempt to fail", func() bool { return h.m.conn == connDown })
	v := h.draw()
	if want := "agent unreachable on " + testSocket + ": reconnecting"; !strings.Contains(v, want) {
		t.Fatalf("want %q on screen:\n%s", want, v)
	}
	if !strings.Contains(strings.Join(strings.Fields(v), " "), "no vip agent answers") {
		t.Errorf("want the reason on screen:\n%s", v)
	}
	// Each failed attempt waits longer.
	var waits []time.Duration
	retryPending := func() bool { n, _ := h.pending(retryMsg{}); return n == 1 }
	for range 4 {
		h.until("a retry to be set", retryPending)
		_, d := h.pending(retryMsg{})
		waits = append(waits, d)
		h.fire(retryMsg{})
	}
	h.until("a retry to be set", retryPending)
	if !slices.IsSorted(waits) || waits[0] >= waits[3] {
		t.Errorf("waits between attempts: got %v, want them growing", waits)
	}

	b.setDown(false)
	h.fire(retryMsg{})
	h.until("connected", func() bool { return h.m.conn == connUp && !h.m.polling })
	if v := h.draw(); strings.Contains(v, "unreachable") || !strings.Contains(v, "agent 4242 on") {
		t.Fatalf("after the agent came back, want its header and no banner:\n%s", v)
	}
	if got := b.opened(); got != 1 {
		t.Fatalf("event streams opened: got %d, want 1", got)
	}

	// The agent goes away: its stream ends; when it is back, the view
	// subscribes again and sees new events.
	stalePolls, _ := h.pending(pollTickMsg{})
	b.setDown(true)
	h.until("the end of the stream noticed", func() bool { return h.m.conn == connDown })
	if v := h.draw(); !strings.Contains(v, "agent unreachable on "+testSocket+": reconnecting") {
		t.Fatalf("want the banner again:\n%s", v)
	}
	h.until("a retry to be set", retryPending)
	if n, d := h.pending(retryMsg{}); n != 1 || d != retryFirst {
		t.Errorf("after a good connection: got %d retries pending in %v, want one in %v", n, d, retryFirst)
	}
	b.setDown(false)
	h.fire(retryMsg{})
	h.until("connected again", func() bool { return h.m.conn == connUp && !h.m.polling })
	if got := b.opened(); got != 2 {
		t.Fatalf("event streams opened: got %d, want 2 (subscribed again)", got)
	}
	// Poll ticks of the old connection are dropped: one chain remains.
	h.fire(pollTickMsg{})
	h.settle()
	if n, _ := h.pending(pollTickMsg{}); n != 1 {
		t.Errorf("after firing %d old poll ticks and the new one: %d pending, want 1", stalePolls, n)
	}
	if got := h.m.log.len(); got != 1 || h.m.log.at(0).Kind != kindGap {
		t.Fatalf("after reconnecting: %d events logged, want the note of the events not seen", got)
	}
	b.source().ch <- api.Event{Time: t0, Kind: "release", Addr: netip.MustParseAddr("192.0.2.11")}
	h.until("the new stream's event", func() bool { return h.m.log.len() == 2 })
	if len(h.m.claims) != 2 {
		t.Errorf("a release event: got %d claims, want 2 (192.0.2.11 gone at once)", len(h.m.claims))
	}
}

// TestStaleWhileUnreachable: while the agent is gone every pane says its
// data is stale and how old, the footer says the agent is unreachable
// instead of the last action's line, and the view asks again at least
// twice a second. Back, it reads status and fleet at once (a fleet read
// that was under way when the agent went does not hold it up) and says
// which events it did not see.
func TestStaleWhileUnreachable(t *testing.T) {
	t.Parallel()
	b := fleetFixture()
	h := connected(t, b, Options{}, 120, 40)
	h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
	h.keys("g")
	h.until("the refresh's answer", func() bool { return strings.HasPrefix(h.m.flash, "refreshed") })

	// A fleet read under way when the agent goes.
	hold := make(chan struct{})
	b.mu.Lock()
	b.fleetHold = hold
	b.mu.Unlock()
	h.fire(fleetTickMsg{})
	h.now = t0.Add(2 * time.Second)
	b.setDown(true)
	h.until("the agent seen gone", func() bool { return h.m.conn == connDown })
	close(hold)
	h.settle()

	h.now = t0.Add(14 * time.Second)
	v := h.draw()
	lines := strings.Split(v, "\n")
	for title, age := range map[string]string{"Claims": "14s", "Who-has requests": "14s", "Competing claimers": "14s", "Fleet": "14s", "Events": "12s"} {
		if got := titleLine(t, v, title); !strings.Contains(got, "stale "+age) {
			t.Errorf("the %s pane's title %q does not say its data is stale %s", title, got, age)
		}
	}
	footer := strings.Join(strings.Fields(strings.Join(lines[len(lines)-3:len(lines)-1], " ")), " ")
	if !strings.Contains(footer, "agent unreachable since 10:00:02 (12s)") || strings.Contains(footer, "refreshed") {
		t.Errorf("footer %q, want it to say the agent is unreachable since 10:00:02, not the last action", footer)
	}
	for range 8 {
		h.until("a retry to be set", func() bool { n, _ := h.pending(retryMsg{}); return n == 1 })
		if _, d := h.pending(retryMsg{}); d > 500*time.Millisecond {
			t.Fatalf("a retry in %v, want at most 500ms: the agent back is seen within a second", d)
		}
		h.fire(retryMsg{})
	}

	h.until("a retry to be set", func() bool { n, _ := h.pending(retryMsg{}); return n == 1 })
	reads := b.reads()
	b.setDown(false)
	h.now = t0.Add(20 * time.Second)
	h.fire(retryMsg{})
	h.until("connected, status and fleet read again", func() bool {
		return h.m.conn == connUp && !h.m.polling && b.reads() > reads && h.m.fleetAt.Equal(h.now)
	})
	b.mu.Lock()
	since := slices.Clone(b.since)
	b.mu.Unlock()
	if len(since) < 2 || !since[0].IsZero() || !since[len(since)-1].Equal(t0.Add(2*time.Second)) {
		t.Errorf("streams opened since %v: want the first from now on, the one after the agent's return since 10:00:02, when the stream ended", since)
	}
	v = h.draw()
	for _, want := range []string{"the agent was away from 10:00:02 to 10:00:20: the events it kept since follow", "reconnected to the agent at 10:00:20"} {
		if !strings.Contains(strings.Join(strings.Fields(v), " "), want) {
			t.Errorf("back, the view does not say %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "stale") || strings.Contains(v, "unreachable since") {
		t.Errorf("back, the view still says it is stale:\n%s", v)
	}
}

// TestReconnectNamesARestart: an agent that came back as a new process is
// named so in the event log, with its pid and start, and the events its
// stream replays (opened from when the old one ended) follow the note.
func TestReconnectNamesARestart(t *testing.T) {
	t.Parallel()
	b := fixture()
	h := connected(t, b, Options{}, 120, 40)
	h.now = t0.Add(2 * time.Second)
	b.setDown(true)
	h.until("the agent seen gone", func() bool { return h.m.conn == connDown })
	h.until("a retry to be set", func() bool { n, _ := h.pending(retryMsg{}); return n == 1 })
	b.mu.Lock()
	b.status.Agent.PID, b.status.Agent.Started = 4343, t0.Add(10*time.Second)
	b.mu.Unlock()
	b.setDown(false)
	h.now = t0.Add(12 * time.Second)
	h.fire(retryMsg{})
	h.until("connected again", func() bool { return h.m.conn == connUp })
	a6 := netip.MustParseAddr("2001:db8::10")
	b.source().ch <- api.Event{Time: t0.Add(11 * time.Second), Kind: "taken", Addr: a6, Message: "lost to b at 10:00:05"}
	h.until("the replayed event", func() bool { return h.m.log.len() >= 2 && h.m.log.at(h.m.log.len()-1).Kind == "taken" })
	note := h.m.log.at(h.m.log.len() - 2)
	if want := "the agent was away from 10:00:02 to 10:00:12: it restarted at 10:00:10 (pid 4343, was 4242); its events since follow"; note.Kind != kindGap || note.Message != want {
		t.Errorf("the note before the replayed event: %+v, want %q", note, want)
	}
}

// TestActionFailsWhenGone: an action on a gone agent says so and
// reconnects.
func TestActionFailsWhenGone(t *testing.T) {
	t.Parallel()
	b := fixture()
	h := connected(t, b, Options{}, 80, 24)
	b.mu.Lock()
	b.down = true
	b.mu.Unlock()
	b.claimErr = errors.New("dial: connection refused")
	h.keys("c")
	h.typeText("192.0.2.12")
	h.keys("enter")
	h.until("the view notices", func() bool { return h.m.conn == connDown })
}

// TestSelectionStaysOnItsRow: the selected claim stays selected, and on
// screen, as the list scrolls and as claims come and go before it.
func TestSelectionStaysOnItsRow(t *testing.T) {
	t.Parallel()
	b := fixture()
	b.status.Claims = nil
	for i := 1; i <= 30; i++ {
		b.status.Claims = append(b.status.Claims, api.Claim{Addr: fmt.Sprintf("192.0.2.%d", 100+i), Interface: "eth0", State: "holding"})
	}
	h := connected(t, b, Options{}, 80, 24)
	for i := range 20 {
		h.keys("down")
		if want := fmt.Sprintf("192.0.2.%d", 102+i); h.selectedOnScreen() != want || h.m.selected[paneClaims] != want {
			t.Fatalf("after %d downs: got %q on screen, %q selected; want %s:\n%s", i+1, h.selectedOnScreen(), h.m.selected[paneClaims], want, h.m.View())
		}
	}
	// Two claims come before it and one goes: it stays selected.
	b.mu.Lock()
	b.status.Claims = append(b.status.Claims[1:], api.Claim{Addr: "192.0.2.1", Interface: "eth0"}, api.Claim{Addr: "192.0.2.2", Interface: "eth0"})
	b.mu.Unlock()
	h.fire(pollTickMsg{})
	h.until("the new poll", func() bool { return len(h.m.claims) == 31 && !h.m.polling })
	h.draw()
	if got := h.selectedOnScreen(); got != "192.0.2.121" {
		t.Errorf("after claims came and went: got %q selected on screen, want 192.0.2.121:\n%s", got, h.m.View())
	}
	h.keys("r")
	if !strings.Contains(h.m.View(), "release 192.0.2.121 on eth0?") {
		t.Errorf("r asks about the wrong claim:\n%s", h.m.View())
	}
}

// TestNoColor: with the renderer the view makes for its terminal, NO_COLOR
// turns every colour and attribute off; the view still reads the same.
func TestNoColor(t *testing.T) {
	frame := func() string {
		m := New(t.Context(), fixture(), Options{Socket: testSocket, Out: io.Discard, Location: time.UTC})
		defer m.Close()
		m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
		m.Update(connectedMsg{gen: m.gen, status: fixture().status, stream: &stream{ctx: t.Context(), cancel: func() {}, src: &fakeSource{done: make(chan struct{})}}})
		m.render()
		return m.View()
	}
	t.Setenv("CLICOLOR_FORCE", "1")
	t.Setenv("NO_COLOR", "")
	if colour := frame(); !strings.Contains(colour, "\x1b[") {
		t.Fatalf("with CLICOLOR_FORCE=1: want colour in the view:\n%q", colour)
	}
	t.Setenv("NO_COLOR", "1")
	plain := frame()
	if strings.Contains(plain, "\x1b[") {
		t.Errorf("with NO_COLOR=1: got escape sequences in the view:\n%q", plain)
	}
	for _, want := range []string{selectMark + " 192.0.2.10", "▸ Claims (3)", "Competing claimers (1): another host answers"} {
		if !strings.Contains(plain, want) {
			t.Errorf("with NO_COLOR=1 the view does not show %q in words:\n%s", want, plain)
		}
	}
}

// TestWhoHasNoteNarrowedCapture: with nothing seen and a capture narrowed
// to the held addresses, the traffic pane says so and how to see the whole
// segment, instead of a bare "no who-has requests seen".
func TestWhoHasNoteNarrowedCapture(t *testing.T) {
	t.Parallel()
	b := fixture()
	b.whoHas = api.WhoHasResponse{Captures: []api.CaptureStat{{Interface: "eth0", Scope: "held"}}}
	h := connected(t, b, Options{}, 200, 40)
	if got := h.draw(); !strings.Contains(got, "the agent watches only those; vip agent --watch-all") {
		t.Errorf("traffic pane of a narrowed capture with nothing seen does not say why:\n%s", got)
	}
	b2 := fixture()
	b2.whoHas = api.WhoHasResponse{Captures: []api.CaptureStat{{Interface: "eth0", Scope: "all"}}}
	if got := connected(t, b2, Options{}, 200, 40).draw(); !strings.Contains(got, "no who-has requests seen") {
		t.Errorf("traffic pane of a whole-segment capture with nothing seen:\n%s", got)
	}
}

// TestMoveKey: m opens a picker of the live nodes but the owner of the
// selected claim (this agent's, or any node's in the fleet pane), enter
// moves it there through the agent and shows the timeline, esc keeps it.
func TestMoveKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		keys      []string // before m
		pick      []string // in the picker
		wantNodes []string
		want      *api.MoveRequest
		wantFlash string
	}{
		{name: "this agent's claim", pick: []string{"down", "enter"}, wantNodes: []string{"b", "c"},
			want:      &api.MoveRequest{Addrs: []string{"192.0.2.10"}, To: "c"},
			wantFlash: "moved 192.0.2.10 from a to c (eth0): asked, released by a +12 ms, live on c +40 ms"},
		{name: "another node's claim, from the fleet pane", keys: []string{"tab", "tab", "tab", "down"}, pick: []string{"enter"},
			wantNodes: []string{"a", "c"}, want: &api.MoveRequest{Addrs: []string{"198.51.100.20"}, To: "a"},
			wantFlash: "moved 198.51.100.20 from b to a"},
		{name: "wraps around", pick: []string{"up", "enter"}, wantNodes: []string{"b", "c"}, want: &api.MoveRequest{Addrs: []string{"192.0.2.10"}, To: "c"}},
		{name: "esc keeps it", pick: []string{"esc"}, wantNodes: []string{"b", "c"}, wantFlash: "kept 192.0.2.10 where it is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := fleetFixture()
			h := connected(t, b, Options{}, 120, 40)
			h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
			h.keys(tt.keys...)
			h.keys("m")
			if h.m.mode != modePick || !slices.Equal(h.m.pick.nodes, tt.wantNodes) {
				t.Fatalf("m: got mode %d and nodes %v, want the picker with %v:\n%s", h.m.mode, h.m.pick.nodes, tt.wantNodes, h.draw())
			}
			h.keys(tt.pick...)
			if tt.want != nil {
				h.until("the move's answer", func() bool { return strings.HasPrefix(h.m.flash, "moved") })
			}
			b.mu.Lock()
			moves := slices.Clone(b.moves)
			b.mu.Unlock()
			switch {
			case tt.want == nil && len(moves) != 0:
				t.Errorf("got moves %+v, want none", moves)
			case tt.want != nil && (len(moves) != 1 || fmt.Sprint(moves[0]) != fmt.Sprint(*tt.want)):
				t.Errorf("got moves %+v, want %+v", moves, *tt.want)
			}
			if h.m.mode != modeNormal || !strings.Contains(h.m.flash, tt.wantFlash) {
				t.Errorf("got mode %d, flash %q; want the picker closed and %q", h.m.mode, h.m.flash, tt.wantFlash)
			}
			if flat := strings.Join(strings.Fields(h.draw()), " "); !strings.Contains(flat, tt.wantFlash) {
				t.Errorf("the view does not show %q:\n%s", tt.wantFlash, h.m.View())
			}
		})
	}
}

func TestMoveKeyRefuses(t *testing.T) {
	t.Parallel()
	t.Run("no store", func(t *testing.T) {
		t.Parallel()
		h := connected(t, fixture(), Options{}, 80, 24)
		h.keys("m")
		if h.m.mode != modeNormal || strings.Contains(h.m.View(), "m move") {
			t.Errorf("without a store: got mode %d, want no picker and no m in the help bar:\n%s", h.m.mode, h.m.View())
		}
	})
	t.Run("the move fails", func(t *testing.T) {
		t.Parallel()
		b := fleetFixture()
		b.moveErr = &api.RemoteError{Status: 409, Code: "bad_input", Message: "move refused: node b has no interface eth0"}
		h := connected(t, b, Options{}, 120, 40)
		h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
		h.keys("m", "enter")
		h.until("the move's answer", func() bool { return h.m.flashErr })
		if want := "move 192.0.2.10 to b: move refused: node b has no interface eth0"; h.m.flash != want {
			t.Errorf("got flash %q, want %q", h.m.flash, want)
		}
	})
	t.Run("no other node", func(t *testing.T) {
		t.Parallel()
		b := fleetFixture()
		b.fleet.Nodes = b.fleet.Nodes[:1]
		h := connected(t, b, Options{}, 120, 40)
		h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
		h.keys("m")
		if h.m.mode != modeNormal || !strings.Contains(h.m.flash, "no live node to move 192.0.2.10 to") {
			t.Errorf("got mode %d, flash %q; want no picker and a reason", h.m.mode, h.m.flash)
		}
	})
}

// TestFleetPolls: the fleet is read once the agent answers with a store,
// then on each fleet tick, and never from an agent without one.
func TestFleetPolls(t *testing.T) {
	t.Parallel()
	for _, withStore := range []bool{true, false} {
		b := fleetFixture()
		if !withStore {
			b.status.Agent.Store = nil
		}
		h := connected(t, b, Options{}, 120, 40)
		h.settle()
		first := b.reads()
		for range 3 {
			if n := h.fire(fleetTickMsg{}); n != 1 {
				t.Fatalf("store %v: %d fleet timers pending, want 1", withStore, n)
			}
			h.settle()
		}
		got, want := []int{first, b.reads()}, []int{1, 4}
		if !withStore {
			want = []int{0, 0}
		}
		if !slices.Equal(got, want) {
			t.Errorf("store %v: fleet reads after connecting and after 3 ticks: got %v, want %v", withStore, got, want)
		}
		if strings.Contains(h.draw(), "Fleet") != withStore {
			t.Errorf("store %v: the fleet pane shows %v, want %v:\n%s", withStore, !withStore, withStore, h.m.View())
		}
	}
}

// TestHeaderShowsCordon: the agent's own node cordoned is said in the
// header, with the time left and the reason, beside the node's name.
func TestHeaderShowsCordon(t *testing.T) {
	t.Parallel()
	b := fleetFixture()
	left := api.Duration(41 * time.Minute)
	b.status.Agent.Store.Cordon = &api.Cordon{Node: "a", Reason: "kernel upgrade", Since: t0.Add(-time.Minute), Until: t0.Add(41 * time.Minute), Left: &left}
	h := connected(t, b, Options{}, 120, 40)
	h.settle()
	if got := h.draw(); !strings.Contains(got, "node a CORDONED 41m0s left (kernel upgrade)") {
		t.Errorf("the header does not say a is cordoned:\n%s", got)
	}
}

// crowded gives the fleet fixture more rows than 80x24 shows: 6 claims
// here, 6 in the store, 6 targets in the traffic pane.
func crowded(b *fakeBackend) {
	for i := range 3 {
		b.status.Claims = append(b.status.Claims, api.Claim{Addr: fmt.Sprintf("192.0.2.%d", 12+i), Interface: "eth0", MAC: "02:00:00:00:00:02",
			State: "holding", ClaimedAt: t0.Add(-time.Hour), RefreshedAt: t0.Add(-time.Hour), GratuitousFrames: 10})
	}
	for i := range 3 {
		a := fmt.Sprintf("198.51.100.%d", 30+i)
		b.fleet.Claims = append(b.fleet.Claims, api.FleetClaim{Addr: a, Node: "b", Interface: "eth0", MAC: "02:00:00:00:0b:02",
			ClaimedAt: t0.Add(-time.Hour), State: api.FleetHolding})
		b.whoHas.Entries = append(b.whoHas.Entries, api.WhoHas{Addr: a, Requests: 1, Rate: 0.1,
			Askers: []api.Asker{{MAC: "02:00:00:00:00:03", Addr: "192.0.2.3"}}, LastSeen: t0})
	}
}

// TestHiddenRowsReachable: at 80x24 each pane with more rows than it
// shows says how many it hides, and its selection, moved with ↓ and ↑,
// reaches every row and is on screen.
func TestHiddenRowsReachable(t *testing.T) {
	t.Parallel()
	b := fleetFixture()
	crowded(b)
	h := connected(t, b, Options{}, 80, 24)
	h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
	tabs := map[pane]int{paneClaims: 0, paneWhoHas: 1, paneFleet: 3}
	titles := map[pane]string{paneClaims: "Claims", paneWhoHas: "Who-has requests", paneFleet: "Fleet"}
	title := func(p pane) string { return titleLine(t, h.draw(), titles[p]) }
	for _, p := range []pane{paneClaims, paneWhoHas, paneFleet} {
		rows := len(h.m.rowKeys[p])
		if got := title(p); !strings.Contains(got, "more below (") || !strings.Contains(got, "↓ to scroll)") {
			t.Errorf("%s pane, %d rows: its title does not say how many are hidden: %q", titles[p], rows, got)
		}
		for range tabs[p] {
			h.keys("tab")
		}
		for i := range rows {
			want := h.m.rowKeys[p][i]
			if got := h.selectedOnScreen(); got != want {
				t.Errorf("%s pane, row %d: %q selected on screen, want %q:\n%s", titles[p], i+1, got, want, h.m.View())
			}
			h.send(keyMsg("down"))
			h.m.render()
		}
		if got := title(p); !strings.Contains(got, "more above (↑ to scroll)") {
			t.Errorf("%s pane at its last row: its title does not say how many are above: %q", titles[p], got)
		}
		for range rows {
			h.send(keyMsg("up"))
		}
		h.m.render()
		if got, want := h.selectedOnScreen(), h.m.rowKeys[p][0]; got != want {
			t.Errorf("%s pane, back up: %q selected, want %q", titles[p], got, want)
		}
		for h.m.focus != paneClaims {
			h.send(keyMsg("tab"))
		}
	}
	// The event log, following its newest line, hides the oldest.
	for i := range 20 {
		h.b.source().ch <- api.Event{Time: t0, Kind: "burst-end", Addr: netip.MustParseAddr("192.0.2.10"), Rounds: i + 1}
	}
	h.until("the events", func() bool { return h.m.log.len() == 23 })
	titles[paneEvents] = "Events"
	if got := title(paneEvents); !regexp.MustCompile(`\d+ more above \(tab, ↑ to scroll\)`).MatchString(got) {
		t.Errorf("event log of 23 lines at 80x24: its title does not say how many are above: %q", got)
	}
}

// grouped puts 192.0.2.10 and 2001:db8::10 in group web, held by a.
func grouped(b *fakeBackend) {
	for i, c := range b.status.Claims {
		if c.Addr == "192.0.2.10" || c.Addr == "2001:db8::10" {
			b.status.Claims[i].Group = "web"
		}
	}
	b.fleet.Claims[0].Group = "web"
	b.fleet.Claims = append(b.fleet.Claims, api.FleetClaim{Addr: "2001:db8::10", Node: "a", Interface: "eth0", MAC: "02:00:00:00:00:02",
		ClaimedAt: t0.Add(-2 * time.Second), State: api.FleetHolding, Standbys: []string{"b"}, Group: "web"})
}

// TestMoveKeyMovesGroup: m on an address of a group offers to move the
// group, and the agent's answer (a move for each of its addresses) reads
// as one line.
func TestMoveKeyMovesGroup(t *testing.T) {
	t.Parallel()
	b := fleetFixture()
	grouped(b)
	h := connected(t, b, Options{}, 120, 40)
	h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
	h.keys("m")
	if v := h.draw(); !strings.Contains(v, "move group web (2 addresses) to:") {
		t.Fatalf("the picker does not offer the group:\n%s", v)
	}
	h.keys("enter")
	h.until("the move's answer", func() bool { return strings.HasPrefix(h.m.flash, "moved") })
	if want := "moved 2 of 2 addresses together a -> b"; h.m.flash != want {
		t.Errorf("flash %q, want %q", h.m.flash, want)
	}
}

// TestHistoryKey: h shows the store's history of the selected claim, of
// its group when it has one, in the events pane's place, read again with
// the fleet; h again goes back to the events. Without a store it is off.
func TestHistoryKey(t *testing.T) {
	t.Parallel()
	b := fleetFixture()
	grouped(b)
	h := connected(t, b, Options{}, 120, 40)
	h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
	h.keys("h")
	h.until("the history", func() bool { return h.m.hist != nil && h.m.hist.loaded })
	v := h.draw()
	for _, want := range []string{"History of group web · 2 changes", "rev 8 192.0.2.10 (group web) taken by standby a", `by ops@a · "service up"`} {
		if !strings.Contains(v, want) {
			t.Errorf("the history pane lacks %q:\n%s", want, v)
		}
	}
	b.mu.Lock()
	got := slices.Clone(b.histories)
	b.mu.Unlock()
	if len(got) == 0 || got[0] != "|web" {
		t.Errorf("history reads %v, want the group web's", got)
	}
	h.keys("h")
	if v := h.draw(); strings.Contains(v, "History of") || !strings.Contains(v, "Events (3)") {
		t.Errorf("h again does not go back to the events:\n%s", v)
	}

	// A claim alone: its address's history; without a store, no h.
	b2 := fleetFixture()
	h2 := connected(t, b2, Options{}, 120, 40)
	h2.until("the fleet", func() bool { return len(h2.m.fleet.Nodes) > 0 })
	h2.keys("h")
	h2.until("the history", func() bool { return h2.m.hist != nil && h2.m.hist.loaded })
	if h2.m.hist.addr != "192.0.2.10" || h2.m.hist.group != "" {
		t.Errorf("history of %q group %q, want 192.0.2.10 alone", h2.m.hist.addr, h2.m.hist.group)
	}
	h3 := connected(t, fixture(), Options{}, 80, 24)
	h3.keys("h")
	if h3.m.hist != nil {
		t.Error("h opened a history without a store")
	}
}

// TestFleetPaneNodeHealth: a node whose renewals stopped is marked in the
// fleet pane with its renewal age, and its address reads fenced, as the
// agent's fleet says (issue 24: a dead node read live and held).
func TestFleetPaneNodeHealth(t *testing.T) {
	t.Parallel()
	b := fleetFixture()
	ago := api.Duration(5 * time.Second)
	b.fleet.Nodes[1].RenewedAgo, b.fleet.Nodes[1].Health = &ago, api.HealthFenced
	b.fleet.Claims[1].State = api.FleetFenced
	h := connected(t, b, Options{}, 120, 40)
	h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
	v := h.draw()
	if !strings.Contains(v, "b (fenced, renewed 5s ago)") || !strings.Contains(v, "fenced") {
		t.Errorf("the fleet pane does not mark b fenced:\n%s", v)
	}
}

// TestFleetPaneStatesWhole: every state the store gives a claim shows
// whole in the fleet pane, at 80 and at 120 columns (taking-over was cut
// to "taking-o…" by a column that fits the claims pane's states).
func TestFleetPaneStatesWhole(t *testing.T) {
	t.Parallel()
	for _, w := range []int{80, 120} {
		for _, state := range []string{api.FleetHolding, api.FleetMoving, api.FleetTakingOver, api.FleetFree, api.FleetUnknown, api.FleetUnrenewed, api.FleetFenced} {
			b := fleetFixture()
			b.fleet.Claims[0].State = state
			h := connected(t, b, Options{}, w, 40)
			h.until("the fleet", func() bool { return len(h.m.fleet.Claims) > 0 })
			row := ""
			for _, line := range strings.Split(h.draw(), "\n") {
				if strings.Contains(line, b.fleet.Claims[0].Addr) && strings.Contains(line, b.fleet.Claims[0].Node+" ") && !strings.Contains(line, "eth1") {
					row = line
				}
			}
			if !slices.Contains(strings.Fields(row), state) {
				t.Errorf("at %d columns, a claim %s: its fleet row %q does not say %s whole", w, state, row, state)
			}
		}
	}
}

// TestStoreAwayIsSaid: while the agent cannot reach the store the header
// says so and for how long, then that it answers on failsafe and on whose
// word, and a node that promised an owner says to whom until when. The
// fleet pane, which shows the last read that worked, marks it stale with
// its age and why, kept whole at 80 columns (the title's text gives way).
// Once the store is back neither is said.
func TestStoreAwayIsSaid(t *testing.T) {
	t.Parallel()
	b := fleetFixture()
	h := connected(t, b, Options{Location: time.UTC}, 160, 40)
	h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
	if v := h.draw(); strings.Contains(v, "stale") || strings.Contains(v, "UNREACHABLE") {
		t.Fatalf("the store reachable, the view says otherwise:\n%s", v)
	}
	poll := func() {
		h.fire(pollTickMsg{})
		h.fire(fleetTickMsg{})
		h.settle()
	}
	set := func(f func(s *api.Store)) {
		b.mu.Lock()
		f(b.status.Agent.Store)
		b.mu.Unlock()
	}

	// The store goes: the agent says so, and the fleet's reads fail.
	read := h.m.fleetAt
	h.now = read.Add(3 * time.Second)
	set(func(s *api.Store) { s.Renewed, s.Unreachable = h.now.Add(-2300*time.Millisecond), true })
	b.mu.Lock()
	b.fleetErr = errors.New("read the fleet: context deadline exceeded")
	b.mu.Unlock()
	poll()
	v := h.draw()
	if !strings.Contains(v, "node a STORE UNREACHABLE 2.3s") {
		t.Errorf("the header does not say the store is unreachable, for 2.3s:\n%s", v)
	}
	if got := titleLine(t, v, "Fleet"); !strings.Contains(got, "stale 3s: store unreachable") {
		t.Errorf("the fleet pane's title %q does not say it is stale 3s, the store unreachable", got)
	}

	// On failsafe, and a promise made.
	set(func(s *api.Store) {
		s.Failsafe = &api.Failsafe{Since: h.now.Add(-time.Second), AckedBy: []string{"b", "c"}, AckedAt: h.now}
		s.Promised = &api.Promise{Owner: "c", Until: h.now.Add(2 * time.Second)}
	})
	poll()
	v = h.draw()
	for _, want := range []string{"node a ON FAILSAFE since 10:00:02 (acked by b, c) PROMISED c until 10:00:05"} {
		if !strings.Contains(v, want) {
			t.Errorf("the header does not say %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "STORE UNREACHABLE") {
		t.Errorf("on failsafe the header still says STORE UNREACHABLE:\n%s", v)
	}
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	if got := titleLine(t, h.draw(), "Fleet"); !strings.HasSuffix(strings.TrimRight(got, " ─"), "stale 3s: store unreachable") {
		t.Errorf("at 80 columns the fleet pane's title %q does not end whole with its stale mark", got)
	}

	// Back: the store acknowledges again, and the fleet is read.
	h.now = h.now.Add(time.Second)
	set(func(s *api.Store) { s.Renewed, s.Unreachable, s.Failsafe, s.Promised = h.now, false, nil, nil })
	b.mu.Lock()
	b.fleetErr = nil
	b.mu.Unlock()
	poll()
	v = h.draw()
	for _, no := range []string{"stale", "UNREACHABLE", "FAILSAFE", "PROMISED"} {
		if strings.Contains(v, no) {
			t.Errorf("the store back, the view still says %q:\n%s", no, v)
		}
	}
}

// TestFleetReadFailureIsShown: a failed read of the fleet, the claims of
// the last read shown, is said on the fleet pane's first line, so that at
// 80 columns it is read whole (the tryout's title was cut to "3 nodes: a,
// b, c · f…", the cut word the error).
func TestFleetReadFailureIsShown(t *testing.T) {
	t.Parallel()
	b := fleetFixture()
	h := connected(t, b, Options{Location: time.UTC}, 80, 24)
	h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 && len(h.m.fleet.Claims) > 0 })
	b.mu.Lock()
	b.fleetErr = errors.New("the store at http://192.0.2.1:2379 refused vip: check --store-user")
	b.mu.Unlock()
	h.fire(fleetTickMsg{})
	h.settle()
	v := h.draw()
	if !strings.Contains(v, "the store at http://192.0.2.1:2379 refused vip: check --store-user") {
		t.Errorf("at 80x24 the view does not say whole why the fleet's read failed:\n%s", v)
	}
	if lines := strings.Count(v, "\n"); lines > 24 {
		t.Errorf("the view is %d lines at 80x24:\n%s", lines, v)
	}
}
