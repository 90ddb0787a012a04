package tui

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/table"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/vipctl/vip/internal/api"
)

// Column widths. The address columns take what is left, up to the
// longest IPv6 address.
const (
	markW    = 1
	ifaceW   = 9
	stateW   = 10
	windowW  = 6
	countW   = 8
	gratW    = 10
	conflW   = 9
	trafW    = 8
	rateW    = 7
	macW     = 17
	kindW    = 16
	ageW     = 7
	timesW   = 6
	minAddrW = 12
	// minAskersW holds an asker count and the start of the first asker.
	minAskersW = 10
	maxAddrW   = 39
)

// selectMark marks the selected row of the focused pane, in words as well
// as colour.
const selectMark = "›"

// render makes a frame of the whole view from the model.
func (m *Model) render() {
	m.renders++
	m.dirty = false
	w, h := max(m.width, 20), max(m.height, 5)
	m.help.Width = w
	header := m.headerView(w)
	footer := m.footerView(w)
	body := m.panesView(w, h-1-lipgloss.Height(footer))
	frame := lipgloss.JoinVertical(lipgloss.Left, header, body, footer)
	m.frame = lipgloss.NewStyle().MaxWidth(w).MaxHeight(h).Render(frame)
}

func (m *Model) socket() string {
	if m.opt.Socket != "" {
		return m.opt.Socket
	}
	return m.agent.Socket
}

func (m *Model) headerView(w int) string {
	switch m.conn {
	case connDown:
		s := fmt.Sprintf("agent unreachable on %s: reconnecting (attempt %d)", m.socket(), m.attempt)
		return m.st.banner.Width(w).MaxWidth(w).Render(ansi.Truncate(s, w, "…"))
	case connecting:
		if m.agent.PID == 0 {
			return m.st.header.Render(ansi.Truncate("vip watch · connecting to the agent on "+m.socket()+"…", w, "…"))
		}
	}
	claims := m.visibleClaims()
	parts := []string{fmt.Sprintf("agent %d on %s", m.agent.PID, m.socket())}
	if s := m.agent.Store; s != nil {
		node := "node " + s.Node
		if !s.Fenced.IsZero() {
			node += " FENCED since " + s.Fenced.In(m.opt.Location).Format("15:04:05")
		}
		now := m.clock.now()
		switch {
		case s.Failsafe != nil && !s.Failsafe.AloneUntil.IsZero():
			node += fmt.Sprintf(" ON FAILSAFE since %s (alone, until %s)", s.Failsafe.Since.In(m.opt.Location).Format("15:04:05"), s.Failsafe.AloneUntil.In(m.opt.Location).Format("15:04:05"))
		case s.Failsafe != nil:
			node += fmt.Sprintf(" ON FAILSAFE since %s (acked by %s)", s.Failsafe.Since.In(m.opt.Location).Format("15:04:05"), strings.Join(s.Failsafe.AckedBy, ", "))
		case s.Unreachable && s.Fenced.IsZero():
			node += " STORE UNREACHABLE " + now.Sub(s.Renewed).Truncate(100*time.Millisecond).String()
		}
		if p := s.Promised; p != nil && p.Until.After(now) {
			node += " PROMISED " + p.Owner + " until " + p.Until.In(m.opt.Location).Format("15:04:05")
		}
		if c := s.Cordon; c != nil {
			node += " CORDONED"
			if c.Left != nil {
				node += " " + time.Duration(*c.Left).Round(time.Second).String() + " left"
			}
			if c.Reason != "" {
				node += fmt.Sprintf(" (%s)", c.Reason)
			}
		}
		parts = append(parts, node)
	}
	if m.filter != "" {
		parts = append(parts, fmt.Sprintf("filter %q", m.filter))
	}
	n := fmt.Sprintf("%d %s", len(claims), plural(len(claims), "claim", "claims"))
	if m.opt.Interface != "" {
		n += " on " + m.opt.Interface
	}
	parts = append(parts, n)
	if r := len(rivalRows(claims)); r > 0 {
		parts = append(parts, fmt.Sprintf("%d competing %s", r, plural(r, "claimer", "claimers")))
	}
	s := strings.Join(parts, " · ")
	if full := "vip watch · " + s; ansi.StringWidth(full) <= w {
		s = full
	}
	return m.st.header.Render(ansi.Truncate(s, w, "…"))
}

