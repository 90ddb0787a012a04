package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// What the history of ownership costs the fleet's etcd: its records and
// their bytes once the fleet filled (beside the claims' keys and etcd's
// database), the reads of vip history, the records a move adds, and the
// bound (historyBound a subject) once one address moved past it. The
// write cost is the claim's own row: each claim's transaction writes its
// record.

// fleetHistory is what the step measured of the history.
type fleetHistory struct {
	// Filled and Moved are the history after the fill and after the
	// moves; Claims the claims' keys after the fill.
	Filled, Moved, Claims keyCount
	// DB and DBInUse are etcd's database, allocated and in use, after the
	// fill (maintenance Status).
	DB, DBInUse int64
	// ReadAddr, ReadNode and ReadAll are Client.History of one address,
	// of one node, and of everything.
	ReadAddr, ReadNode, ReadAll historyRead
	// Churned is the address moved ChurnMoves times, back and forth
	// between two agents, and ChurnKept the records it holds after its
	// trim; Bound the history after that.
	Churned    netip.Addr
	ChurnMoves int
	ChurnKept  int64
	Bound      keyCount
}

// keyCount sums the keys under a prefix: how many, their bytes (key and
// value), and the directory (a history's subject) holding the most.
type keyCount struct {
	Keys, Bytes int64
	MaxDir      string
	MaxKeys     int64
}

// perKey is the bytes of one key and its value.
func (k keyCount) perKey() float64 { return float64(k.Bytes) / float64(max(k.Keys, 1)) }

// historyRead is the Client.History calls of one query, sorted, and the
// records the last one returned.
type historyRead struct {
	Took    []time.Duration
	Records int
}

// The reads' repetitions: a subject's history is small (a node's reads its own
// and its index), the whole of it is not.
const (
	readAddrTimes = 20
	readNodeTimes = 5
	readAllTimes  = 3
)

// countKeys reads every key under prefix, page by page.
func countKeys(ctx context.Context, c *store.Client, prefix string) (keyCount, error) {
	var k keyCount
	dirs := map[string]int64{}
	_, err := c.Range(ctx, prefix, func(kv *mvccpb.KeyValue) {
		k.Keys++
		k.Bytes += int64(len(kv.Key) + len(kv.Value))
		dir := string(kv.Key[:max(strings.LastIndexByte(string(kv.Key), '/'), 0)])
		if strings.Contains(dir, "/history/by-node/") {
			// A node's index of its addresses' changes keeps more
			// (store.NodeIndexKeep): the bound is of the subjects.
			return
		}
		dirs[dir]++
		if n := dirs[dir]; n > k.MaxKeys {
			k.MaxDir, k.MaxKeys = dir, n
		}
	})
	if err != nil {
		return keyCount{}, fmt.Errorf("count the keys under %s: %w", prefix, err)
	}
	k.MaxDir = strings.TrimPrefix(k.MaxDir, c.Keys.History())
	return k, nil
}

// measureHistory reads, after the fill, the history's size beside the
// claims' and etcd's database, and times the reads of vip history.
func measureHistory(ctx context.Context, c *store.Client, agents []*fleetAgent, cfg fleetConfig, logf func(string, ...any)) (*fleetHistory, error) {
	h := &fleetHistory{}
	var err error
	if h.Filled, err = countKeys(ctx, c, c.Keys.History()); err != nil {
		return nil, err
	}
	if h.Claims, err = countKeys(ctx, c, c.Keys.Claims()); err != nil {
		return nil, err
	}
	st, err := c.Status(ctx, c.Endpoints[0])
	if err != nil {
		return nil, fmt.Errorf("etcd's status: %w", c.Explain(err))
	}
	h.DB, h.DBInUse = st.DbSize, st.DbSizeInUse
	logf("  history: %s records, %s (%.0f bytes a record); claims %s keys, %s; etcd's database %s, %s in use",
		fmtCount(h.Filled.Keys), fmtMB(h.Filled.Bytes/1024), h.Filled.perKey(), fmtCount(h.Claims.Keys), fmtMB(h.Claims.Bytes/1024),
		fmtMB(h.DB/1024), fmtMB(h.DBInUse/1024))

	rng := rand.New(rand.NewPCG(3, uint64(len(agents))))
	reads := []struct {
		r     *historyRead
		times int
		q     func() store.HistoryQuery
	}{
		{&h.ReadAddr, readAddrTimes, func() store.HistoryQuery {
			return store.HistoryQuery{Addr: fleetAddr(rng.IntN(len(agents) * cfg.PerAgent))}
		}},
		{&h.ReadNode, readNodeTimes, func() store.HistoryQuery { return store.HistoryQuery{Node: agents[rng.IntN(len(agents))].node} }},
		{&h.ReadAll, readAllTimes, func() store.HistoryQuery { return store.HistoryQuery{} }},
	}
	for _, rd := range reads {
		for range rd.times {
			t0 := time.Now()
			changes, _, _, err := c.History(ctx, rd.q())
			if err != nil {
				return nil, fmt.Errorf("read the history: %w", err)
			}
			rd.r.Took = append(rd.r.Took, time.Since(t0))
			rd.r.Records = len(changes)
		}
		slices.Sort(rd.r.Took)
	}
	logf("  vip history: of an address %s, of a node %s, of all %s", h.ReadAddr, h.ReadNode, h.ReadAll)
	return h, nil
}

