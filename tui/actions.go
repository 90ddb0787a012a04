package tui

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/netcheck"
)

// key handles a key press.
func (m *Model) key(msg tea.KeyMsg) tea.Cmd {
	switch m.mode {
	case modeClaim, modeFilter:
		return m.promptKey(msg)
	case modeConfirm:
		return m.confirmKey(msg)
	case modePick:
		return m.pickKey(msg)
	}
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		return tea.Quit
	case key.Matches(msg, k.Help):
		m.help.ShowAll = !m.help.ShowAll
	case key.Matches(msg, k.Next):
		m.focus = (m.focus + 1) % paneCount
		if m.focus == paneFleet && !m.hasFleet() {
			m.focus++
		}
	case key.Matches(msg, k.Prev):
		m.focus = (m.focus + paneCount - 1) % paneCount
		if m.focus == paneFleet && !m.hasFleet() {
			m.focus--
		}
	case key.Matches(msg, k.Move):
		return m.openPick()
	case key.Matches(msg, k.History):
		return m.toggleHistory()
	case key.Matches(msg, k.Sort):
		m.sort = (m.sort + 1) % sortCount
		m.setFlash(false, "who-has sorted by %s", m.sort)
	case key.Matches(msg, k.Claim):
		return m.openPrompt(modeClaim, "claim ", "")
	case key.Matches(msg, k.Filter):
		return m.openPrompt(modeFilter, "/", m.filter)
	case key.Matches(msg, k.Release):
		addr := m.selectedClaim()
		if addr == "" {
			m.setFlash(true, "no claim selected: pick one in the claims pane")
			return nil
		}
		m.mode, m.confirmAddr = modeConfirm, addr
	case key.Matches(msg, k.Refresh):
		addr := m.selectedClaim()
		if addr == "" {
			m.setFlash(true, "no claim selected: pick one in the claims pane")
			return nil
		}
		m.setFlash(false, "refreshing %s…", addr)
		return refreshCmd(m.ctx, m.b, addr)
	default:
		return m.moveKey(msg)
	}
	return nil
}

// moveKey moves the focused pane's selection, or scrolls the event log.
func (m *Model) moveKey(msg tea.KeyMsg) tea.Cmd {
	if m.focus == paneEvents {
		var cmd tea.Cmd
		m.events, cmd = m.events.Update(msg)
		m.followLog = m.events.AtBottom()
		return cmd
	}
	p := m.focus
	keys := m.rowKeys[p]
	if len(keys) == 0 {
		return nil
	}
	i := slices.Index(keys, m.selected[p])
	if i < 0 {
		i = m.cursor[p]
	}
	page, k := max(m.page[p], 1), m.keys
	switch {
	case key.Matches(msg, k.Up):
		i--
	case key.Matches(msg, k.Down):
		i++
	case key.Matches(msg, k.PageUp):
		i -= page
	case key.Matches(msg, k.PageDn):
		i += page
	case key.Matches(msg, k.Top):
		i = 0
	case key.Matches(msg, k.Bottom):
		i = len(keys) - 1
	default:
		return nil
	}
	i = min(max(i, 0), len(keys)-1)
	m.selected[p], m.cursor[p] = keys[i], i
	return nil
}

func (m *Model) openPrompt(md mode, prompt, value string) tea.Cmd {
	m.mode, m.inputErr = md, ""
	m.input.Prompt = prompt
	m.input.Placeholder = ""
	if md == modeClaim {
		m.input.Placeholder = "192.0.2.10 eth0 (address, then interface if needed)"
	}
	m.input.SetValue(value)
	m.input.CursorEnd()
	return m.input.Focus()
}

func (m *Model) closePrompt() {
	m.mode, m.inputErr = modeNormal, ""
	m.input.Blur()
	m.input.Reset()
}

