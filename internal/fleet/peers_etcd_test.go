package fleet_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// countingLedger counts the reads of every node's record.
type countingLedger struct {
	fleet.Ledger
	nodeReads atomic.Int64
}

func (l *countingLedger) Nodes(ctx context.Context) ([]store.Node, int64, error) {
	l.nodeReads.Add(1)
	return l.Ledger.Nodes(ctx)
}

// TestPeersFromTheWatch has a, with the failsafe, on a real etcd, and b
// and c joining after it: a learns of each from its watch of the nodes'
// records, and writes its set naming them, without reading every record
// again; c leaving takes it out of the set the same way. Before, each
// change had every node read every record: at a thousand nodes joining,
// the whole store's work.
func TestPeersFromTheWatch(t *testing.T) {
	ctx, c := embeddedStore(t)
	l := &countingLedger{Ledger: store.NewLedger(c, testLog(t))}
	eng := newFakeEngine()
	eng.deadline = announce.NewDeadline(nil)
	a, err := fleet.Join(ctx, fleet.Config{Ledger: l, Node: "a", TTL: 10 * time.Second, Log: testLog(t), Deadline: eng.deadline, Failsafe: failsafeConfig(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	setOfA := func() []string {
		// The CLI's read, every record with the sets: not a's reads.
		sets, nodes, _, err := c.FailsafeSets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sets {
			if s.Node == "a" {
				return s.Named(nodes)
			}
		}
		return nil
	}
	join := func(node string) fleet.LeaseID {
		lease, _, _, err := l.Register(ctx, 30*time.Second, keyedRecord(t, node), nil, func(store.Node) bool { return false })
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	// a reads its peers as it starts, and again for its registration
	// (which asks for a read), a renewal period on. Its count of them, a
	// TTL apart (10 s), comes after the test.
	eventually(t, func() bool { return l.nodeReads.Load() >= 2 }, "a did not read its peers as it joined")
	reads := l.nodeReads.Load()
	join("b")
	leaseC := join("c")
	eventually(t, func() bool { return slices.Equal(setOfA(), []string{"b", "c"}) }, "a's failsafe set does not name b and c, who joined")
	if err := l.Revoke(ctx, leaseC); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return slices.Equal(setOfA(), []string{"b"}) }, "a's failsafe set still names c, whose lease went")
	if got := l.nodeReads.Load() - reads; got != 0 {
		t.Fatalf("a read every node's record %d times for what its watch told of, want none", got)
	}
}
