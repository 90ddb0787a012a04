package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/textinput"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/event"
)

// Options configure the view.
type Options struct {
	// Socket is the agent's socket, named when the agent is gone.
	Socket string
	// Interface, when set, limits the panes to claims on that interface
	// and is the interface of a claim typed without one.
	Interface string
	// PollEvery is how often status and traffic are asked for;
	// DefaultPollEvery when zero.
	PollEvery time.Duration
	// Renderer makes the styles; when nil, one for Out, whose colour
	// profile follows the terminal and NO_COLOR.
	Renderer *lipgloss.Renderer
	// In and Out are the terminal, for Run. When In is nil the keyboard
	// is read from the controlling terminal; when Out is nil the view goes
	// to standard output.
	In  io.Reader
	Out io.Writer
	// Location is where times are shown; time.Local when nil.
	Location *time.Location
}

// pane is one of the view's panes, in tab order.
type pane int

const (
	paneClaims pane = iota
	paneWhoHas
	paneClaimers
	// paneFleet shows only while the agent has a store.
	paneFleet
	paneEvents
	paneCount
)

// mode says what the keyboard is doing.
type mode int

const (
	modeNormal  mode = iota
	modeClaim        // typing an address to claim
	modeFilter       // typing a filter
	modeConfirm      // a release waits for y or n
	modePick         // a move waits for its target node
)

// whoHasSort is the order of the traffic pane, changed with s.
type whoHasSort int

const (
	sortRate whoHasSort = iota
	sortRequests
	sortTarget
	sortLastSeen
	sortCount
)

func (s whoHasSort) String() string {
	return [...]string{"rate", "requests", "target", "last seen"}[s]
}

type connState int

const (
	connecting connState = iota
	connUp
	connDown
)

// Model is the view's state. Create it with New; it is a tea.Model.
type Model struct {
	ctx    context.Context
	cancel context.CancelFunc
	b      Backend
	opt    Options
	clock  clock
	pumps  *pumps
	keys   keymap
	st     styles
	help   help.Model

	width, height int

	// The connection.
	conn    connState
	gen     int
	attempt int
	lastErr error
	stream  *stream
	polling bool
	// downSince is when the agent was first found unreachable, zero while
	// it answers; gapFrom, when the event stream of a connection that was
	// up ended: the events from then until the next connection are not
	// seen, as the agent's API has no replay.
	downSince, gapFrom time.Time
	// stale asks for a poll at the next render tick: an event said the
	// snapshot changed.
	stale bool

	// What the agent said.
	agent      api.Agent
	claims     []api.Claim
	snapAt     time.Time // when claims arrived, for the window countdown
	whoHas     api.WhoHasResponse
	whoHasNote string // why there is no traffic, when there is none
	log        eventLog
	// The fleet, while the agent has a store.
	fleet        api.FleetResponse
	fleetNote    string    // why the fleet is not shown, when it is not
	fleetAt      time.Time // when the fleet was last read
	fleetFailed  bool      // the last fleet read failed: the pane shows an older one
	fleetPolling bool

	// The view.
	focus       pane
	mode        mode
	input       textinput.Model
	inputErr    string
	confirmAddr string
	pick        picker
	filter      string
	sort        whoHasSort
	flash       string
	flashErr    bool
	// Per table pane (claims, traffic, claimers, fleet): the rows' keys
	// as last drawn, the selected row's key (kept across refreshes), its
	// index, the first row shown and how many are.
	rowKeys  [paneEvents][]string
	selected [paneEvents]string
	cursor   [paneEvents]int
	offset   [paneEvents]int
	page     [paneEvents]int
	// hist, while open, shows the store's history of the selected claim
	// in the events pane's place.
	hist      *historyPane
	events    viewport.Model
	followLog bool // the event log sticks to its newest line

	// Drawing: messages mark the model dirty and the render tick draws.
	dirty       bool
	tickPending bool
	frame       string
	renders     int
}

