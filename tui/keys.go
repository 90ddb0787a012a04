package tui

import "github.com/charmbracelet/bubbles/key"

// keymap is every key the view answers, and the help bar's source.
type keymap struct {
	Claim   key.Binding
	Release key.Binding
	Refresh key.Binding
	// Move is enabled while the agent has a store.
	Move key.Binding
	// History, enabled with Move, shows the store's history of the
	// selected claim or its group.
	History key.Binding
	Filter  key.Binding
	Sort    key.Binding
	Next    key.Binding
	Prev    key.Binding
	Up      key.Binding
	Down    key.Binding
	PageUp  key.Binding
	PageDn  key.Binding
	Top     key.Binding
	Bottom  key.Binding
	Help    key.Binding
	Quit    key.Binding

	// In a prompt or a confirmation.
	Accept  key.Binding
	Cancel  key.Binding
	Confirm key.Binding
	Deny    key.Binding
}

func defaultKeymap() keymap {
	return keymap{
		Claim:   key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "claim")),
		Release: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "release")),
		Refresh: key.NewBinding(key.WithKeys("g"), key.WithHelp("g", "refresh")),
		Move:    key.NewBinding(key.WithKeys("m"), key.WithHelp("m", "move"), key.WithDisabled()),
		History: key.NewBinding(key.WithKeys("h"), key.WithHelp("h", "history"), key.WithDisabled()),
		Filter:  key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Sort:    key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort")),
		Next:    key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "pane")),
		Prev:    key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous pane")),
		Up:      key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:    key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:  key.NewBinding(key.WithKeys("pgup"), key.WithHelp("pgup", "page up")),
		PageDn:  key.NewBinding(key.WithKeys("pgdown"), key.WithHelp("pgdn", "page down")),
		Top:     key.NewBinding(key.WithKeys("home"), key.WithHelp("home", "first")),
		Bottom:  key.NewBinding(key.WithKeys("end"), key.WithHelp("end", "last")),
		Help:    key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:    key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),

		Accept:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "ok")),
		Cancel:  key.NewBinding(key.WithKeys("esc", "ctrl+c"), key.WithHelp("esc", "cancel")),
		Confirm: key.NewBinding(key.WithKeys("y", "Y"), key.WithHelp("y", "yes")),
		Deny:    key.NewBinding(key.WithKeys("n", "N", "esc", "ctrl+c"), key.WithHelp("n", "no")),
	}
}

// ShortHelp is the help bar. What does not fit the width is left off at
// its end, so help and quit come before the pane key: at 80 columns, with
// move enabled, only "tab pane" is left off (? shows it).
func (k keymap) ShortHelp() []key.Binding {
	return []key.Binding{k.Claim, k.Release, k.Refresh, k.Move, k.Filter, k.Sort, k.Help, k.Quit, k.Next}
}

// FullHelp is the help shown by ?.
func (k keymap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Claim, k.Release, k.Refresh, k.Move, k.History},
		{k.Filter, k.Sort, k.Next, k.Prev},
		{k.Up, k.Down, k.PageUp, k.PageDn},
		{k.Top, k.Bottom, k.Help, k.Quit},
	}
}

// promptHelp is the help bar while a prompt is open.
type promptHelp struct{ k keymap }

func (p promptHelp) ShortHelp() []key.Binding  { return []key.Binding{p.k.Accept, p.k.Cancel} }
func (p promptHelp) FullHelp() [][]key.Binding { return [][]key.Binding{p.ShortHelp()} }

// pickHelp is the help bar while a move waits for its target node.
type pickHelp struct{ k keymap }

func (p pickHelp) ShortHelp() []key.Binding {
	return []key.Binding{p.k.Up, p.k.Down, key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "move")), p.k.Cancel}
}
func (p pickHelp) FullHelp() [][]key.Binding { return [][]key.Binding{p.ShortHelp()} }

// confirmHelp is the help bar while a release waits for y or n.
type confirmHelp struct{ k keymap }

func (c confirmHelp) ShortHelp() []key.Binding  { return []key.Binding{c.k.Confirm, c.k.Deny} }
func (c confirmHelp) FullHelp() [][]key.Binding { return [][]key.Binding{c.ShortHelp()} }
