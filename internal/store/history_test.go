package store

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestNodeHistoryIndex: a change of an address is copied to the index of
// the node that took it and of the node it came from, and a node's history
// is read from its own records and its index, not from a scan of every
// address's: it still lists a move whose record under the address is
// gone. The whole history, an address's and the watch list each change
// once, copies left out.
func TestNodeHistoryIndex(t *testing.T) {
	c, ctx := embeddedClient(t)
	addr := netip.MustParseAddr("192.0.2.10")
	watch := c.WatchHistory(ctx, HistoryQuery{}, 0)
	fence := Change{Kind: ChangeFence, Node: "a"}
	fence.SetAddrs([]netip.Addr{addr})
	changes := []Change{
		{Kind: ChangeClaim, Addr: addr, Node: "a"},
		{Kind: ChangeMove, Addr: addr, Node: "b", From: "a"},
		fence,
		{Kind: ChangeClaim, Addr: netip.MustParseAddr("192.0.2.11"), Node: "c"},
	}
	if err := c.AppendHistory(ctx, changes); err != nil {
		t.Fatal(err)
	}
	kinds := func(q HistoryQuery) []string {
		t.Helper()
		h, _, skipped, err := c.History(ctx, q)
		if err != nil || skipped > 0 {
			t.Fatalf("history %+v: %v, %d skipped", q, err, skipped)
		}
		var out []string
		for _, ch := range h {
			out = append(out, string(ch.Kind)+" "+ch.Node)
		}
		return out
	}
	for _, tc := range []struct {
		q    HistoryQuery
		want []string
	}{
		{HistoryQuery{Node: "a"}, []string{"claim a", "move b", "fence a"}},
		{HistoryQuery{Node: "b"}, []string{"move b"}},
		{HistoryQuery{Node: "c"}, []string{"claim c"}},
		{HistoryQuery{Addr: addr}, []string{"claim a", "move b", "fence a"}},
		{HistoryQuery{}, []string{"claim a", "move b", "fence a", "claim c"}},
	} {
		if got := kinds(tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("history %+v: %q, want %q", tc.q, got, tc.want)
		}
	}
	var seen []Change
	for len(seen) < len(changes) {
		select {
		case batch := <-watch:
			seen = append(seen, batch...)
		case <-ctx.Done():
			t.Fatalf("the watch sent %d records, want %d", len(seen), len(changes))
		}
	}
	if len(seen) != len(changes) {
		t.Errorf("the watch sent %d records for %d changes: copies in the index were sent too", len(seen), len(changes))
	}
	// Without the address's own records, a's history still lists the
	// changes of its address: it was not read from them.
	if _, err := c.Delete(ctx, c.Keys.HistoryOf(AddrSubject(addr)), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(HistoryQuery{Node: "a"}), []string{"claim a", "move b", "fence a"}; !slices.Equal(got, want) {
		t.Errorf("a's history read after its address's records went: %q, want %q from its index", got, want)
	}
}

// TestNodeIndexTrim: a node's index keeps its last NodeIndexKeep records.
func TestNodeIndexTrim(t *testing.T) {
	c, ctx := embeddedClient(t)
	start := time.Now().Add(-time.Hour)
	var changes []Change
	for i := range NodeIndexKeep + 10 {
		changes = append(changes, Change{Kind: ChangeClaim, Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(i % 200)}), Node: "a",
			Time: start.Add(time.Duration(i) * time.Millisecond), Count: i})
	}
	if err := c.AppendHistory(ctx, changes); err != nil {
		t.Fatal(err)
	}
	h, _, _, err := c.History(ctx, HistoryQuery{Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != NodeIndexKeep || h[0].Count != 10 {
		t.Fatalf("a's history: %d records from change %d, want the last %d", len(h), h[0].Count, NodeIndexKeep)
	}
}

// TestFailoverReadUnderBothNames: a standby's take is written
// "standby-takeover" until the next release, which writes "failover"; a
// record of either reads as ChangeFailover, so that this release's history
// reads a store an agent of the next one wrote to, and the name is the
// API's.
func TestFailoverReadUnderBothNames(t *testing.T) {
	if string(ChangeFailover) != api.HistoryFailover || string(changeFailoverNext) != api.NextHistoryFailover {
		t.Fatalf("the store writes %q (next %q), the API says %q (next %q)", ChangeFailover, changeFailoverNext, api.HistoryFailover, api.NextHistoryFailover)
	}
	for _, raw := range []string{`{"kind":"standby-takeover"}`, `{"kind":"failover"}`} {
		var c Change
		if err := json.Unmarshal([]byte(raw), &c); err != nil || c.Kind != ChangeFailover {
			t.Errorf("%s read as %q, %v; want %q", raw, c.Kind, err, ChangeFailover)
		}
	}
	b, _ := json.Marshal(Change{Kind: ChangeFailover})
	if !strings.Contains(string(b), `"kind":"standby-takeover"`) {
		t.Errorf("written %s: this release writes the old name", b)
	}
}

// TestHistoryReadsOneRevision: a history read ranges several prefixes (the
// addresses', the nodes'), all at one revision, the one it returns, so
// that vip history -f, which watches from it, misses nothing: a change
// written between two ranges was in neither the read (its prefix read
// before it) nor the watch (from the later range's revision). The e2e
// TestHistory lost a's claims so under CI's load. Writers and readers run
// together; every change at or before a read's revision must be in it.
func TestHistoryReadsOneRevision(t *testing.T) {
	c, ctx := embeddedClient(t)
	const writes = 120
	done := make(chan error, 1)
	go func() {
		for i := range writes {
			addr := netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})
			node := fmt.Sprintf("n%d", i)
			if err := c.AppendHistory(ctx, []Change{{Kind: ChangeClaim, Addr: addr, Node: node}}); err != nil {
				done <- err
				return
			}
			if err := c.AppendHistory(ctx, []Change{{Kind: ChangeCordon, Node: node}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	type read struct {
		rev  int64
		revs map[int64]bool
	}
	var reads []read
	for writing := true; writing; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			writing = false
		default:
		}
		h, rev, _, err := c.History(ctx, HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		r := read{rev: rev, revs: map[int64]bool{}}
		for _, ch := range h {
			r.revs[ch.Rev] = true
		}
		reads = append(reads, r)
	}
	all, _, _, err := c.History(ctx, HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2*writes {
		t.Fatalf("the history holds %d changes, want %d", len(all), 2*writes)
	}
	for i, r := range reads {
		for _, ch := range all {
			if ch.Rev <= r.rev && !r.revs[ch.Rev] {
				t.Fatalf("read %d of %d at revision %d misses %s written at revision %d", i+1, len(reads), r.rev, ch.Describe(), ch.Rev)
			}
		}
	}
	t.Logf("%d reads while %d changes were written", len(reads), 2*writes)
}
