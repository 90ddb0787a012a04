package tui

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/table"
	"github.com/charmbracelet/x/ansi"

	"github.com/vipctl/vip/internal/api"
)

// The who-has pane: the requests seen on the wire, and who answers them.

func (m *Model) whoHasTable(w int) ([]table.Column, []table.Row, []string) {
	claims := make(map[string]api.Claim, len(m.claims))
	for _, c := range m.claims {
		claims[c.Addr] = c
	}
	nodes := m.macNodes()
	entries := slices.Clone(m.whoHas.Entries)
	sortWhoHas(entries, m.sort)
	rows := make([]table.Row, 0, len(entries))
	keys := make([]string, 0, len(entries))
	widest := struct{ target, by int }{minAddrW, len("ANSWERED BY")}
	for _, e := range entries {
		askers := make([]string, 0, len(e.Askers))
		for _, a := range e.Askers {
			// A probe's sender has no address yet: name its MAC.
			if ip, err := netip.ParseAddr(a.Addr); err != nil || ip.IsUnspecified() {
				askers = append(askers, a.MAC)
			} else {
				askers = append(askers, a.Addr)
			}
		}
		c, ok := claims[e.Addr]
		by := answeredBy(e, c, ok, nodes)
		widest.target = max(widest.target, ansi.StringWidth(e.Addr))
		widest.by = max(widest.by, ansi.StringWidth(by))
		rows = append(rows, table.Row{"", e.Addr, right(rateW, fmt.Sprintf("%.1f/s", e.Rate)),
			right(countW, fmt.Sprint(e.Requests)), fmt.Sprintf("%d: %s", len(e.Askers), strings.Join(askers, " ")), by})
		keys = append(keys, e.Addr)
	}

	free := max(w-(markW+rateW+countW)-6, 3*minAddrW)
	targetW := min(max(free*3/10, minAddrW), maxAddrW)
	byW := free - targetW - (free-targetW)/2
	if widest.by > byW {
		// Who answers is what the pane is read for (a MAC beside this
		// host is a split brain), so it gets the room it needs first: the
		// target gives up what its addresses do not use, and the askers,
		// their count first, keep at least the start of the first one.
		targetW = min(targetW, widest.target)
		byW = max(byW, min(widest.by, free-targetW-minAskersW))
	}
	cols := []table.Column{
		{Title: "", Width: markW}, {Title: "TARGET", Width: targetW}, {Title: right(rateW, "RATE"), Width: rateW},
		{Title: right(countW, "REQUESTS"), Width: countW}, {Title: "ASKERS", Width: free - targetW - byW}, {Title: "ANSWERED BY", Width: byW},
	}
	return cols, rows, keys
}

// answeredBy names who answers for the target of e; c is the claim of that
// address, if ok. The capture leaves out the frames this host sends, so
// this agent's answers are never among e's answerers: a held address is
// answered by this host all the same, by vip or, when the address is
// assigned to the interface, by the kernel (announce.Link stays silent for
// those). It comes first, and any other MAC after it is a split brain.
// Another MAC is named by its node where nodes (keyed by lowercase MAC,
// from the fleet) knows it: after a move, the new owner by name.
func answeredBy(e api.WhoHas, c api.Claim, ok bool, nodes map[string]string) string {
	self := "this host"
	if ok && c.Interface != "" {
		self += " (" + c.Interface + ")"
	}
	var by []string
	mine := e.Held
	for _, a := range e.AnsweredBy {
		if ok && c.MAC != "" && strings.EqualFold(a.MAC, c.MAC) {
			mine = true // our own frame after all: named once
			continue
		}
		if n, known := nodes[strings.ToLower(a.MAC)]; known {
			by = append(by, fmt.Sprintf("node %s (%s)", n, a.MAC))
			continue
		}
		by = append(by, a.MAC)
	}
	if mine {
		by = append([]string{self}, by...)
	}
	if len(by) == 0 {
		// Not "nobody": a reply goes to its asker alone, so this host
		// sees only the answers to its own probes, the announcements
		// and what the switch floods. Another host's kernel may answer
		// every request unseen here (issue 35's tryout).
		return "none seen here"
	}
	return strings.Join(by, ", ")
}

// macNodes maps the MACs the fleet knows, lowercase, to their nodes: each
// node's interfaces, and the MAC each claim in the store answers with.
func (m *Model) macNodes() map[string]string {
	if !m.hasFleet() {
		return nil
	}
	out := map[string]string{}
	for _, n := range m.fleet.Nodes {
		for _, i := range n.Interfaces {
			if i.MAC != "" {
				out[strings.ToLower(i.MAC)] = n.Node
			}
		}
	}
	for _, c := range m.fleet.Claims {
		if c.MAC != "" && c.Node != "" {
			out[strings.ToLower(c.MAC)] = c.Node
		}
	}
	return out
}
