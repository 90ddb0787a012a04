package tui

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/table"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/vipctl/vip/internal/api"
)

// picker is the small list a move picks its target node from.
type picker struct {
	addr  string
	nodes []string
	idx   int
}

// hasFleet reports whether the agent has a store, and so a fleet to show.
func (m *Model) hasFleet() bool { return m.agent.Store != nil }

// fleetTick re-arms the fleet's timer and asks for the fleet when the
// agent has a store and no answer is awaited. An agent without one is
// asked nothing: the timer only waits for a store to appear.
func (m *Model) fleetTick() tea.Cmd {
	next := m.clock.after(fleetEvery, fleetTickMsg{gen: m.gen})
	if !m.hasFleet() || m.fleetPolling {
		return next
	}
	m.fleetPolling = true
	return tea.Batch(pollFleet(m.ctx, m.b, m.gen), next)
}

func (m *Model) applyFleet(msg fleetMsg) {
	var remote *api.RemoteError
	switch {
	case msg.err == nil:
		m.fleet, m.fleetNote, m.fleetAt, m.fleetFailed = msg.fleet, "", m.clock.now(), false
	case errors.As(msg.err, &remote) && (remote.Code == api.CodeNotFound || remote.Code == api.CodeNoStore):
		m.fleet, m.fleetNote, m.fleetFailed = api.FleetResponse{}, "this agent does not serve the fleet (no /v1/fleet)", false
	default:
		// Keep the last fleet read, and say why it is not fresh.
		m.fleetNote, m.fleetFailed = "fleet: "+msg.err.Error(), true
	}
}

// openPick opens the node picker for a move of the selected address.
func (m *Model) openPick() tea.Cmd {
	addr := m.selectedMoveAddr()
	if addr == "" {
		m.setFlash(true, "no claim selected: pick one in the claims or the fleet pane")
		return nil
	}
	owner := m.agent.Store.Node
	if c, ok := m.fleetClaim(addr); ok {
		owner = c.Node
	}
	var nodes []string
	for _, n := range m.fleet.Nodes {
		if n.Node != owner {
			nodes = append(nodes, n.Node)
		}
	}
	if len(nodes) == 0 {
		m.setFlash(true, "no live node to move %s to but its owner %s: start an agent with --store on another host", addr, owner)
		return nil
	}
	m.mode, m.pick = modePick, picker{addr: addr, nodes: nodes}
	return nil
}

func (m *Model) pickKey(msg tea.KeyMsg) tea.Cmd {
	p := &m.pick
	switch {
	case key.Matches(msg, m.keys.Cancel):
		m.mode = modeNormal
		m.setFlash(false, "kept %s where it is", p.addr)
	case key.Matches(msg, m.keys.Accept):
		m.mode = modeNormal
		to := p.nodes[p.idx]
		m.setFlash(false, "moving %s to %s…", p.addr, to)
		return moveCmd(m.ctx, m.b, p.addr, to, time.Duration(m.agent.Store.LeaseTTL))
	case key.Matches(msg, m.keys.Up), msg.Type == tea.KeyLeft:
		p.idx = (p.idx + len(p.nodes) - 1) % len(p.nodes)
	case key.Matches(msg, m.keys.Down), key.Matches(msg, m.keys.Next), msg.Type == tea.KeyRight:
		p.idx = (p.idx + 1) % len(p.nodes)
	}
	return nil
}

// selectedMoveAddr is the address a move would take: the fleet pane's
// selected claim (any node's) when it has the focus, else the selected
// claim of this agent.
func (m *Model) selectedMoveAddr() string {
	if m.focus == paneFleet {
		if _, ok := m.fleetClaim(m.selected[paneFleet]); ok {
			return m.selected[paneFleet]
		}
		return ""
	}
	return m.selectedClaim()
}

func (m *Model) fleetClaim(addr string) (api.FleetClaim, bool) {
	i := slices.IndexFunc(m.fleet.Claims, func(c api.FleetClaim) bool { return c.Addr == addr })
	if i < 0 {
		return api.FleetClaim{}, false
	}
	return m.fleet.Claims[i], true
}