func (m *Model) footerView(w int) string {
	var status string
	// Wrapped at spaces only: lipgloss would break "--take-over" at its
	// hyphen, and a flag cut in two cannot be copied.
	pad := lipgloss.NewStyle().Width(w)
	wrap := func(st lipgloss.Style, s string) string { return pad.Render(st.Render(wrapWords(s, w))) }
	km := help.KeyMap(m.keys)
	switch m.mode {
	case modeClaim:
		m.input.Width = max(w-lipgloss.Width(m.input.Prompt)-2, 10)
		status = m.input.View()
		if m.inputErr != "" {
			status += "\n" + wrap(m.st.errMsg, m.inputErr)
		}
		km = promptHelp{m.keys}
	case modeFilter:
		m.input.Width = max(w-lipgloss.Width(m.input.Prompt)-2, 10)
		status = m.input.View()
		km = promptHelp{m.keys}
	case modeConfirm:
		status = wrap(m.st.prompt, fmt.Sprintf("release %s%s? It stops answering at once. (y/n)", m.confirmAddr, m.onIface(m.confirmAddr)))
		km = confirmHelp{m.keys}
	case modePick:
		status = wrap(m.st.prompt, m.pickView())
		km = pickHelp{m.keys}
	default:
		switch {
		case m.conn == connDown && m.lastErr != nil:
			status = wrap(m.st.errMsg, fmt.Sprintf("agent unreachable since %s (%s): %v",
				m.downSince.In(m.opt.Location).Format("15:04:05"), m.clock.now().Sub(m.downSince).Truncate(time.Second), m.lastErr))
		case m.flashErr:
			status = wrap(m.st.errMsg, m.flash)
		default:
			status = wrap(m.st.okMsg, m.flash)
		}
	}
	return status + "\n" + m.help.View(km)
}

