package tui

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/vipctl/vip/internal/api"
)

// t0 is the fake clock's time.
var t0 = time.Date(2025, 1, 2, 10, 0, 0, 0, time.UTC)

const testSocket = "/run/vip/vip.sock"

// fakeBackend is an agent in memory. down makes it unreachable: Status
// and Events fail, and open streams end.
type fakeBackend struct {
	mu        sync.Mutex
	down      bool
	status    api.StatusResponse
	whoHas    api.WhoHasResponse
	whoHasErr error
	sources   []*fakeSource
	since     []time.Time // each stream's since, in the order opened
	claims    []api.ClaimRequest
	releases  []api.AddrsRequest
	refreshes []api.AddrsRequest
	claimErr  error
	// claimRefused, when set, answers every claim with these refusals and
	// no claim, as an agent does when another node holds each address.
	claimRefused []api.Refused
	fleet        api.FleetResponse
	fleetErr     error
	fleetReads   int
	// fleetHold, when set, holds each fleet read until it is closed.
	fleetHold chan struct{}
	moves     []api.MoveRequest
	moveErr   error
	histories []string // the history reads, addr|group
}

func (f *fakeBackend) unreachable() error {
	return fmt.Errorf("%w on %s", api.ErrUnreachable, testSocket)
}

func (f *fakeBackend) Status(context.Context) (api.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return api.StatusResponse{}, f.unreachable()
	}
	return f.status, nil
}

func (f *fakeBackend) WhoHas(context.Context) (api.WhoHasResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return api.WhoHasResponse{}, f.unreachable()
	}
	return f.whoHas, f.whoHasErr
}

func (f *fakeBackend) Events(_ context.Context, since time.Time) (EventSource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, f.unreachable()
	}
	f.since = append(f.since, since)
	s := &fakeSource{ch: make(chan api.Event, 1024), done: make(chan struct{})}
	f.sources = append(f.sources, s)
	return s, nil
}

func (f *fakeBackend) Claim(_ context.Context, r api.ClaimRequest) (api.ClaimResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, r)
	if f.claimErr != nil {
		return api.ClaimResponse{}, f.claimErr
	}
	if f.claimRefused != nil {
		return api.ClaimResponse{Claims: []api.Claim{}, Refused: f.claimRefused}, nil
	}
	c := api.Claim{Addr: r.Addrs[0], Interface: r.Interface, MAC: "02:00:00:00:00:02", State: "announcing", ClaimedAt: t0, RefreshedAt: t0}
	return api.ClaimResponse{Claims: []api.Claim{c}}, nil
}

func (f *fakeBackend) Release(_ context.Context, r api.AddrsRequest) (api.ReleaseResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases = append(f.releases, r)
	return api.ReleaseResponse{Released: r.Addrs}, nil
}

func (f *fakeBackend) Refresh(_ context.Context, r api.AddrsRequest) (api.RefreshResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshes = append(f.refreshes, r)
	return api.RefreshResponse{Refreshed: r.Addrs}, nil
}

func (f *fakeBackend) Fleet(context.Context) (api.FleetResponse, error) {
	f.mu.Lock()
	hold := f.fleetHold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fleetReads++
	if f.down {
		return api.FleetResponse{}, f.unreachable()
	}
	return f.fleet, f.fleetErr
}

// Move moves at once: the owner releases after 12 ms, the target is live
// after 40.
func (f *fakeBackend) Move(_ context.Context, r api.MoveRequest) (api.MoveResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moves = append(f.moves, r)
	if f.moveErr != nil {
		return api.MoveResponse{}, f.moveErr
	}
	// As the mover does, a move of a group's address moves the group.
	from, group := "", ""
	for _, c := range f.fleet.Claims {
		if c.Addr == r.Addrs[0] {
			from, group = c.Node, c.Group
		}
	}
	addrs := r.Addrs[:1]
	for _, c := range f.fleet.Claims {
		if group != "" && c.Group == group && c.Addr != r.Addrs[0] {
			addrs = append(addrs, c.Addr)
		}
	}
	var resp api.MoveResponse
	for _, a := range addrs {
		resp.Moves = append(resp.Moves, api.MoveResult{Addr: a, From: from, To: r.To, Interface: "eth0", Asked: t0,
			ReleasedMS: api.Millis(12 * time.Millisecond), LiveMS: api.Millis(40 * time.Millisecond), OK: true})
	}
	return resp, nil
}

func (f *fakeBackend) History(_ context.Context, addr, group string) (api.HistoryResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.histories = append(f.histories, addr+"|"+group)
	return api.HistoryResponse{Revision: 9, Changes: []api.HistoryChange{
		{Rev: 5, Time: t0.Add(-time.Hour), Kind: "claim", Addr: "192.0.2.10", Node: "a", By: "ops@a", Reason: "service up",
			Summary: "192.0.2.10 (group web) claimed by a"},
		{Rev: 8, Time: t0.Add(-time.Minute), Kind: "standby-takeover", Addr: "192.0.2.10", Node: "a", From: "b",
			Summary: "192.0.2.10 (group web) taken by standby a (the lease of b expired)"},
	}}, nil
}