func (m *Model) promptKey(msg tea.KeyMsg) tea.Cmd {
	switch {
	case key.Matches(msg, m.keys.Cancel):
		if m.mode == modeFilter {
			m.filter = ""
		}
		m.closePrompt()
		return nil
	case key.Matches(msg, m.keys.Accept):
		if m.mode == modeFilter {
			m.filter = strings.TrimSpace(m.input.Value())
			m.closePrompt()
			return nil
		}
		addr, iface, err := parseClaimInput(m.input.Value(), m.opt.Interface)
		if err != nil {
			m.inputErr = err.Error()
			return nil
		}
		m.closePrompt()
		on := ""
		if iface != "" {
			on = " on " + iface
		}
		m.setFlash(false, "claiming %s%s…", addr, on)
		m.selected[paneClaims] = addr.String()
		return claimCmd(m.ctx, m.b, addr.String(), iface)
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	m.inputErr = ""
	if m.mode == modeFilter {
		m.filter = strings.TrimSpace(m.input.Value())
	}
	return cmd
}

func (m *Model) confirmKey(msg tea.KeyMsg) tea.Cmd {
	addr := m.confirmAddr
	m.mode, m.confirmAddr = modeNormal, ""
	if key.Matches(msg, m.keys.Confirm) {
		m.setFlash(false, "releasing %s…", addr)
		return releaseCmd(m.ctx, m.b, addr)
	}
	m.setFlash(false, "kept %s", addr)
	return nil
}

// parseClaimInput reads "ADDR [IFACE]" as typed at the claim prompt.
func parseClaimInput(s, defIface string) (netip.Addr, string, error) {
	f := strings.Fields(s)
	switch {
	case len(f) == 0:
		return netip.Addr{}, "", netcheck.Invalidf("type an address to claim, like 192.0.2.10, then an interface after a space if needed")
	case len(f) > 2:
		return netip.Addr{}, "", netcheck.Invalidf("give one address and at most one interface, like 192.0.2.10 eth0")
	}
	a, err := netcheck.ParseAddr(f[0])
	if err != nil {
		return netip.Addr{}, "", err
	}
	iface := defIface
	if len(f) == 2 {
		iface = f[1]
	}
	return a, iface, nil
}

// selectedClaim is the held address the focused pane has selected, or
// else the claims pane's.
func (m *Model) selectedClaim() string {
	held := func(a string) bool {
		for _, c := range m.visibleClaims() {
			if c.Addr == a {
				return true
			}
		}
		return false
	}
	if m.focus == paneWhoHas || m.focus == paneClaimers {
		a, _, _ := strings.Cut(m.selected[m.focus], "|")
		if held(a) {
			return a
		}
	}
	if a := m.selected[paneClaims]; held(a) {
		return a
	}
	return ""
}

func (m *Model) claimDone(msg claimDoneMsg) tea.Cmd {
	var remote *api.RemoteError
	switch {
	case errors.As(msg.err, &remote) && remote.Code == api.CodeHeld:
		// The agent's sentence names the node that holds it.
		m.setFlash(true, "refused %s: %s", msg.addr, remote.Message)
		return m.afterAction(nil)
	case msg.err != nil:
		m.setFlash(true, "claim %s: %v", msg.addr, msg.err)
		return m.afterAction(msg.err)
	}
	// One line for the whole answer, as vip claim prints it: the
	// refusals (an answer may hold nothing else) before the claims.
	var parts []string
	for _, r := range msg.resp.Refused {
		parts = append(parts, fmt.Sprintf("refused %s: %s", r.Addr, r.Error))
	}
	for _, c := range msg.resp.Claims {
		verb := "claimed"
		if !c.RefreshedAt.Equal(c.ClaimedAt) {
			verb = "refreshed"
		}
		parts = append(parts, fmt.Sprintf("%s %s on %s as %s", verb, c.Addr, c.Interface, c.MAC))
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("claim %s: the agent answered neither a claim nor a refusal", msg.addr))
	}
	m.setFlash(len(msg.resp.Refused) > 0 || len(msg.resp.Claims) == 0, "%s", strings.Join(parts, "; "))
	return m.afterAction(nil)
}

func (m *Model) releaseDone(msg releaseDoneMsg) tea.Cmd {
	switch {
	case msg.err != nil:
		m.setFlash(true, "release %s: %v", msg.addr, msg.err)
	case len(msg.resp.Released) > 0:
		m.setFlash(false, "released %s: it is no longer answered", msg.addr)
	default:
		m.setFlash(false, "%s was not held", msg.addr)
	}
	return m.afterAction(msg.err)
}

func (m *Model) refreshDone(msg refreshDoneMsg) tea.Cmd {
	switch {
	case msg.err != nil:
		m.setFlash(true, "refresh %s: %v", msg.addr, msg.err)
	case len(msg.resp.Refreshed) > 0:
		m.setFlash(false, "refreshed %s: a new burst runs", msg.addr)
	default:
		m.setFlash(true, "%s is not held: claim it first", msg.addr)
	}
	return m.afterAction(msg.err)
}

// afterAction polls at the next tick, or reconnects when the agent is gone.
func (m *Model) afterAction(err error) tea.Cmd {
	if gone(err) && m.conn == connUp {
		return m.goDown(err)
	}
	m.stale = true
	return m.markDirty()
}