// wrapWords wraps s to lines of at most w cells, breaking only at spaces;
// a word wider than w is cut with an ellipsis.
func wrapWords(s string, w int) string {
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		// Split at each space, not at runs of them: the picker aligns
		// its names with spaces.
		line, started := "", false
		for _, word := range strings.Split(para, " ") {
			word = ansi.Truncate(word, w, "…")
			switch {
			case !started:
				line, started = word, true
			case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= w:
				line += " " + word
			case word == "":
				// Spaces at a break are the break.
			default:
				lines = append(lines, line)
				line = word
			}
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func (m *Model) onIface(addr string) string {
	for _, c := range m.claims {
		if c.Addr == addr {
			return " on " + c.Interface
		}
	}
	return ""
}

// panesView lays the four panes out in h lines. The claims and traffic
// tables get a third each, less when they need less; the event log gets
// the rest.
func (m *Model) panesView(w, h int) string {
	claims := m.visibleClaims()
	cCols, cRows, cKeys := m.claimsTable(w, claims)
	cRows, cKeys = m.filterRows(cRows, cKeys)
	tCols, tRows, tKeys := m.whoHasTable(w)
	tRows, tKeys = m.filterRows(tRows, tKeys)
	lines := m.eventLines(w)
	rivals := rivalRows(claims)

	rivalH := 1 // "none seen"
	if len(rivals) > 0 {
		rivalH = 1 + min(len(rivals), max(2, h/5))
	}
	rest := max(h-4-rivalH, 5)
	// The fleet pane, while the agent has a store, takes up to a quarter
	// of what the others share.
	var fCols []table.Column
	var fRows []table.Row
	var fKeys []string
	fleetH := 0
	if m.hasFleet() {
		fCols, fRows, fKeys = m.fleetTable(w)
		fRows, fKeys = m.filterRows(fRows, fKeys)
		fleetH = min(1+max(len(fRows), 1), max(rest/4, 2))
		rest = max(rest-1-fleetH, 5)
	}
	// A table needs its header and a line (its rows, or why it has none).
	wantC, wantT, wantE := 1+max(len(cRows), 1), 1+max(len(tRows), 1), max(len(lines), 1)
	claimsH, trafficH := min(wantC, max(rest/3, 2)), min(wantT, max(rest/3, 2))
	if spare := rest - claimsH - trafficH - wantE; spare > 0 {
		more := min(spare, wantC-claimsH)
		claimsH, spare = claimsH+more, spare-more
		trafficH += min(spare, wantT-trafficH)
	}
	eventsH := max(rest-claimsH-trafficH, 1)

	var b strings.Builder
	title := "Claims " + m.count(len(cRows), len(claims))
	if m.opt.Interface != "" {
		title += " on " + m.opt.Interface
	}
	body, note := m.tableView(paneClaims, cCols, cRows, cKeys, claimsH, w, "no claims: press c to claim an address", false)
	b.WriteString(m.titleView(paneClaims, title, false, w, note) + "\n" + body + "\n")

	title = fmt.Sprintf("Who-has requests %s · sorted by %s", m.count(len(tRows), len(m.whoHas.Entries)), m.sort)
	if m.whoHas.Evicted > 0 {
		title += fmt.Sprintf(" · %d targets evicted", m.whoHas.Evicted)
	}
	empty := "no who-has requests seen"
	if m.whoHasNote != "" {
		empty = m.whoHasNote
	}
	body, note = m.tableView(paneWhoHas, tCols, tRows, tKeys, trafficH, w, empty, false)
	b.WriteString(m.titleView(paneWhoHas, title, false, w, note) + "\n" + body + "\n")

	title = "Competing claimers (0)"
	if len(rivals) > 0 {
		title = fmt.Sprintf("Competing claimers (%d): another host answers for an address held here", len(rivals))
	}
	body, note = m.st.dim.Render("  none seen"), ""
	if len(rivals) > 0 {
		cols, rows, keys := m.claimersTable(w, rivals)
		rows, keys = m.filterRows(rows, keys)
		body, note = m.tableView(paneClaimers, cols, rows, keys, rivalH, w, "", true)
	}
	b.WriteString(m.titleView(paneClaimers, title, len(rivals) > 0, w, note) + "\n" + body + "\n")

	if m.hasFleet() {
		empty := "no claims in the store"
		if m.fleetNote != "" {
			empty = m.fleetNote
		}
		// Why the claims shown are old takes the pane's first line,
		// whole as far as the width goes: in the title, after the
		// names and the stale mark, 80 columns cut it to "f…".
		why, h := "", fleetH
		if m.fleetNote != "" && len(fRows) > 0 && fleetH > 1 {
			why, h = m.st.alarm.Render(ansi.Truncate("  "+strings.TrimPrefix(m.fleetNote, "fleet: "), w, "…"))+"\n", fleetH-1
		}
		body, note := m.tableView(paneFleet, fCols, fRows, fKeys, h, w, empty, false)
		b.WriteString(m.titleView(paneFleet, m.fleetTitle(len(fRows)), false, w, note) + "\n" + why + body + "\n")
	}

	title = fmt.Sprintf("Events %s, the last %d kept", m.count(len(lines), m.log.len()), logSize)
	if m.hist != nil {
		title, lines = m.historyTitle(), m.historyLines(w)
	}
	body, note = m.eventsView(lines, w, eventsH)
	b.WriteString(m.titleView(paneEvents, title, false, w, note) + "\n" + body)
	return lipgloss.NewStyle().Height(h).MaxHeight(h).Render(b.String())
}

// titleView is p's title line; note, what the pane leaves off, and the
// age of stale data end it and are kept whole when the text is cut.
func (m *Model) titleView(p pane, text string, alarm bool, w int, note string) string {
	mark, style := "  ", m.st.title
	if p == m.focus {
		mark, style = "▸ ", m.st.focused
	}
	if alarm {
		style = m.st.alarm
	}
	// What says the data is old is kept whole: the text gives way.
	suffix := note + m.staleNote(p)
	t := style.Render(ansi.Truncate(mark+text, max(w-2-ansi.StringWidth(suffix), 4), "…") + suffix)
	return t + " " + m.st.rule.Render(strings.Repeat("─", max(0, w-lipgloss.Width(t)-1)))
}

// staleNote is the end of p's title while the agent is unreachable: its
// data is as old as the last answer, and the events since the stream
// ended are not seen. The fleet pane's says so too while the agent cannot
// reach the store, or its last read of the fleet failed: what it shows
// is as old as the last read that worked.
func (m *Model) staleNote(p pane) string {
	if m.conn != connDown {
		if why := m.fleetStale(); p == paneFleet && why != "" && !m.fleetAt.IsZero() {
			return " · stale " + m.clock.now().Sub(m.fleetAt).Truncate(time.Second).String() + ": " + why
		}
		return ""
	}
	from := m.snapAt
	switch {
	case p == paneFleet:
		from = m.fleetAt
	case p == paneEvents && m.hist == nil:
		from = m.gapFrom
	}
	if from.IsZero() {
		return ""
	}
	return " · stale " + m.clock.now().Sub(from).Truncate(time.Second).String()
}

// tableView draws one table pane in h lines, and says what it leaves off
// for the title: the rows that do not fit, above and below the window
// that holds the selected row, which stays selected across refreshes.
// The window is the view's, not the table's: the bubbles table scrolls
// by itself but does not say where it is, and a pane must say how many
// rows it hides.
func (m *Model) tableView(p pane, cols []table.Column, rows []table.Row, keys []string, h, w int, empty string, rival bool) (string, string) {
	st := m.st.tableStyles(rival)
	if p != m.focus {
		st.Selected = lipgloss.NewStyle()
	}
	box := lipgloss.NewStyle().Height(h).MaxHeight(h)
	m.rowKeys[p] = keys
	if len(rows) == 0 {
		t := table.New(table.WithColumns(cols), table.WithStyles(st), table.WithWidth(w), table.WithHeight(h))
		lines := []string{t.View()[:strings.IndexByte(t.View()+"\n", '\n')]}
		if empty != "" {
			lines = append(lines, m.st.dim.Render(ansi.Truncate("  "+empty, w, "…")))
		}
		return box.Render(strings.Join(lines, "\n")), ""
	}
	idx := slices.Index(keys, m.selected[p])
	if idx < 0 {
		// The selected row went: its place keeps the selection.
		idx = min(max(m.cursor[p], 0), len(rows)-1)
	}
	m.selected[p], m.cursor[p] = keys[idx], idx
	if p == m.focus {
		rows[idx][0] = selectMark
	}
	vis := max(h-1, 1) // the header takes a line
	off := min(m.offset[p], max(len(rows)-vis, 0), idx)
	if idx >= off+vis {
		off = idx - vis + 1
	}
	end := min(off+vis, len(rows))
	m.offset[p], m.page[p] = off, vis
	t := table.New(table.WithColumns(cols), table.WithStyles(st), table.WithRows(rows[off:end]), table.WithWidth(w), table.WithHeight(h))
	t.SetCursor(idx - off)
	return box.Render(t.View()), m.hiddenNote(p, off, len(rows)-end)
}

// hiddenNote says how many rows or lines of p are above and below what it
// shows, and how to reach them.
func (m *Model) hiddenNote(p pane, above, below int) string {
	where, keys := "below", "↓"
	switch {
	case above == 0 && below == 0:
		return ""
	case below == 0:
		where, keys = "above", "↑"
	case above > 0:
		where, keys = "above and below", "↑/↓"
	}
	if p != m.focus {
		keys = "tab, " + keys
	}
	return fmt.Sprintf(" · %d more %s (%s to scroll)", above+below, where, keys)
}

// count is a pane's count: "(3)", or "(1 of 3)" under a filter.
func (m *Model) count(shown, all int) string {
	if shown == all {
		return fmt.Sprintf("(%d)", all)
	}
	return fmt.Sprintf("(%d of %d)", shown, all)
}

// filterRows keeps the rows with a cell that holds the filter.
func (m *Model) filterRows(rows []table.Row, keys []string) ([]table.Row, []string) {
	if m.filter == "" {
		return rows, keys
	}
	f := strings.ToLower(m.filter)
	var outR []table.Row
	var outK []string
	for i, r := range rows {
		if strings.Contains(strings.ToLower(strings.Join(r, " ")), f) {
			outR, outK = append(outR, r), append(outK, keys[i])
		}
	}
	return outR, outK
}

// visibleClaims are the claims on the watched interface.
func (m *Model) visibleClaims() []api.Claim {
	if m.opt.Interface == "" {
		return m.claims
	}
	var out []api.Claim
	for _, c := range m.claims {
		if c.Interface == m.opt.Interface {
			out = append(out, c)
		}
	}
	return out
}

func right(w int, s string) string { return fmt.Sprintf("%*s", w, s) }

func (m *Model) claimsTable(w int, claims []api.Claim) ([]table.Column, []table.Row, []string) {
	fixed := markW + ifaceW + stateW + windowW + countW + gratW + conflW
	// The traffic arriving (packets/s, where the eBPF responder counts
	// it) where there is room for it beside an IPv6 address.
	traffic := w-fixed-9-trafW >= minAddrW+4
	if traffic {
		fixed += trafW + 1
	}
	grouped := slices.ContainsFunc(claims, func(c api.Claim) bool { return c.Group != "" })
	if grouped {
		fixed += groupW + 1
		claims = byGroup(claims, func(c api.Claim) string { return c.Group }, func(c api.Claim) string { return c.Addr })
	}
	addrW := min(max(w-fixed-8, minAddrW), maxAddrW)
	cols := []table.Column{
		{Title: "", Width: markW}, {Title: "ADDRESS", Width: addrW}, {Title: "INTERFACE", Width: ifaceW},
		{Title: "STATE", Width: stateW}, {Title: right(windowW, "WINDOW"), Width: windowW},
		{Title: right(countW, "ANSWERED"), Width: countW}, {Title: right(gratW, "GRATUITOUS"), Width: gratW},
		{Title: right(conflW, "CONFLICTS"), Width: conflW},
	}
	if traffic {
		cols = append(cols, table.Column{Title: right(trafW, "TRAFFIC"), Width: trafW})
	}
	if grouped {
		cols = slices.Insert(cols, 1, table.Column{Title: "GROUP", Width: groupW})
	}
	rows := make([]table.Row, 0, len(claims))
	keys := make([]string, 0, len(claims))
	for _, c := range claims {
		window := "-"
		if left := m.windowLeft(c); c.WindowRemaining > 0 && left > 0 {
			window = fmt.Sprintf("%.1fs", left.Seconds())
		}
		row := table.Row{"", c.Addr, c.Interface, c.State, right(windowW, window),
			right(countW, fmt.Sprint(c.Answered)), right(gratW, fmt.Sprint(c.GratuitousFrames)),
			right(conflW, fmt.Sprint(len(c.Claimers)))}
		if traffic {
			row = append(row, right(trafW, c.Traffic.Rate()))
		}
		if grouped {
			row = slices.Insert(row, 1, dash(c.Group))
		}
		rows = append(rows, row)
		keys = append(keys, c.Addr)
	}
	return cols, rows, keys
}

// windowLeft is what remains of c's window now, counted down from the
// snapshot so that the agent's clock and ours need not agree.
func (m *Model) windowLeft(c api.Claim) time.Duration {
	return time.Duration(c.WindowRemaining) - m.clock.now().Sub(m.snapAt)
}

// rival is a competing claimer of a held address.
type rival struct {
	addr string
	api.Claimer
}

func rivalRows(claims []api.Claim) []rival {
	var out []rival
	for _, c := range claims {
		for _, r := range c.Claimers {
			out = append(out, rival{c.Addr, r})
		}
	}
	return out
}

func (m *Model) claimersTable(w int, rivals []rival) ([]table.Column, []table.Row, []string) {
	fixed := markW + macW + kindW + 2*ageW + timesW
	addrW := min(max(w-fixed-7, minAddrW), maxAddrW)
	cols := []table.Column{
		{Title: "", Width: markW}, {Title: "ADDRESS", Width: addrW}, {Title: "MAC", Width: macW},
		{Title: "KIND", Width: kindW}, {Title: "FIRST", Width: ageW}, {Title: "LAST", Width: ageW},
		{Title: right(timesW, "COUNT"), Width: timesW},
	}
	rows := make([]table.Row, 0, len(rivals))
	keys := make([]string, 0, len(rivals))
	for _, r := range rivals {
		rows = append(rows, table.Row{"", r.addr, r.MAC, r.Kind, m.age(r.FirstSeen), m.age(r.LastSeen), right(timesW, fmt.Sprint(r.Count))})
		keys = append(keys, r.addr+"|"+r.MAC)
	}
	return cols, rows, keys
}

// age says how long ago t was, in the largest unit.
func (m *Model) age(t time.Time) string {
	d := m.clock.now().Sub(t)
	switch {
	case t.IsZero():
		return "-"
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func sortClaims(cs []api.Claim) {
	slices.SortStableFunc(cs, func(a, b api.Claim) int {
		pa, ea := netip.ParseAddr(a.Addr)
		pb, eb := netip.ParseAddr(b.Addr)
		if ea != nil || eb != nil {
			return strings.Compare(a.Addr, b.Addr)
		}
		return pa.Compare(pb)
	})
}

func sortWhoHas(es []api.WhoHas, by whoHasSort) {
	byAddr := func(a, b api.WhoHas) int {
		pa, ea := netip.ParseAddr(a.Addr)
		pb, eb := netip.ParseAddr(b.Addr)
		if ea != nil || eb != nil {
			return strings.Compare(a.Addr, b.Addr)
		}
		return pa.Compare(pb)
	}
	slices.SortStableFunc(es, func(a, b api.WhoHas) int {
		var c int
		switch by {
		case sortRate:
			c = cmp.Compare(b.Rate, a.Rate)
		case sortRequests:
			c = cmp.Compare(b.Requests, a.Requests)
		case sortLastSeen:
			c = b.LastSeen.Compare(a.LastSeen)
		}
		return cmp.Or(c, byAddr(a, b))
	})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
