package announce

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Claim is the record of one held address: what the book keeps.
type Claim struct {
	Addr      netip.Addr `json:"addr"`
	Interface string     `json:"interface"`
	// ClaimedAt is when this host became the owner.
	ClaimedAt time.Time `json:"claimed_at"`
	// RefreshedAt is the latest claim or refresh, from which the current
	// gratuitous window is counted.
	RefreshedAt time.Time `json:"refreshed_at"`
}

// A Book keeps the record of which addresses this host holds. The engine
// writes to it before it answers for an address and after it stops, so a book
// that persists (a state file) can re-adopt claims after a crash, and one
// backed by a lease in a coordination store can refuse a claim that another
// host holds, by returning an error from Put.
type Book interface {
	// Put records a new claim or the refresh of a held one.
	Put(ctx context.Context, c Claim) error
	// Delete forgets the claim of addr. Deleting an unknown address is not
	// an error.
	Delete(ctx context.Context, addr netip.Addr) error
	// List returns every recorded claim.
	List(ctx context.Context) ([]Claim, error)
}

// MemBook is a Book in memory, for a process whose claims end with it.
type MemBook struct {
	mu     sync.Mutex
	claims map[netip.Addr]Claim
}

// NewMemBook returns an empty MemBook.
func NewMemBook() *MemBook { return &MemBook{claims: make(map[netip.Addr]Claim)} }

// Put records c.
func (b *MemBook) Put(_ context.Context, c Claim) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.claims[c.Addr] = c
	return nil
}

// Delete forgets addr.
func (b *MemBook) Delete(_ context.Context, addr netip.Addr) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.claims, addr)
	return nil
}

// List returns the claims ordered by address.
func (b *MemBook) List(context.Context) ([]Claim, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Claim, 0, len(b.claims))
	for _, c := range b.claims {
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y Claim) int { return x.Addr.Compare(y.Addr) })
	return out, nil
}
