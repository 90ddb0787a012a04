package store

// Reading the history: a query's records at one revision, and a watch of
// the records written after it.

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// HistoryQuery says which records to read.
type HistoryQuery struct {
	// Addr, when valid, reads the address's records and the node-wide
	// ones that list it; Node, when set, the node's own records and
	// those of the addresses it owned, lost or let go. Neither: all.
	Addr netip.Addr
	Node string
	// Addrs, when set, reads the records of each of them as Addr reads
	// one's: a group's (vip history --group).
	Addrs []netip.Addr
	// Since, when set, leaves out records older than it (by their time).
	Since time.Time
	// After, when set, leaves out records of that revision or older.
	After int64
}

// Match says whether c is one the query reads.
func (q HistoryQuery) Match(c Change) bool {
	switch {
	case q.Addr.IsValid() && !c.Concerns(q.Addr):
		return false
	case len(q.Addrs) > 0 && !slices.ContainsFunc(q.Addrs, c.Concerns):
		return false
	case q.Node != "" && c.Node != q.Node && c.From != q.Node:
		return false
	case !q.Since.IsZero() && c.Time.Before(q.Since):
		return false
	case q.After > 0 && c.Rev <= q.After:
		return false
	}
	return true
}

// History reads the records q asks for, in the store's order (by
// revision), and the revision read. A record vip cannot read is skipped
// and counted.
func (c *Client) History(ctx context.Context, q HistoryQuery) (changes []Change, rev int64, skipped int, err error) {
	addrs := q.Addrs
	if q.Addr.IsValid() {
		addrs = append(slices.Clone(addrs), q.Addr)
	}
	var prefixes []string
	switch {
	case q.Node != "":
		// The node's own records, and its index's copies of the
		// changes of the addresses it took, lost or let go.
		prefixes = []string{c.Keys.HistoryOf(NodeSubject(q.Node)), c.Keys.HistoryOf(NodeIndexSubject(q.Node))}
	case len(addrs) > 0:
		// The addresses' own records, and the nodes' (which a fence
		// lists them in).
		for _, a := range addrs {
			prefixes = append(prefixes, c.Keys.HistoryOf(AddrSubject(a)))
		}
		prefixes = append(prefixes, c.Keys.HistoryOf("node"))
	default:
		// All of it but the node index, whose records are copies.
		prefixes = []string{c.Keys.HistoryOf("addr"), c.Keys.HistoryOf("node")}
	}
	// Every prefix at the revision the first was read at: a change made
	// between two ranges would be in neither the read nor a watch from
	// the later one's revision (vip history -f lost a's claims so).
	for _, prefix := range prefixes {
		r, err := c.rangeAt(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), rev, func(kv *mvccpb.KeyValue) {
			if ch, ok := readChange(kv); ok {
				changes = append(changes, ch)
			} else {
				skipped++
			}
		})
		if err != nil {
			return nil, 0, 0, err
		}
		rev = r
	}
	changes = slices.DeleteFunc(changes, func(ch Change) bool { return !q.Match(ch) })
	SortChanges(changes)
	return changes, rev, skipped, nil
}

// SortChanges sorts changes in the store's order: by revision, and the
// changes of one transaction as it lists them.
func SortChanges(changes []Change) {
	slices.SortFunc(changes, func(x, y Change) int {
		if c := cmp.Compare(x.Rev, y.Rev); c != 0 {
			return c
		}
		return cmp.Compare(x.Seq, y.Seq)
	})
}

// readChange decodes a history record with its revision.
func readChange(kv *mvccpb.KeyValue) (Change, bool) {
	ch, err := Decode[Change](string(kv.Key), kv.Value)
	if err != nil {
		return Change{}, false
	}
	ch.Rev = kv.CreateRevision
	return ch, true
}

// WatchHistory sends, batch by batch from after rev, the records q matches
// as they are written, until ctx is done or the watch breaks (the channel
// closes then; a compacted revision also ends it).
func (c *Client) WatchHistory(ctx context.Context, q HistoryQuery, rev int64) <-chan []Change {
	out := make(chan []Change)
	index := c.Keys.History() + nodeIndexDir
	go func() {
		defer close(out)
		wch := c.Watch(clientv3.WithRequireLeader(ctx), c.Keys.History(), clientv3.WithPrefix(), clientv3.WithRev(rev+1),
			clientv3.WithFilterDelete())
		for resp := range wch {
			if resp.Err() != nil {
				return
			}
			var batch []Change
			for _, ev := range resp.Events {
				if strings.HasPrefix(string(ev.Kv.Key), index) {
					continue // a copy of a record under its address
				}
				if ch, ok := readChange(ev.Kv); ok && ev.IsCreate() && q.Match(ch) {
					batch = append(batch, ch)
				}
			}
			if len(batch) == 0 {
				continue
			}
			SortChanges(batch)
			select {
			case out <- batch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
