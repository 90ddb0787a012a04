package fleet

// A claim's keys in the store: each made this node's (acquire), free ones
// a batch per transaction, before the engine claims the address; claims.go
// has the claims themselves.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/store"
)

// keyConcurrency bounds the store transactions of one request in flight.
const keyConcurrency = 16

// taken is an address whose key this call made this node's.
type taken struct {
	claim announce.Claim
	// fresh is set when this call created the key or bound it to this
	// lease, so that undoing the claim deletes it again.
	fresh bool
}

// freshOf returns the addresses of got whose keys this call made: all of
// them when rf is nil, else those rf refused.
func freshOf(got []taken, rf *announce.RefusedError) []netip.Addr {
	refused := map[netip.Addr]bool{}
	if rf != nil {
		for _, r := range rf.Refused {
			refused[r.Addr] = true
		}
	}
	var out []netip.Addr
	for _, t := range got {
		if t.fresh && (rf == nil || refused[t.claim.Addr]) {
			out = append(out, t.claim.Addr)
		}
	}
	return out
}

// acquire makes the keys of items this node's where it can: a key that is
// absent is created, one this node holds under an older lease (its dead
// agent's) is bound to this one, and one another node holds is refused.
// It fails as a whole only when the store cannot be reached at all.
func (m *Member) acquire(ctx context.Context, items []announce.Claim) ([]taken, []announce.Refusal, error) {
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	macs := m.macs()
	var (
		mu      sync.Mutex
		got     []taken
		refused []announce.Refusal
		failed  []error
		g       errgroup.Group
	)
	g.SetLimit(keyConcurrency)
	items, groups := splitGroups(items)
	for _, grp := range groups {
		g.Go(func() error {
			fresh, err := m.acquireGroup(ctx, grp, macs, lease)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				for i, c := range grp {
					got = append(got, taken{claim: c, fresh: fresh[i]})
				}
			case isGroupRefusal(err):
				// A group is taken whole or not at all: each of its
				// addresses is refused for the one that was.
				for _, c := range grp {
					refused = append(refused, announce.Refusal{Addr: c.Addr, Err: fmt.Errorf("group %s not claimed: %w", c.Options.Group, err)})
				}
			default:
				failed = append(failed, err)
			}
			return nil
		})
	}
	// Addresses this node does not hold go in batches, each one
	// transaction when all of its keys are free (the common claim); the
	// rest, and a batch with a key that is not, one by one.
	one, batches := m.freeBatches(items)
	for _, batch := range batches {
		g.Go(func() error {
			ok, err := m.acquireFree(ctx, batch, macs, lease)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed = append(failed, err)
			case ok:
				for _, c := range batch {
					got = append(got, taken{claim: c, fresh: true})
				}
			default:
				one = append(one, batch...)
			}
			return nil
		})
	}
	_ = g.Wait()
	if len(failed) > 0 {
		one = nil // the store failed: nothing is claimed
	}
	for _, c := range one {
		g.Go(func() error {
			fresh, err := m.acquireOne(ctx, c, macs[c.Interface], lease)
			mu.Lock()
			defer mu.Unlock()
			var held *HeldError
			switch {
			case err == nil:
				got = append(got, taken{claim: c, fresh: fresh})
			case errors.As(err, &held):
				refused = append(refused, announce.Refusal{Addr: c.Addr, Err: err})
			default:
				failed = append(failed, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	if len(failed) > 0 {
		m.dropKeys(ctx, freshOf(got, nil))
		return nil, nil, fmt.Errorf("nothing was claimed: %w", failed[0])
	}
	return got, refused, nil
}

// freeBatches splits items, claims of no group, into those this node
// holds already (or waits on), to acquire one by one, and batches of the
// others for acquireFree. A lone address is acquired alone: a batch of one
// saves nothing, and costs a transaction when its key is not free.
func (m *Member) freeBatches(items []announce.Claim) (one []announce.Claim, batches [][]announce.Claim) {
	var free []announce.Claim
	m.mu.Lock()
	for _, c := range items {
		if m.claims.place(c.Addr) == event.StateNone {
			free = append(free, c)
		} else {
			one = append(one, c)
		}
	}
	m.mu.Unlock()
	if len(free) < 2 {
		return append(one, free...), nil
	}
	return one, slices.Collect(slices.Chunk(free, store.MaxGroupAddrs))
}

// acquireFree acquires a batch of claims in one transaction if every key
// is free (Ledger.AcquireFree), and reports whether it did.
func (m *Member) acquireFree(ctx context.Context, batch []announce.Claim, macs map[string]string, lease LeaseID) (bool, error) {
	recs := make([]store.Claim, len(batch))
	now := m.clock.Now()
	for i, c := range batch {
		opts, err := json.Marshal(c.Options)
		if err != nil {
			return false, err
		}
		recs[i] = m.claimRecord(c.Addr, c.Interface, macs[c.Interface], now, opts)
	}
	return guarded(m, ctx, func(ctx context.Context) (bool, error) {
		return m.l.AcquireFree(ctx, lease, recs, store.ActorOf(ctx))
	})
}

func (m *Member) acquireOne(ctx context.Context, c announce.Claim, mac string, lease LeaseID) (fresh bool, err error) {
	opts, err := json.Marshal(c.Options)
	if err != nil {
		return false, err
	}
	// Since is when the key is made, now: a key this node's already
	// keeps the one the store has (Acquire), whatever the engine's.
	rec := m.claimRecord(c.Addr, c.Interface, mac, m.clock.Now(), opts)
	return guarded(m, ctx, func(ctx context.Context) (bool, error) {
		return m.l.Acquire(ctx, lease, rec, store.ActorOf(ctx))
	})
}
