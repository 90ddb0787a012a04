package fleet

import (
	"time"

	"github.com/vipctl/vip/internal/api"
)

// NodeHealth says what a node's renewals say, by the rule its agent keeps
// (TimingFor), from renewedAgo, how long at least since its last renewal
// (store.LeaseAge.RenewedAgo): live while it renews, stale once two
// renewals were certainly missed, fenced once its last renewal is
// certainly older than its fence-after (an agent that runs has stopped
// answering then). Each is said up to a second late, never early.
func NodeHealth(ttl, renewedAgo time.Duration) string {
	t := TimingFor(ttl)
	switch {
	case renewedAgo >= t.FenceAfter():
		return api.HealthFenced
	case renewedAgo > 2*t.Renew:
		return api.HealthStale
	}
	return api.HealthLive
}

// Annotate marks the fleet's nodes with their health, where their leases
// were read, and the addresses of a node whose renewals stopped as stale
// or fenced (a move under way stays moving).
func Annotate(f *api.FleetResponse) {
	health := map[string]string{}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		if n.RenewedAgo == nil {
			continue
		}
		n.Health = NodeHealth(time.Duration(n.LeaseTTL), time.Duration(*n.RenewedAgo))
		health[n.Node] = n.Health
	}
	for i := range f.Claims {
		c := &f.Claims[i]
		if c.State != api.FleetHolding {
			continue
		}
		switch health[c.Node] {
		case api.HealthStale:
			c.State = api.FleetUnrenewed
		case api.HealthFenced:
			c.State = api.FleetFenced
		}
	}
}
