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
		{"not held, nobody", api.WhoHas{}, api.Claim{}, false, "nobody"},
		{"not held, another host", api.WhoHas{AnsweredBy: []api.Answerer{{MAC: rivalMAC}}}, api.Claim{}, false, rivalMAC},
		{"claimed, waiting, our MAC seen", api.WhoHas{AnsweredBy: []api.Answerer{{MAC: ours}}}, claim, true, "this host (eth0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := answeredBy(tt.entry, tt.claim, tt.claimed); got != tt.want {
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
		if got == "nobody" || strings.Count(got, "this host") != 1 {
			t.Errorf("held %s with no answerer seen: ANSWERED BY %q, want this host named once", e.Addr, got)
		}
	}
}
