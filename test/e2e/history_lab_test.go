package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/test/labtest"
)

// historyOf reads vip history --json from the client, with args.
func historyOf(t *testing.T, f *fleetLab, args ...string) api.HistoryResponse {
	t.Helper()
	out := mustVip(t, f.client, f.sc, append([]string{"history", "--json", "--store", f.storeURL}, args...)...)
	var h api.HistoryResponse
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("vip history --json: %v:\n%s", err, out)
	}
	return h
}

// changeLine is a change in a few words: kind, node, where from, reason.
func changeLine(c api.HistoryChange) string {
	s := c.Kind + " " + c.Node
	if c.From != "" {
		s += " from " + c.From
	}
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	return s
}

// linesOf is the changes of addr (or, for "", the node-wide ones), each in
// a few words, in order.
func linesOf(changes []api.HistoryChange, addr string) []string {
	var out []string
	for _, c := range changes {
		if c.Addr == addr {
			out = append(out, changeLine(c))
		}
	}
	return out
}

// TestHistory, against a real etcd and real agents: a scripted maintenance
// (a claim with a reason, a standby added by claim --standby, a move with a reason, kill -9 of the new owner
// and its standby's takeover, a drain, a return home) leaves exactly those
// changes in vip history, in the store's order, each with its revision, who
// asked (user@host for an operator's, nobody for a standby's takeover) and
// the reason; vip history -f, started before the first, prints the same
// changes as they are made, the last within a second of the command that
// made it returning.
func TestHistory(t *testing.T) {
	t.Parallel()
	f := newFleetLab(t)
	st := f.storeURL
	follow := labtest.Start(t, f.client, vipBin, "history", "-f", "--json", "--store", st)
	addrs := []string{"192.0.2.10", "2001:db8::10"}
	mustVip(t, f.a, f.sa, append([]string{"claim", "--reason", "service up"}, addrs...)...)
	mustVip(t, f.b, f.sb, append([]string{"claim", "--standby"}, addrs...)...)
	mustVip(t, f.client, f.sc, append([]string{"move", "--to", "b", "--reason", "rebalance", "--traffic-window", "0", "--store", st}, addrs...)...)

	// b dies: a, its standby since the move, takes both back.
	f.agentB.Kill(t)
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		o1, _ := standbysOf(t, f, addrs[0])
		o2, _ := standbysOf(t, f, addrs[1])
		return o1 == "a" && o2 == "a", fmt.Sprintf("after b's kill -9 the owners are %s and %s, want a", o1, o2)
	})
	f.agentB = startAgent(t, f.b, f.sb, "--store", st, "--node", "b", "--lease-ttl", fleetTTL, "--log-format", "json")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		return standsBy(t, f, f.sb, addrs[0]) && standsBy(t, f, f.sb, addrs[1]), "b started again does not stand by"
	})

	mustVip(t, f.client, f.sc, "drain", "a", "--quiet", "0", "--reason", "kernel upgrade", "--store", st)
	mustVip(t, f.client, f.sc, "uncordon", "a", "--return", "--reason", "back home", "--store", st)
	returned := time.Now()

	perAddr := []string{"claim a (service up)", "standby-add b", "move b from a (rebalance)", "standby-takeover a from b",
		"move b from a (drain: kernel upgrade)", "move a from b (back home)"}
	nodeWide := []string{"cordon a (drain: kernel upgrade)", "uncordon a (back home)"}
	h := historyOf(t, f)
	for _, a := range addrs {
		if got := linesOf(h.Changes, a); !slices.Equal(got, perAddr) {
			t.Errorf("history of %s:\n  %s\nwant\n  %s", a, strings.Join(got, "\n  "), strings.Join(perAddr, "\n  "))
		}
	}
	if got := linesOf(h.Changes, ""); !slices.Equal(got, nodeWide) {
		t.Errorf("node changes: %v, want %v", got, nodeWide)
	}
	if len(h.Changes) != 2*len(perAddr)+len(nodeWide) {
		t.Fatalf("%d changes, want %d:\n%+v", len(h.Changes), 2*len(perAddr)+len(nodeWide), h.Changes)
	}
	rev := map[string]int64{}
	for i, c := range h.Changes {
		if i > 0 && c.Revision < h.Changes[i-1].Revision {
			t.Errorf("change %d (%s) at revision %d, before the one listed before it (%d)", i, c.Summary, c.Revision, h.Changes[i-1].Revision)
		}
		if c.Rev != c.Revision {
			t.Errorf("change %d (%s): rev %d, revision %d; the deprecated rev must say the revision", i, c.Summary, c.Rev, c.Revision)
		}
		operator := c.Kind != "standby-takeover"
		if operator != strings.Contains(c.By, "@") {
			t.Errorf("%s: by %q; want user@host for an operator's change, nobody for a standby's", c.Summary, c.By)
		}
		rev[changeLine(c)] = max(rev[changeLine(c)], c.Revision)
	}
	if rev[nodeWide[0]] >= rev[perAddr[4]] || rev[nodeWide[1]] >= rev[perAddr[5]] {
		t.Errorf("the cordon (rev %d) and uncordon (rev %d) do not come before the moves they let happen (%d, %d)",
			rev[nodeWide[0]], rev[nodeWide[1]], rev[perAddr[4]], rev[perAddr[5]])
	}
	for _, c := range h.Changes {
		if c.Kind == "move" && (c.Asked.IsZero() || !strings.Contains(c.Summary, "moved "+c.From+" -> "+c.Node)) {
			t.Errorf("a move without its timeline or summary: %+v", c)
		}
	}

	// -f printed the same, as they came.
	labtest.Eventually(t, time.Second, func() (bool, string) {
		var got []api.HistoryChange
		sc := bufio.NewScanner(strings.NewReader(follow.Output()))
		for sc.Scan() {
			var c api.HistoryChange
			if json.Unmarshal(sc.Bytes(), &c) == nil && c.Kind != "" {
				got = append(got, c)
			}
		}
		return len(got) == len(h.Changes), fmt.Sprintf("vip history -f printed %d changes %v after the return, want %d:\n%s",
			len(got), time.Since(returned).Round(time.Millisecond), len(h.Changes), follow.Output())
	})
	text := mustVip(t, f.client, f.sc, "history", addrs[0], "--store", st)
	if !strings.Contains(text, "192.0.2.10 moved a -> b") || !strings.Contains(text, `"back home"`) || strings.Contains(text, "2001:db8::10") {
		t.Errorf("vip history %s:\n%s", addrs[0], text)
	}
	if got := historyOf(t, f, "--node", "b").Changes; len(got) != 10 {
		t.Errorf("vip history --node b: %d changes, want the 10 that made b a standby or moved to or from b", len(got))
	}
}
