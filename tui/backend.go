package tui

import (
	"context"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// Backend is the agent as the view uses it. *api.Client satisfies it
// through ClientBackend; tests use a fake.
type Backend interface {
	Status(ctx context.Context) (api.StatusResponse, error)
	WhoHas(ctx context.Context) (api.WhoHasResponse, error)
	// Events opens the agent's event stream; cancelling ctx or closing
	// the source ends it. A non-zero since starts it with the events
	// later than since that the agent still keeps.
	Events(ctx context.Context, since time.Time) (EventSource, error)
	Claim(ctx context.Context, r api.ClaimRequest) (api.ClaimResponse, error)
	Release(ctx context.Context, r api.AddrsRequest) (api.ReleaseResponse, error)
	Refresh(ctx context.Context, r api.AddrsRequest) (api.RefreshResponse, error)
	// Fleet and Move reach the store through an agent that has one.
	Fleet(ctx context.Context) (api.FleetResponse, error)
	Move(ctx context.Context, r api.MoveRequest) (api.MoveResponse, error)
	// History reads the store's history of an address or of a group's.
	History(ctx context.Context, addr, group string) (api.HistoryResponse, error)
}

// EventSource is an open event stream. Next blocks until an event comes,
// and returns an error once the stream ends.
type EventSource interface {
	Next() (api.Event, error)
	Close() error
}

// ClientBackend returns c as a Backend.
func ClientBackend(c *api.Client) Backend { return clientBackend{c} }

type clientBackend struct{ *api.Client }

func (b clientBackend) Events(ctx context.Context, since time.Time) (EventSource, error) {
	s, err := b.Client.EventsSince(ctx, since)
	if err != nil {
		return nil, err
	}
	return s, nil
}