func (r historyRead) String() string {
	return fmt.Sprintf("p50 %s, p99 %s over %d (%s records)", fmtDur(pctl(r.Took, 0.5)), fmtDur(pctl(r.Took, 0.99)), len(r.Took), fmtCount(r.Records))
}

// churnMoves is how often the bound's check moves one address: past the
// bound by a quarter.
const churnMoves = historyBound * 5 / 4

// historyBound is the most records a subject written by two nodes may
// hold: store.HistoryKeep, and up to store.HistoryTrimEvery-1 more from
// each writer since its last trim. The churn's address has two writers,
// the moves' two ends; every other subject fewer.
const historyBound = store.HistoryKeep + 2*(store.HistoryTrimEvery-1)

// boundHistory counts the history after the moves, then moves one address
// back and forth churnMoves times, waits for its trim, and checks that no
// subject holds more than historyBound records.
func boundHistory(ctx context.Context, c *store.Client, mover *fleet.Mover, agents []*fleetAgent, h *fleetHistory, logf func(string, ...any)) error {
	var err error
	if h.Moved, err = countKeys(ctx, c, c.Keys.History()); err != nil {
		return err
	}
	// Not fleetAddr(0): 198.51.100.1 is every agent's own address
	// (fleetPrefixes), which no move takes to another.
	a := fleetAddr(1)
	from := slices.IndexFunc(agents, func(ag *fleetAgent) bool { return len(ag.eng.Status(a)) == 1 })
	if from < 0 {
		return fmt.Errorf("bound the history: no agent holds %s", a)
	}
	pair := [2]*fleetAgent{agents[from], agents[(from+1)%len(agents)]}
	for i := range churnMoves {
		to := pair[(i+1)%2]
		rs, err := mover.Move(ctx, store.MoveRequest{Addrs: []netip.Addr{a}, To: to.node})
		if err != nil {
			return fmt.Errorf("bound the history: move %s to %s: %w", a, to.node, err)
		}
		if len(rs) != 1 || !rs[0].Done() {
			return fmt.Errorf("bound the history: move %s to %s: not live on the target: %+v", a, to.node, rs)
		}
	}
	h.Churned, h.ChurnMoves = a, churnMoves
	// The trim runs behind the write: wait for it, a while.
	subject := c.Keys.HistoryOf(store.AddrSubject(a))
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := c.Get(ctx, subject, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("bound the history: count %s's records: %w", a, c.Explain(err))
		}
		h.ChurnKept = resp.Count
		if h.ChurnKept <= historyBound || time.Now().After(deadline) {
			break
		}
		if err := waitCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	if h.Bound, err = countKeys(ctx, c, c.Keys.History()); err != nil {
		return err
	}
	logf("  history after the moves: %s records; %s moved %d times keeps %d; the most a subject holds: %d (%s)",
		fmtCount(h.Moved.Keys), a, churnMoves, h.ChurnKept, h.Bound.MaxKeys, h.Bound.MaxDir)
	if h.Bound.MaxKeys > historyBound {
		return fmt.Errorf("the history of %s holds %d records, over its bound of %d", h.Bound.MaxDir, h.Bound.MaxKeys, historyBound)
	}
	return nil
}
