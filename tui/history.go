package tui

import (
	"context"
	"fmt"
	"strconv"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/vipctl/vip/internal/api"
)

// historyPane is the store's history of the selected claim, or of its
// group, shown in the events pane's place while open (h).
type historyPane struct {
	// addr or group is what it is of.
	addr, group string
	resp        api.HistoryResponse
	err         error
	loaded      bool
}

// historyMsg is the agent's answer to a history read.
type historyMsg struct {
	gen         int
	addr, group string
	resp        api.HistoryResponse
	err         error
}

// historyCmd reads the history of addr, or of group, through the agent.
func historyCmd(ctx context.Context, b Backend, gen int, addr, group string) tea.Cmd {
	return func() tea.Msg {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		resp, err := b.History(rctx, addr, group)
		return historyMsg{gen: gen, addr: addr, group: group, resp: resp, err: err}
	}
}

// toggleHistory opens the history of the selected claim (its group's, if
// it has one) in the events pane's place, or closes it.
func (m *Model) toggleHistory() tea.Cmd {
	if m.hist != nil {
		m.hist = nil
		return m.markDirty()
	}
	addr := m.selectedMoveAddr()
	if addr == "" {
		m.setFlash(true, "no claim selected: pick one in the claims or fleet pane")
		return nil
	}
	m.hist = &historyPane{addr: addr}
	if g, _ := m.groupOf(addr); g != "" {
		m.hist.addr, m.hist.group = "", g
	}
	return tea.Batch(historyCmd(m.ctx, m.b, m.gen, m.hist.addr, m.hist.group), m.markDirty())
}

// applyHistory takes an answer for the history open now.
func (m *Model) applyHistory(msg historyMsg) {
	if m.hist == nil || msg.gen != m.gen || msg.addr != m.hist.addr || msg.group != m.hist.group {
		return
	}
	m.hist.resp, m.hist.err, m.hist.loaded = msg.resp, msg.err, true
}

// historyAgain reads the open history again (with each read of the
// fleet): a change shows within the fleet's period.
func (m *Model) historyAgain() tea.Cmd {
	if m.hist == nil {
		return nil
	}
	return historyCmd(m.ctx, m.b, m.gen, m.hist.addr, m.hist.group)
}

// historyTitle is the pane's title while the history is open.
func (m *Model) historyTitle() string {
	of := m.hist.addr
	if m.hist.group != "" {
		of = "group " + m.hist.group
	}
	switch {
	case m.hist.err != nil:
		return fmt.Sprintf("History of %s · unreadable · h back to events", of)
	case !m.hist.loaded:
		return fmt.Sprintf("History of %s · reading… · h back to events", of)
	}
	return fmt.Sprintf("History of %s · %d %s, oldest first · h back to events", of, len(m.hist.resp.Changes),
		plural(len(m.hist.resp.Changes), "change", "changes"))
}

// historyLines are the open history's changes, one a line, cut to w.
func (m *Model) historyLines(w int) []string {
	if m.hist.err != nil {
		return []string{m.st.errMsg.Render(ansi.Truncate("  "+m.hist.err.Error(), w, "…"))}
	}
	lines := make([]string, 0, len(m.hist.resp.Changes))
	for _, c := range m.hist.resp.Changes {
		line := c.Time.In(m.opt.Location).Format("15:04:05") + " rev " + strconv.FormatInt(max(c.Revision, c.Rev), 10) + " " + c.Summary
		if c.By != "" {
			line += " · by " + c.By
		}
		if c.Reason != "" {
			line += " · " + strconv.Quote(c.Reason)
		}
		lines = append(lines, "  "+ansi.Truncate(line, w-2, "…"))
	}
	return lines
}
