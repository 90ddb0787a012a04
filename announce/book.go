package announce

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// ClaimOptions are the per-claim settings: how its bursts go, and whether
// vip also adds the address to the interface.
type ClaimOptions struct {
	// Window and Interval shape each gratuitous burst; zero takes the
	// engine's defaults.
	Window   time.Duration `json:"window,omitempty"`
	Interval time.Duration `json:"interval,omitempty"`
	// SingleRound sends one round for each claim or refresh, and no
	// window of them (vip claim --window 0).
	SingleRound bool `json:"single_round,omitempty"`
	// Frames are the gratuitous frame kinds; zero takes the engine's.
	Frames FrameKinds `json:"frames,omitempty"`
	// RefreshEvery, when positive, re-arms the window on that period.
	RefreshEvery time.Duration `json:"refresh_every,omitempty"`
	// Assign asks for the address to be added to the interface too, so
	// local services receive its traffic.
	Assign bool `json:"assign,omitempty"`
	// ProbeEvery is the period of the probes that find silent competing
	// claimers; zero takes DefaultProbeEvery.
	ProbeEvery time.Duration `json:"probe_every,omitempty"`
	// ProbesOff sends no probes for the claim (vip claim --probe-every 0).
	ProbesOff bool `json:"probes_off,omitempty"`
	// OnConflict says what to do when another MAC answers for the
	// address; empty means PolicyDefend.
	OnConflict ConflictPolicy `json:"on_conflict,omitempty"`
	// Group names the unit the address belongs to (vip claim --group):
	// its addresses are claimed, released and moved together. The engine
	// keeps it with the claim; it changes nothing of how it answers.
	Group string `json:"group,omitempty"`
}

// Claim is the record of one held address: what the book keeps.
type Claim struct {
	Addr      netip.Addr `json:"addr"`
	Interface string     `json:"interface"`
	// ClaimedAt is when this host became the owner.
	ClaimedAt time.Time `json:"claimed_at"`
	// RefreshedAt is the latest claim or refresh, from which the current
	// gratuitous window is counted.
	RefreshedAt time.Time    `json:"refreshed_at"`
	Options     ClaimOptions `json:"options"`
	// AddedAddress is set when vip added Addr to the interface itself (for
	// Assign) and so must remove it at release; never for an address that
	// was there before.
	AddedAddress bool `json:"added_address,omitempty"`
}

// A Book keeps the record of which addresses this host holds. The engine
// writes to it before it answers for an address and after it stops, so a book
// that persists (a state file) can re-adopt claims after a crash. An error
// from Put fails the whole request: a Book does not refuse some addresses
// and record the others (a claim another host holds is refused before the
// engine, by fleet.Member).
//
// Put and Delete take batches, so that claiming 10,000 addresses costs one
// write of a persistent book, not 10,000.
type Book interface {
	// Put records new claims or the refresh of held ones.
	Put(ctx context.Context, claims ...Claim) error
	// Delete forgets the claims of addrs. Deleting an unknown address is
	// not an error.
	Delete(ctx context.Context, addrs ...netip.Addr) error
	// List returns every recorded claim.
	List(ctx context.Context) ([]Claim, error)
}

// A SyncBook is a Book that can record claims before they are durable:
// PutUnsynced records them where an agent started after this process dies
// finds them, and Sync makes them survive a power cut too. The engine sends
// a new claim's first round between the two, and answers the request only
// after Sync: the disk's flush (a millisecond, tens on a busy disk) is
// then not on the way to the first frame. Delete stays durable on return:
// a release a power cut forgot would be claimed again at the next start.
type SyncBook interface {
	Book
	PutUnsynced(ctx context.Context, claims ...Claim) error
	Sync(ctx context.Context) error
}

// MemBook is a Book in memory, for a process whose claims end with it.
type MemBook struct {
	mu     sync.Mutex
	claims map[netip.Addr]Claim
}

// NewMemBook returns an empty MemBook.
func NewMemBook() *MemBook { return &MemBook{claims: make(map[netip.Addr]Claim)} }

// Put records claims.
func (b *MemBook) Put(_ context.Context, claims ...Claim) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range claims {
		b.claims[c.Addr] = c
	}
	return nil
}

// Delete forgets addrs.
func (b *MemBook) Delete(_ context.Context, addrs ...netip.Addr) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range addrs {
		delete(b.claims, a)
	}
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