// reads counts the fleet's reads so far.
func (f *fakeBackend) reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fleetReads
}

// setDown makes the agent go away (ending its streams) or come back.
func (f *fakeBackend) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	if down {
		for _, s := range f.sources {
			s.Close()
		}
	}
}

func (f *fakeBackend) opened() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sources)
}

// source returns the latest event stream.
func (f *fakeBackend) source() *fakeSource {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sources[len(f.sources)-1]
}

type fakeSource struct {
	ch   chan api.Event
	done chan struct{}
	once sync.Once
}

func (s *fakeSource) Next() (api.Event, error) {
	select {
	case ev := <-s.ch:
		return ev, nil
	case <-s.done:
		return api.Event{}, io.EOF
	}
}

func (s *fakeSource) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

// timerMsg is a timer the model set; the harness fires it when told.
type timerMsg struct {
	d   time.Duration
	msg tea.Msg
}

// harness runs a model as bubbletea would, commands on goroutines, but with
// a fake clock: timers wait in a list until the test fires them.
type harness struct {
	t      *testing.T
	m      *Model
	b      *fakeBackend
	msgs   chan tea.Msg
	timers []timerMsg
	now    time.Time
	quit   bool
}

func asciiRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	r.SetHasDarkBackground(true)
	return r
}

func newHarness(t *testing.T, b *fakeBackend, o Options, w, h int) *harness {
	t.Helper()
	hs := &harness{t: t, b: b, msgs: make(chan tea.Msg, 1<<16), now: t0}
	o.Socket = testSocket
	o.Renderer = asciiRenderer()
	o.Location = time.UTC
	hs.m = New(context.Background(), b, o)
	hs.m.clock = clock{
		now: func() time.Time { return hs.now },
		after: func(d time.Duration, msg tea.Msg) tea.Cmd {
			return func() tea.Msg { return timerMsg{d: d, msg: msg} }
		},
	}
	t.Cleanup(hs.m.Close)
	hs.send(tea.WindowSizeMsg{Width: w, Height: h})
	hs.exec(hs.m.Init())
	return hs
}

func (h *harness) exec(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() { h.msgs <- cmd() }()
}

func (h *harness) handle(msg tea.Msg) {
	switch msg := msg.(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			h.exec(c)
		}
	case timerMsg:
		h.timers = append(h.timers, msg)
	case tea.QuitMsg:
		h.quit = true
	default:
		h.send(msg)
	}
}

func (h *harness) send(msg tea.Msg) {
	_, cmd := h.m.Update(msg)
	h.exec(cmd)
}

// settle handles messages until none has come for a while.
func (h *harness) settle() {
	for {
		select {
		case msg := <-h.msgs:
			h.handle(msg)
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

// until handles messages until cond holds.
func (h *harness) until(why string, cond func() bool) {
	h.t.Helper()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case msg := <-h.msgs:
			h.handle(msg)
		case <-deadline:
			h.t.Fatalf("not within 5s: %s; view:\n%s", why, h.m.View())
		}
	}
}

// fire delivers the pending timers whose message is like sample, and
// reports how many.
func (h *harness) fire(sample tea.Msg) int {
	var keep []timerMsg
	var due []tea.Msg
	for _, tm := range h.timers {
		if fmt.Sprintf("%T", tm.msg) == fmt.Sprintf("%T", sample) {
			due = append(due, tm.msg)
		} else {
			keep = append(keep, tm)
		}
	}
	h.timers = keep
	for _, msg := range due {
		h.send(msg)
	}
	return len(due)
}

// pending counts the timers waiting whose message is like sample.
func (h *harness) pending(sample tea.Msg) (n int, d time.Duration) {
	for _, tm := range h.timers {
		if fmt.Sprintf("%T", tm.msg) == fmt.Sprintf("%T", sample) {
			n, d = n+1, tm.d
		}
	}
	return n, d
}

// draw fires the render tick and settles, as the screen would show it.
func (h *harness) draw() string {
	h.settle()
	h.fire(renderTickMsg{})
	h.settle()
	h.fire(renderTickMsg{})
	return h.m.View()
}

func (h *harness) keys(ks ...string) {
	for _, k := range ks {
		h.send(keyMsg(k))
		h.settle()
	}
}

// selectedOnScreen is the first cell of the row the view marks selected.
func (h *harness) selectedOnScreen() string {
	for _, l := range strings.Split(h.m.View(), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == selectMark {
			return f[1]
		}
	}
	return ""
}

// titleLine is the line of view with the title of the pane named name.
func titleLine(t *testing.T, view, name string) string {
	t.Helper()
	for _, l := range strings.Split(view, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " ▸"), name) {
			return l
		}
	}
	t.Fatalf("no %s title:\n%s", name, view)
	return ""
}