// New returns the view of the agent behind b. Close it once the program
// has ended.
func New(ctx context.Context, b Backend, o Options) *Model {
	if o.PollEvery <= 0 {
		o.PollEvery = DefaultPollEvery
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.Renderer == nil {
		o.Renderer = lipgloss.DefaultRenderer()
		if o.Out != nil {
			o.Renderer = lipgloss.NewRenderer(o.Out)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &Model{
		ctx:       ctx,
		cancel:    cancel,
		b:         b,
		opt:       o,
		clock:     realClock(),
		pumps:     &pumps{},
		keys:      defaultKeymap(),
		st:        newStyles(o.Renderer),
		log:       newEventLog(logSize),
		followLog: true,
		width:     80,
		height:    24,
	}
	m.help = help.New()
	m.help.Styles = m.st.help
	m.input = textinput.New()
	m.input.PromptStyle = m.st.prompt
	m.input.Cursor.Style = m.st.selected.Reverse(true)
	m.input.CharLimit = 120
	// A steady cursor: a blinking one would redraw twice a second.
	_ = m.input.Cursor.SetMode(cursor.CursorStatic)
	m.events = viewport.New(80, 5)
	m.events.KeyMap = viewport.KeyMap{Up: m.keys.Up, Down: m.keys.Down, PageUp: m.keys.PageUp, PageDown: m.keys.PageDn}
	m.events.MouseWheelEnabled = false
	m.render()
	return m
}

// Close stops the event stream and waits for its reader.
func (m *Model) Close() {
	m.cancel()
	if m.stream != nil {
		m.stream.stop()
	}
	m.pumps.close()
}

// Init connects to the agent.
func (m *Model) Init() tea.Cmd {
	return connect(m.ctx, m.b, m.pumps, m.gen, time.Time{})
}

// Update applies a message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.render()
		return m, nil
	case tea.KeyMsg:
		cmd := m.key(msg)
		m.render()
		return m, cmd
	case renderTickMsg:
		return m, m.renderTick()
	case connectedMsg:
		if msg.gen != m.gen {
			msg.stream.stop()
			return m, nil
		}
		m.conn, m.attempt, m.lastErr = connUp, 0, nil
		m.stream = msg.stream
		prev := m.agent
		m.applyStatus(msg.status)
		m.noteGap(prev, msg.status.Agent)
		m.polling = true
		return m, tea.Batch(m.stream.wait(m.gen), poll(m.ctx, m.b, m.gen),
			m.clock.after(m.opt.PollEvery, pollTickMsg{gen: m.gen}), m.fleetTick(), m.markDirty())
	case connectFailedMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		return m, m.goDown(msg.err)
	case retryMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		return m, connect(m.ctx, m.b, m.pumps, m.gen, m.gapFrom)
	case pollTickMsg:
		if msg.gen != m.gen || m.conn != connUp {
			return m, nil
		}
		next := m.clock.after(m.opt.PollEvery, pollTickMsg{gen: m.gen})
		if m.polling {
			return m, next
		}
		m.polling = true
		return m, tea.Batch(poll(m.ctx, m.b, m.gen), next)
	case fleetTickMsg:
		if msg.gen != m.gen || m.conn != connUp {
			return m, nil
		}
		return m, m.fleetTick()
	case fleetMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		m.fleetPolling = false
		m.applyFleet(msg)
		return m, tea.Batch(m.markDirty(), m.historyAgain())
	case snapshotMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		m.polling = false
		return m, m.applySnapshot(msg)
	case eventsMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		for _, ev := range msg.events {
			m.applyEvent(ev)
		}
		if msg.end != nil {
			if m.ctx.Err() != nil {
				return m, nil
			}
			return m, m.goDown(endedErr(msg.end))
		}
		return m, tea.Batch(m.stream.wait(m.gen), m.markDirty())
	case claimDoneMsg:
		return m, m.claimDone(msg)
	case releaseDoneMsg:
		return m, m.releaseDone(msg)
	case refreshDoneMsg:
		return m, m.refreshDone(msg)
	case moveDoneMsg:
		return m, m.moveDone(msg)
	case historyMsg:
		m.applyHistory(msg)
		return m, m.markDirty()
	}
	// Anything else (the cursor's blink) belongs to the prompt.
	if m.mode == modeClaim || m.mode == modeFilter {
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		return m, tea.Batch(cmd, m.markDirty())
	}
	return m, nil
}

// View returns the latest frame; frames are made by render.
func (m *Model) View() string { return m.frame }

// markDirty asks for a frame at the next render tick.
func (m *Model) markDirty() tea.Cmd {
	m.dirty = true
	if m.tickPending {
		return nil
	}
	m.tickPending = true
	return m.clock.after(frameEvery, renderTickMsg{})
}

func (m *Model) renderTick() tea.Cmd {
	m.tickPending = false
	var cmds []tea.Cmd
	if m.stale && m.conn == connUp && !m.polling {
		m.stale, m.polling = false, true
		cmds = append(cmds, poll(m.ctx, m.b, m.gen))
	}
	if m.dirty {
		m.render()
	}
	// Countdowns move by themselves.
	if m.counting() {
		cmds = append(cmds, m.markDirty())
	}
	return tea.Batch(cmds...)
}

// counting reports whether the frame shows a countdown: a window's, or
// the age of the data while the agent is unreachable.
func (m *Model) counting() bool {
	if m.conn == connDown {
		return true
	}
	for _, c := range m.claims {
		if c.WindowRemaining > 0 && m.windowLeft(c) > 0 {
			return true
		}
	}
	return false
}

// goDown says the agent is gone and schedules a reconnection.
func (m *Model) goDown(err error) tea.Cmd {
	if m.stream != nil {
		m.stream.stop()
		m.stream = nil
	}
	now := m.clock.now()
	if m.conn == connUp {
		m.gapFrom = now
	}
	if m.downSince.IsZero() {
		m.downSince = now
		// The footer says the agent is gone, not what the last action
		// did before it went.
		m.flash, m.flashErr = "", false
	}
	m.gen++
	// The answers awaited belong to the old connection and are dropped
	// when they come: none is awaited on the new one.
	m.conn, m.polling, m.stale, m.fleetPolling = connDown, false, false, false
	m.lastErr = err
	m.attempt++
	return tea.Batch(m.clock.after(backoff(m.attempt), retryMsg{gen: m.gen}), m.markDirty())
}

// noteGap, on a connection after one that was up, says in the event log
// how long the agent was unreachable and that the events it kept since
// follow (the stream was opened from then), naming a restart (the agent
// was prev, is cur); and in the footer that the agent is back.
func (m *Model) noteGap(prev, cur api.Agent) {
	now := m.clock.now()
	if !m.downSince.IsZero() && !m.gapFrom.IsZero() {
		at := func(t time.Time) string { return t.In(m.opt.Location).Format("15:04:05") }
		msg := fmt.Sprintf("the agent was away from %s to %s: the events it kept since follow", at(m.gapFrom), at(now))
		if prev.PID != 0 && (prev.PID != cur.PID || !prev.Started.Equal(cur.Started)) {
			msg = fmt.Sprintf("the agent was away from %s to %s: it restarted at %s (pid %d, was %d); its events since follow",
				at(m.gapFrom), at(now), at(cur.Started), cur.PID, prev.PID)
		}
		m.log.push(api.Event{Time: m.gapFrom, Kind: kindGap, Message: msg})
		m.setFlash(false, "reconnected to the agent at %s after %s away; status, fleet and the events missed read again",
			at(now), now.Sub(m.downSince).Round(time.Second))
	}
	m.downSince, m.gapFrom = time.Time{}, time.Time{}
}

// kindGap is the event log's line for events the view did not see; the
// agent never sends it.
const kindGap event.Kind = "not-seen"

func (m *Model) applyStatus(st api.StatusResponse) {
	m.agent = st.Agent
	m.keys.Move.SetEnabled(m.hasFleet())
	m.keys.History.SetEnabled(m.hasFleet())
	if !m.hasFleet() {
		m.fleet, m.fleetNote = api.FleetResponse{}, ""
		if m.focus == paneFleet {
			m.focus = paneEvents
		}
	}
	m.claims = st.Claims
	sortClaims(m.claims)
	m.snapAt = m.clock.now()
}

func (m *Model) applySnapshot(msg snapshotMsg) tea.Cmd {
	if msg.statusErr != nil {
		if gone(msg.statusErr) {
			return m.goDown(msg.statusErr)
		}
		m.setFlash(true, "status: %v", msg.statusErr)
		return m.markDirty()
	}
	m.applyStatus(msg.status)
	var remote *api.RemoteError
	switch {
	case msg.whoHasErr == nil:
		m.whoHas, m.whoHasNote = msg.whoHas, ""
		if len(m.whoHas.Entries) == 0 {
			for _, c := range m.whoHas.Captures {
				if c.Error != "" {
					m.whoHasNote = fmt.Sprintf("no capture on %s: %s", c.Interface, c.Error)
					break
				}
				if c.Scope == "held" || c.Scope == "held-userspace" {
					// Not an error: say why requests for other
					// addresses do not show.
					m.whoHasNote = "no who-has requests for the held addresses (the agent watches only those; vip agent --watch-all for the whole segment)"
				}
			}
		}
	case errors.As(msg.whoHasErr, &remote) && remote.Code == api.CodeNotFound:
		m.whoHas, m.whoHasNote = api.WhoHasResponse{}, "this agent does not report who-has requests (no /v1/whohas)"
	default:
		m.whoHas, m.whoHasNote = api.WhoHasResponse{}, "who-has: "+msg.whoHasErr.Error()
	}
	return m.markDirty()
}

// applyEvent logs ev and applies what it says at once where it can; for
// the rest it asks for a poll.
func (m *Model) applyEvent(ev api.Event) {
	m.log.push(ev)
	switch ev.Kind {
	case event.Release:
		a := ev.Addr.String()
		for i, c := range m.claims {
			if c.Addr == a {
				m.claims = append(m.claims[:i:i], m.claims[i+1:]...)
				break
			}
		}
		m.stale = true
	case event.Missed:
	default:
		m.stale = true
	}
}

func (m *Model) setFlash(isErr bool, format string, args ...any) {
	m.flash, m.flashErr = fmt.Sprintf(format, args...), isErr
}