func (m *Model) moveDone(msg moveDoneMsg) tea.Cmd {
	switch {
	case msg.err != nil:
		m.setFlash(true, "move %s to %s: %v", msg.addr, msg.to, msg.err)
	case len(msg.resp.Moves) == 0:
		m.setFlash(true, "move %s to %s: the agent answered no move", msg.addr, msg.to)
	case len(msg.resp.Moves) > 1:
		// A group's: one line for all of it.
		m.setFlash(!movesOK(msg.resp.Moves), "%s", groupMoveSummary(msg.resp.Moves, msg.to))
	default:
		mv := msg.resp.Moves[0]
		m.setFlash(!mv.OK, "%s", mv.Summary())
	}
	cmd := m.afterAction(msg.err)
	if m.conn == connUp && m.hasFleet() && !m.fleetPolling {
		m.fleetPolling = true
		cmd = tea.Batch(cmd, pollFleet(m.ctx, m.b, m.gen))
	}
	return cmd
}

// pickView is the footer's line while the picker is open.
func (m *Model) pickView() string {
	names := make([]string, len(m.pick.nodes))
	for i, n := range m.pick.nodes {
		n = m.nodeName(n)
		names[i] = "  " + n + " "
		if i == m.pick.idx {
			names[i] = "[" + selectMark + n + "]"
		}
	}
	what := m.pick.addr + m.onIface(m.pick.addr)
	if g, n := m.groupOf(m.pick.addr); g != "" {
		// A group moves whole, whichever of its addresses is picked.
		what = fmt.Sprintf("group %s (%d %s)", g, n, plural(n, "address", "addresses"))
	}
	return fmt.Sprintf("move %s to: %s", what, strings.Join(names, " "))
}

// fleetStale is why the fleet pane shows an older read than its last
// poll's, if it does: the agent cannot reach the store (it says so before
// a read under way times out), or the last read failed.
func (m *Model) fleetStale() string {
	switch s := m.agent.Store; {
	case s != nil && (s.Unreachable || s.Failsafe != nil):
		return "store unreachable"
	case m.fleetFailed:
		return "read failed"
	}
	return ""
}

// fleetTitle names the live nodes and counts the claims in the store.
func (m *Model) fleetTitle(shown int) string {
	names := make([]string, len(m.fleet.Nodes))
	for i, n := range m.fleet.Nodes {
		names[i] = m.nodeName(n.Node)
	}
	nodes := "no live node"
	if len(m.fleet.Unregistered) > 0 {
		// Its standbys' nodes are known, and may run cut off from the
		// store: not registered is all the store says of them.
		nodes = "no node registered"
	}
	if len(names) > 0 {
		nodes = fmt.Sprintf("%d %s: %s", len(names), plural(len(names), "node", "nodes"), strings.Join(names, ", "))
	}
	// The count first: at 80 columns the names are what the cut takes.
	title := fmt.Sprintf("Fleet · claims %s · %s", m.count(shown, len(m.fleet.Claims)), nodes)
	return title
}

// homeMinWidth is the narrowest pane with a HOME column.
const homeMinWidth = 100

// fleetStateW fits the longest state the store gives a claim, whole: a
// state cut to "taking-o…" is no state an operator can read.
var fleetStateW = slices.Max([]int{len(api.FleetHolding), len(api.FleetMoving), len(api.FleetTakingOver),
	len(api.FleetFree), len(api.FleetUnknown), len(api.FleetUnrenewed), len(api.FleetFenced)})

func (m *Model) fleetTable(w int) ([]table.Column, []table.Row, []string) {
	const nodeW, movingW, homeW = 10, 10, 8
	stateW := fleetStateW
	// HOME (where an address away lives at home) only where it fits
	// beside a whole address.
	withHome := w >= homeMinWidth
	standbyW := max(12, w/6)
	fixed := markW + nodeW + ifaceW + stateW + standbyW + movingW
	if withHome {
		fixed += homeW + 1
	}
	claims := m.fleet.Claims
	grouped := slices.ContainsFunc(claims, func(c api.FleetClaim) bool { return c.Group != "" })
	if grouped {
		fixed += groupW + 1
		claims = byGroup(claims, func(c api.FleetClaim) string { return c.Group }, func(c api.FleetClaim) string { return c.Addr })
	}
	addrW := min(max(w-fixed-7, minAddrW), maxAddrW)
	cols := []table.Column{
		{Title: "", Width: markW}, {Title: "ADDRESS", Width: addrW}, {Title: "NODE", Width: nodeW},
		{Title: "INTERFACE", Width: ifaceW}, {Title: "STATE", Width: stateW},
		{Title: "STANDBYS", Width: standbyW}, {Title: "MOVING TO", Width: movingW},
	}
	if withHome {
		cols = append(cols, table.Column{Title: "HOME", Width: homeW})
	}
	if grouped {
		cols = slices.Insert(cols, 1, table.Column{Title: "GROUP", Width: groupW})
	}
	rows := make([]table.Row, 0, len(claims))
	keys := make([]string, 0, len(claims))
	for _, c := range claims {
		row := table.Row{"", c.Addr, dash(c.Node), dash(c.Interface), c.State,
			dash(strings.Join(c.Standbys, ",")), dash(c.MovingTo)}
		if withHome {
			row = append(row, dash(c.Home))
		}
		if grouped {
			row = slices.Insert(row, 1, dash(c.Group))
		}
		rows = append(rows, row)
		keys = append(keys, c.Addr)
	}
	return cols, rows, keys
}