// typeText sends each rune of s as a key.
func (h *harness) typeText(s string) {
	for _, r := range s {
		h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	h.settle()
}

func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "shift+tab":
		return tea.KeyMsg{Type: tea.KeyShiftTab}
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// fixture is an agent holding three addresses, one of them contested. As
// from a real capture, which leaves out the frames this host sends, no
// traffic entry lists the agent's own MAC as answering.
func fixture() *fakeBackend {
	ours := "02:00:00:00:00:02"
	rivalMAC := "02:00:00:00:00:99"
	return &fakeBackend{
		status: api.StatusResponse{
			Agent: api.Agent{PID: 4242, Version: "test", Socket: testSocket, Started: t0.Add(-time.Hour)},
			Claims: []api.Claim{
				{Addr: "2001:db8::10", Interface: "eth0", MAC: ours, State: "conflict", ClaimedAt: t0.Add(-time.Minute), RefreshedAt: t0.Add(-time.Minute),
					Answered: 4, GratuitousFrames: 15, Claimers: []api.Claimer{
						{MAC: rivalMAC, Kind: "advertisement", FirstSeen: t0.Add(-95 * time.Second), LastSeen: t0.Add(-2 * time.Second), Count: 7},
					}},
				{Addr: "192.0.2.11", Interface: "eth1", MAC: "02:00:00:00:01:02", State: "holding", ClaimedAt: t0.Add(-time.Hour), RefreshedAt: t0.Add(-time.Hour),
					Answered: 0, GratuitousFrames: 10},
				{Addr: "192.0.2.10", Interface: "eth0", MAC: ours, State: "announcing", ClaimedAt: t0.Add(-2 * time.Second), RefreshedAt: t0.Add(-2 * time.Second),
					WindowEnd: t0.Add(3200 * time.Millisecond), WindowRemaining: api.Duration(3200 * time.Millisecond), Answered: 12, GratuitousFrames: 6,
					Responder: "ebpf (tcx)", Traffic: &api.ClaimTraffic{Packets: 420, Bytes: 41_160, PacketsPerSecond: 14.2, BytesPerSecond: 1_391}},
			},
		},
		whoHas: api.WhoHasResponse{Entries: []api.WhoHas{
			{Addr: "192.0.2.10", Requests: 3, Rate: 1, Askers: []api.Asker{{MAC: "02:00:00:00:00:03", Addr: "192.0.2.3", Count: 3}},
				Held: true, LastSeen: t0.Add(-time.Second)},
			{Addr: "192.0.2.77", Requests: 40, Rate: 8.5, Askers: []api.Asker{{MAC: "02:00:00:00:00:03", Addr: "192.0.2.3"}, {MAC: "02:00:00:00:00:04", Addr: "192.0.2.4"}},
				LastSeen: t0.Add(-3 * time.Second)},
			{Addr: "2001:db8::10", Requests: 5, Rate: 0.5, Askers: []api.Asker{{MAC: "02:00:00:00:00:03", Addr: "2001:db8::3"}},
				AnsweredBy: []api.Answerer{{MAC: rivalMAC, Count: 2}}, Held: true, LastSeen: t0},
		}},
	}
}

// fleetFixture is fixture's agent guarded by a store, node a of three:
// it holds 192.0.2.10 (b stands by), b holds 198.51.100.20, and nobody
// holds 2001:db8::20, which c stands by for.
func fleetFixture() *fakeBackend {
	b := fixture()
	b.status.Agent.Store = &api.Store{Endpoints: []string{"http://192.0.2.5:2379"}, Prefix: "/vip/", Node: "a", Lease: "694d7a1c",
		LeaseTTL: api.Duration(6 * time.Second), FenceAfter: api.Duration(4500 * time.Millisecond), Renewed: t0.Add(-time.Second)}
	node := func(n string) api.FleetNode {
		return api.FleetNode{Node: n, Version: "test", Host: n + ".example", LeaseTTL: api.Duration(6 * time.Second),
			Interfaces: []api.FleetInterface{{Name: "eth0", Up: true}}}
	}
	b.fleet = api.FleetResponse{Revision: 7, Nodes: []api.FleetNode{node("a"), node("b"), node("c")}, Claims: []api.FleetClaim{
		{Addr: "192.0.2.10", Node: "a", Interface: "eth0", MAC: "02:00:00:00:00:02", ClaimedAt: t0.Add(-2 * time.Second), State: api.FleetHolding, Standbys: []string{"b"}},
		{Addr: "198.51.100.20", Node: "b", Interface: "eth0", MAC: "02:00:00:00:0b:02", ClaimedAt: t0.Add(-time.Hour), State: api.FleetHolding, Home: "a"},
		{Addr: "2001:db8::20", State: api.FleetFree, Standbys: []string{"c"}},
	}, Cordons: []api.Cordon{{Node: "c", Reason: "kernel upgrade", Since: t0.Add(-time.Minute)}}}
	return b
}

func fixtureEvents() []api.Event {
	a10, a6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	return []api.Event{
		{Time: t0.Add(-2 * time.Second), Kind: "claim", Addr: a10, Interface: "eth0", MAC: "02:00:00:00:00:02"},
		{Time: t0.Add(-2 * time.Second), Kind: "burst-start", Addr: a10, Interface: "eth0"},
		{Time: t0.Add(-time.Second), Kind: "conflict", Addr: a6, Interface: "eth0", MAC: "02:00:00:00:00:99", Message: "02:00:00:00:00:99 answers for 2001:db8::10"},
	}
}
