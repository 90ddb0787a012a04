package tui

import (
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vip/internal/api"
)

func TestAnsweredBy(t *testing.T) {
	t.Parallel()
	const ours, rivalMAC = "02:00:00:00:00:02", "02:00:00:00:00:99"
	claim := api.Claim{Addr: "192.0.2.10", Interface: "eth0", MAC: ours}
	tests := []struct {
		name    string
		entry   api.WhoHas
		claim   api.Claim
		claimed bool
		want    string
	}{
		// The capture leaves out our own answers: held and no answerer
		// seen is the ordinary case of an address this agent answers.
		{"held, no answerer seen", api.WhoHas{Held: true}, claim, true, "this host (eth0)"},
		{"held, a rival", api.WhoHas{Held: true, AnsweredBy: []api.Answerer{{MAC: rivalMAC}}}, claim, true, "this host (eth0), " + rivalMAC},
		{"held, our MAC seen too", api.WhoHas{Held: true, AnsweredBy: []api.Answerer{{MAC: rivalMAC}, {MAC: strings.ToUpper(ours)}}}, claim, true, "this host (eth0), " + rivalMAC},
		{"held, claim not in the status yet", api.WhoHas{Held: true}, api.Claim{}, false, "this host"},
		{"not held, no answer seen", api.WhoHas{}, api.Claim{}, false, "none seen here"},
		{"not held, another host", api.WhoHas{AnsweredBy: []api.Answerer{{MAC: rivalMAC}}}, api.Claim{}, false, rivalMAC},
		{"claimed, waiting, our MAC seen", api.WhoHas{AnsweredBy: []api.Answerer{{MAC: ours}}}, claim, true, "this host (eth0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := answeredBy(tt.entry, tt.claim, tt.claimed, nil); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestHeldNeverNobody: whatever the capture saw, the traffic pane never
// says a held address is answered by nobody, and names this host once.
func TestHeldNeverNobody(t *testing.T) {
	t.Parallel()
	b := fixture()
	for i := range b.whoHas.Entries {
		b.whoHas.Entries[i].AnsweredBy = nil
	}
	h := connected(t, b, Options{}, 200, 40)
	_, rows, keys := h.m.whoHasTable(200)
	for _, e := range b.whoHas.Entries {
		if !e.Held {
			continue
		}
		i := slices.Index(keys, e.Addr)
		if i < 0 {
			t.Fatalf("no traffic row for held %s", e.Addr)
		}
		got := rows[i][len(rows[i])-1]
		if got == "none seen here" || strings.Count(got, "this host") != 1 {
			t.Errorf("held %s with no answerer seen: ANSWERED BY %q, want this host named once", e.Addr, got)
		}
	}
}

// TestAnsweredByNamesNode: once the fleet knows a MAC, by a node's
// interface or by the claim it holds, the traffic pane names its node: a
// moved address is answered by node b, not by a bare MAC.
func TestAnsweredByNamesNode(t *testing.T) {
	t.Parallel()
	b := fleetFixture()
	b.fleet.Nodes[1].Interfaces[0].MAC = "02:00:00:00:0b:02"
	b.fleet.Claims = append(b.fleet.Claims, api.FleetClaim{Addr: "198.51.100.30", Node: "c", Interface: "eth0", MAC: "02:00:00:00:0c:02", State: api.FleetHolding})
	b.whoHas.Entries = append(b.whoHas.Entries,
		api.WhoHas{Addr: "198.51.100.20", Requests: 2, Rate: 0.2, AnsweredBy: []api.Answerer{{MAC: "02:00:00:00:0B:02"}}, LastSeen: t0},
		api.WhoHas{Addr: "198.51.100.30", Requests: 1, Rate: 0.1, AnsweredBy: []api.Answerer{{MAC: "02:00:00:00:0c:02"}}, LastSeen: t0},
		api.WhoHas{Addr: "198.51.100.40", Requests: 1, Rate: 0.1, AnsweredBy: []api.Answerer{{MAC: "02:00:00:00:0d:02"}}, LastSeen: t0})
	h := connected(t, b, Options{}, 200, 50)
	h.until("the fleet", func() bool { return len(h.m.fleet.Nodes) > 0 })
	h.draw()
	_, rows, keys := h.m.whoHasTable(200)
	want := map[string]string{
		"198.51.100.20": "node b (02:00:00:00:0B:02)",
		"198.51.100.30": "node c (02:00:00:00:0c:02)",
		"198.51.100.40": "02:00:00:00:0d:02", // no node has it
		"2001:db8::10":  "this host (eth0), 02:00:00:00:00:99",
	}
	for addr, w := range want {
		i := slices.Index(keys, addr)
		if i < 0 {
			t.Fatalf("no traffic row for %s", addr)
		}
		if got := rows[i][len(rows[i])-1]; got != w {
			t.Errorf("%s: ANSWERED BY %q, want %q", addr, got, w)
		}
	}
	if v := h.m.View(); !strings.Contains(v, "node b (02:00:00:00:0B:02)") {
		t.Errorf("the view does not name node b:\n%s", v)
	}
}