// nodeName is a node as the fleet pane names it: marked when cordoned, as
// a move there is refused.
func (m *Model) nodeName(node string) string {
	var marks []string
	// A node whose renewals stopped says so, and since when at least
	// (the store's lease, to the second).
	if i := slices.IndexFunc(m.fleet.Nodes, func(n api.FleetNode) bool { return n.Node == node }); i >= 0 {
		if n := m.fleet.Nodes[i]; n.RenewedAgo != nil && n.Health != "" && n.Health != api.HealthLive {
			marks = append(marks, fmt.Sprintf("%s, renewed %s ago", n.Health, time.Duration(*n.RenewedAgo)))
		}
	}
	if slices.ContainsFunc(m.fleet.Cordons, func(c api.Cordon) bool { return c.Node == node }) {
		marks = append(marks, "cordoned")
	}
	if len(marks) == 0 {
		return node
	}
	return node + " (" + strings.Join(marks, "; ") + ")"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// groupW is the width of the GROUP column, shown where groups are.
const groupW = 8

// byGroup orders items so that a group's are together, at the place of
// its first, each group's in address order; the others keep their order.
func byGroup[T any](items []T, group, addr func(T) string) []T {
	first := map[string]int{}
	rank := make([]int, len(items))
	for i, it := range items {
		rank[i] = i
		if g := group(it); g != "" {
			if at, ok := first[g]; ok {
				rank[i] = at
			} else {
				first[g] = i
			}
		}
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int {
		if c := cmp.Compare(rank[x], rank[y]); c != 0 {
			return c
		}
		ax, ex := netip.ParseAddr(addr(items[x]))
		ay, ey := netip.ParseAddr(addr(items[y]))
		if ex != nil || ey != nil {
			return strings.Compare(addr(items[x]), addr(items[y]))
		}
		return ax.Compare(ay)
	})
	out := make([]T, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out
}

// groupOf is the group of addr as this agent's claims or the fleet say,
// and how many addresses it has there.
func (m *Model) groupOf(addr string) (string, int) {
	g := ""
	if i := slices.IndexFunc(m.claims, func(c api.Claim) bool { return c.Addr == addr }); i >= 0 {
		g = m.claims[i].Group
	}
	if c, ok := m.fleetClaim(addr); ok && g == "" {
		g = c.Group
	}
	if g == "" {
		return "", 0
	}
	n := 0
	for _, c := range m.fleet.Claims {
		if c.Group == g {
			n++
		}
	}
	if n == 0 {
		for _, c := range m.claims {
			if c.Group == g {
				n++
			}
		}
	}
	return g, n
}

// movesOK says whether every move went.
func movesOK(moves []api.MoveResult) bool {
	return !slices.ContainsFunc(moves, func(r api.MoveResult) bool { return !r.OK })
}

// groupMoveSummary is one line for the moves of a group: how many went
// from where to to, and the first that failed.
func groupMoveSummary(moves []api.MoveResult, to string) string {
	ok, from := 0, ""
	var failed *api.MoveResult
	for i := range moves {
		switch {
		case moves[i].OK:
			ok++
			if from == "" {
				from = moves[i].From
			}
		case failed == nil:
			failed = &moves[i]
		}
	}
	line := fmt.Sprintf("moved %d of %d addresses together %s -> %s", ok, len(moves), dash(from), to)
	if failed != nil {
		line += "; " + failed.Summary()
	}
	return line
}
