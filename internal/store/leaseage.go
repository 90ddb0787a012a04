package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaseAge is what etcd says of a node's lease when the view was read:
// the TTL it was granted and what is left of it in whole seconds, cut
// down (etcd's resolution: 2 means from 2 s to just under 3 s left).
type LeaseAge struct {
	Granted, Left time.Duration
	// Gone says etcd no longer has the lease (it expired between the
	// view's read of the node and the read of its lease): the node's
	// last renewal is at least a TTL old.
	Gone bool
}

// RenewedAgo is how long at least before the read the node's last renewal
// reached etcd: up to a second more, never less, so that a node is never
// called stale or fenced before it is.
func (a LeaseAge) RenewedAgo() time.Duration {
	if a.Gone {
		return a.Granted
	}
	return max(a.Granted-a.Left-time.Second, 0)
}

// leaseReads bounds the lease reads of one view in flight at once.
const leaseReads = 16

// ReadLeases asks etcd how much is left of each live node's lease, and
// keeps it in v.Leases: a node whose renewals stopped shows it before its
// lease expires. A lease gone meanwhile is kept as Gone: the view read
// the node and its claims before it expired, and lists them as the
// lease's end left them (fenced), never as held. A lease whose read failed
// is left out: the view is no less true without it.
func (c *Client) ReadLeases(ctx context.Context, v *View) {
	var (
		mu sync.Mutex
		g  errgroup.Group
	)
	g.SetLimit(leaseReads)
	v.Leases = make(map[string]LeaseAge, len(v.Nodes))
	for _, n := range v.Nodes {
		if n.Lease == 0 {
			continue
		}
		g.Go(func() error {
			rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
			defer cancel()
			r, err := c.TimeToLive(rctx, clientv3.LeaseID(n.Lease))
			age := LeaseAge{Granted: time.Duration(n.LeaseTTL), Gone: true}
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound), err == nil && r.TTL < 0:
			case err != nil:
				return nil
			default:
				age = LeaseAge{Granted: time.Duration(r.GrantedTTL) * time.Second, Left: time.Duration(r.TTL) * time.Second}
			}
			mu.Lock()
			v.Leases[n.Node] = age
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
}
