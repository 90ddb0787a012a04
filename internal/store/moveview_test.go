package store

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"
)

// TestMoveViewOfReadsItsNodesOnly: the view a move plans on has the target
// with its cordon, the addresses' claims, and the nodes holding them; not
// the fleet's other nodes, whose records are nearly all of a read of the
// nodes at a thousand agents. With no target, only the claims' side.
func TestMoveViewOfReadsItsNodesOnly(t *testing.T) {
	c, ctx := embeddedClient(t)
	l := NewLedger(c, slog.New(slog.DiscardHandler))
	defer l.Close()
	leases := map[string]LeaseID{}
	for _, n := range []string{"a", "b", "c", "d"} {
		lease, _, _, err := l.Register(ctx, 30*time.Second, Node{Node: n, Interfaces: []Interface{{Name: "eth0"}}}, nil, func(Node) bool { return false })
		if err != nil {
			t.Fatalf("register %s: %v", n, err)
		}
		leases[n] = lease
	}
	held := netip.MustParseAddr("198.51.100.10")
	free := netip.MustParseAddr("198.51.100.11")
	if _, err := l.Acquire(ctx, leases["a"], Claim{Addr: held, Node: "a", Interface: "eth0", Since: time.Now()}, Actor{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"b", "c"} {
		if _, _, err := c.PutCordon(ctx, Cordon{Node: n, Since: time.Now()}, 0); err != nil {
			t.Fatalf("cordon %s: %v", n, err)
		}
	}
	v, err := c.MoveViewOf(ctx, []netip.Addr{held, free}, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeNames(v); got != "a b" {
		t.Errorf("nodes read for a move of %s (held by a) and %s to b: %q, want \"a b\"", held, free, got)
	}
	if len(v.Cordons) != 1 || v.Cordons[0].Node != "b" || v.Cordons[0].Rev == 0 {
		t.Errorf("cordons read: %+v, want b's alone, with its revision", v.Cordons)
	}
	if cv, ok := v.ClaimOf(held); !ok || cv.Claim.Node != "a" || cv.CreateRev == 0 {
		t.Errorf("claim of %s: %+v, %v; want a's, with its revision", held, cv, ok)
	}
	if _, ok := v.ClaimOf(free); ok || v.Revision == 0 {
		t.Errorf("claim of %s: %v, revision %d; want none, at a revision", free, ok, v.Revision)
	}
	v, err = c.MoveViewOf(ctx, []netip.Addr{held}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeNames(v); got != "a" || len(v.Cordons) != 0 {
		t.Errorf("with no target: nodes %q and cordons %+v, want a's node alone", got, v.Cordons)
	}
}

func nodeNames(v View) string {
	s := ""
	for _, n := range v.Nodes {
		if s != "" {
			s += " "
		}
		s += n.Node
	}
	return s
}
