package tui

import (
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/table"
	"github.com/charmbracelet/lipgloss"
)

// styles are every style of the view, made by one renderer: its colour
// profile (ASCII under NO_COLOR or in tests) decides what reaches the
// terminal. Anything that matters is also said in words or marks, so the
// view reads the same without colour.
type styles struct {
	header   lipgloss.Style // the top line
	banner   lipgloss.Style // the top line when the agent is gone
	title    lipgloss.Style // a pane's title
	focused  lipgloss.Style // the focused pane's title
	alarm    lipgloss.Style // the competing claimers' title when any is seen
	rule     lipgloss.Style // the line after a title
	dim      lipgloss.Style // placeholders, secondary text
	tableHdr lipgloss.Style
	cell     lipgloss.Style
	selected lipgloss.Style
	rival    lipgloss.Style // a competing claimer's row
	okMsg    lipgloss.Style
	errMsg   lipgloss.Style
	prompt   lipgloss.Style
	help     help.Styles
}

func newStyles(r *lipgloss.Renderer) styles {
	var (
		accent = lipgloss.AdaptiveColor{Light: "#5A4FCF", Dark: "#A59BFF"}
		muted  = lipgloss.AdaptiveColor{Light: "#8A8A8A", Dark: "#6C6C6C"}
		faint  = lipgloss.AdaptiveColor{Light: "#C8C8C8", Dark: "#3A3A3A"}
		red    = lipgloss.AdaptiveColor{Light: "#C62828", Dark: "#FF6B6B"}
		green  = lipgloss.AdaptiveColor{Light: "#2E7D32", Dark: "#7BD88F"}
		amber  = lipgloss.AdaptiveColor{Light: "#B26A00", Dark: "#FFC857"}
	)
	s := r.NewStyle
	return styles{
		header:   s().Bold(true),
		banner:   s().Bold(true).Foreground(lipgloss.Color("#FFFFFF")).Background(red),
		title:    s().Foreground(muted),
		focused:  s().Bold(true).Foreground(accent),
		alarm:    s().Bold(true).Foreground(red),
		rule:     s().Foreground(faint),
		dim:      s().Foreground(muted),
		tableHdr: s().Bold(true).PaddingRight(1),
		cell:     s().PaddingRight(1),
		selected: s().Bold(true).Foreground(accent),
		rival:    s().Foreground(red),
		okMsg:    s().Foreground(green),
		errMsg:   s().Foreground(red),
		prompt:   s().Bold(true).Foreground(amber),
		help: help.Styles{
			Ellipsis:       s().Foreground(muted),
			ShortKey:       s().Foreground(accent),
			ShortDesc:      s().Foreground(muted),
			ShortSeparator: s().Foreground(faint),
			FullKey:        s().Foreground(accent),
			FullDesc:       s().Foreground(muted),
			FullSeparator:  s().Foreground(faint),
		},
	}
}

// tableStyles are the styles of a pane's table; a rival pane's cells are
// red.
func (st styles) tableStyles(rival bool) table.Styles {
	t := table.Styles{Header: st.tableHdr, Cell: st.cell, Selected: st.selected}
	if rival {
		t.Cell = st.cell.Inherit(st.rival)
	}
	return t
}
