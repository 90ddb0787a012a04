package commands

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/store"
)

// TestFailsafeNamedBefore: vip failsafe lists a node that joined again
// since a lapsed owner's set was written, and had a record at the set's
// revision, as named under an earlier record, not as held: the agents let
// it clear the set. One the store cannot tell of (compacted) stays held.
func TestFailsafeNamedBefore(t *testing.T) {
	set := store.FailsafeSet{Versioned: store.Versioned{Format: store.FailsafeFormat}, Node: "a", Lease: 1, Rev: 10}
	nodes := []store.Node{
		{Node: "b", Lease: 2, CreateRev: 5},  // named
		{Node: "c", Lease: 3, CreateRev: 20}, // joined again: had one at 10
		{Node: "d", Lease: 4, CreateRev: 21}, // joined since: none at 10
		{Node: "e", Lease: 5, CreateRev: 22}, // cannot be told
	}
	had := func(node string, rev int64) (bool, error) {
		if rev != 10 {
			t.Errorf("asked of %s at %d, want the set's revision 10", node, rev)
		}
		switch node {
		case "c":
			return true, nil
		case "e":
			return false, errors.New("mvcc: required revision has been compacted")
		}
		return false, nil
	}
	out := failsafeSetOf(set, nodes)
	namedBefore(set, &out, had)
	if !out.Lapsed || !slices.Equal(out.Nodes, []string{"b"}) || !slices.Equal(out.NamedBefore, []string{"c"}) || !slices.Equal(out.Holds, []string{"d", "e"}) {
		t.Fatalf("got %+v; want b named, c named before, d and e held", out)
	}
	if got := describeSet(out); !strings.Contains(got, "d, e take nothing") {
		t.Errorf("described %q", got)
	}
	// Only c held before, now named: the set holds nobody.
	out = api.FailsafeSet{Node: "a", Lapsed: true, Nodes: []string{"b"}, Holds: []string{"c"}}
	namedBefore(set, &out, had)
	if got := describeSet(out); len(out.Holds) != 0 || !strings.Contains(got, "holds no live node") || !strings.Contains(got, "c joined again since") {
		t.Errorf("described %q (%+v); want no node held and c named under an earlier record", got, out)
	}
	// A live owner's set holds nobody, and nothing is read.
	live := append(nodes, store.Node{Node: "a", Lease: 1, CreateRev: 1})
	out = failsafeSetOf(set, live)
	namedBefore(set, &out, func(string, int64) (bool, error) { t.Error("read for a live owner's set"); return false, nil })
	if out.Lapsed || out.NamedBefore != nil {
		t.Errorf("a live owner's set: %+v", out)
	}
}
