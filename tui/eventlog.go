package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/event"
)

// eventLog keeps the latest events, a fixed number of them, whatever the
// rate they come at.
type eventLog struct {
	buf   []api.Event
	start int // index of the oldest event
	n     int
	total uint64 // events ever pushed
}

func newEventLog(size int) eventLog { return eventLog{buf: make([]api.Event, size)} }

func (l *eventLog) push(ev api.Event) {
	l.total++
	if l.n < len(l.buf) {
		l.buf[(l.start+l.n)%len(l.buf)] = ev
		l.n++
		return
	}
	l.buf[l.start] = ev
	l.start = (l.start + 1) % len(l.buf)
}

// len is how many events are kept.
func (l *eventLog) len() int { return l.n }

// at returns the i-th kept event, oldest first.
func (l *eventLog) at(i int) api.Event { return l.buf[(l.start+i)%len(l.buf)] }

// eventLines are the log's lines that the interface and the filter let
// through, oldest first.
func (m *Model) eventLines(w int) []string {
	lines := make([]string, 0, m.log.len())
	f := strings.ToLower(m.filter)
	for i := range m.log.len() {
		ev := m.log.at(i)
		if m.opt.Interface != "" && ev.Interface != "" && ev.Interface != m.opt.Interface {
			continue
		}
		line := m.eventLine(ev)
		if f != "" && !strings.Contains(strings.ToLower(line), f) {
			continue
		}
		line = ansi.Truncate(line, w-2, "…")
		if ev.Kind == event.Conflict || ev.Kind == event.Missed || ev.Kind == kindGap {
			line = m.st.errMsg.Render(line)
		}
		lines = append(lines, "  "+line)
	}
	return lines
}

// eventsView draws the event log (or the history) in h lines, and says
// what it leaves off for the title.
func (m *Model) eventsView(lines []string, w, h int) (string, string) {
	if len(lines) == 0 {
		return lipgloss.NewStyle().Height(h).MaxHeight(h).Render(m.st.dim.Render("  no events yet")), ""
	}
	m.events.Width, m.events.Height = w, h
	m.events.SetContent(strings.Join(lines, "\n"))
	if m.followLog {
		m.events.GotoBottom()
	}
	above := m.events.YOffset
	return m.events.View(), m.hiddenNote(paneEvents, above, max(len(lines)-above-h, 0))
}

func (m *Model) eventLine(ev api.Event) string {
	if ev.Kind == kindGap {
		// Its message has the times.
		return ev.Message
	}
	return ev.Time.In(m.opt.Location).Format("15:04:05") + " " + ev.Summary()
}
