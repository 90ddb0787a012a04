package sniff

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vipctl/vip/internal/wire"
)

// Defaults of DetectorConfig.
const (
	DefaultRepeat      = time.Second
	DefaultMaxOwners   = 4096
	DefaultMaxClaimers = 16
)

// DetectorConfig configures a Detector. The zero value gives the defaults
// and drops every event.
type DetectorConfig struct {
	// OnEvent receives each event, a Conflict or an OwnerChange, on the
	// goroutine that called Observe and after the Detector's lock is
	// released, so it may call Hold or Drop. It should return quickly: a
	// capture waits for it. Nil drops the events; Conflicts still lists
	// the competing claimers.
	OnEvent func(Event)
	// Repeat is the least time, in capture time, between two events about
	// the same competing claimer of an address, or about the owner of the
	// same address. The first is always reported at once; frames in
	// between are counted, so a steady competitor is reported about once
	// per Repeat with its count so far, and a flood of frames cannot
	// become a flood of events. Zero means DefaultRepeat; a negative value
	// reports every frame.
	Repeat time.Duration
	// MaxOwners caps how many addresses not held the detector tracks the
	// owner of; beyond it the least recently seen is forgotten. Zero means
	// DefaultMaxOwners.
	MaxOwners int
	// MaxClaimers caps the competing MACs kept per held address; beyond it
	// the least recently seen makes room. Zero means DefaultMaxClaimers.
	MaxClaimers int
}

// Event is what a Detector reports: a Conflict or an OwnerChange.
type Event interface {
	event()
}

// Conflict is a competing claimer of an address this host holds: a MAC not
// ours that sent an ARP request or reply with the address as sender IP, a
// neighbor advertisement for it, or a neighbor solicitation from it (RFC
// 5227 section 2.4).
type Conflict struct {
	// Addr is the held address.
	Addr netip.Addr `json:"addr"`
	// MAC is the competing claimer's hardware address, as the frame gave
	// it to neighbours.
	MAC wire.MAC `json:"mac"`
	// Kind is the kind of its latest frame.
	Kind Kind `json:"kind"`
	// First and Last are the capture times of its first and latest frame.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// Count is the number of its frames since First.
	Count uint64 `json:"count"`
}

// OwnerChange reports that an address this host does not hold moved to
// another MAC, as arpwatch's "changed ethernet address", or back to the MAC
// it had before the previous change, as arpwatch's "flip flop".
type OwnerChange struct {
	Addr netip.Addr `json:"addr"`
	// Old is the MAC that had the address, New the one that has it now.
	Old wire.MAC `json:"old"`
	New wire.MAC `json:"new"`
	// FlipFlop reports that New is the MAC the address had before Old.
	FlipFlop bool `json:"flip_flop"`
	// Kind is the kind of the frame that showed New.
	Kind Kind `json:"kind"`
	// Time is that frame's capture time; OldLastSeen is when Old was last
	// seen with the address.
	Time        time.Time `json:"time"`
	OldLastSeen time.Time `json:"old_last_seen"`
	// Unreported counts the changes of this address that came within the
	// Repeat interval of an earlier event and were not reported on their
	// own.
	Unreported uint64 `json:"unreported,omitempty"`
}

func (Conflict) event()    {}
func (OwnerChange) event() {}

// DetectorStats says how much a Detector tracks and how much it forgot.
type DetectorStats struct {
	// Held is the number of addresses held.
	Held int `json:"held"`
	// Owners is the number of addresses whose owner is tracked.
	Owners int `json:"owners"`
	// OwnersEvicted counts owners forgotten to make room for new ones.
	OwnersEvicted uint64 `json:"owners_evicted"`
	// ClaimersEvicted counts competing claimers forgotten to make room
	// for new ones.
	ClaimersEvicted uint64 `json:"claimers_evicted"`
}

// Detector finds competing claimers of the addresses this host holds, and
// follows the owners of every other address. It reads only the claim a frame
// makes (see Observation.Claim), on the untagged segment: a frame with a
// VLAN tag belongs to another segment and is ignored. A Detector is an
// Observer, and is safe for concurrent use.
type Detector struct {
	mu              sync.Mutex
	onEvent         func(Event)
	repeat          time.Duration
	maxClaimers     int
	held            map[netip.Addr]*held
	owners          *lru[netip.Addr, owner]
	claimersEvicted uint64
}

// held is an address this host holds: the MACs it holds it with, and the
// competing claimers seen.
type held struct {
	ours     []wire.MAC
	claimers []claimer
}

type claimer struct {
	Conflict
	reported time.Time // capture time of the last event about it
}

// owner is who has an address this host does not hold.
type owner struct {
	mac, prev  wire.MAC
	hasPrev    bool
	lastSeen   time.Time
	reported   time.Time // capture time of the last event about it
	unreported uint64
}

// NewDetector returns a Detector that holds no address yet.
func NewDetector(cfg DetectorConfig) (*Detector, error) {
	if cfg.MaxOwners < 0 || cfg.MaxClaimers < 0 {
		return nil, fmt.Errorf("detector caps must not be negative: owners %d, claimers %d", cfg.MaxOwners, cfg.MaxClaimers)
	}
	repeat := cfg.Repeat
	if repeat == 0 {
		repeat = DefaultRepeat
	}
	return &Detector{
		onEvent:     cfg.OnEvent,
		repeat:      repeat,
		maxClaimers: orDefault(cfg.MaxClaimers, DefaultMaxClaimers),
		held:        make(map[netip.Addr]*held),
		owners:      newLRU[netip.Addr, owner](orDefault(cfg.MaxOwners, DefaultMaxOwners)),
	}, nil
}

// Hold makes addr an address this host holds with the hardware addresses
// ours: from now on a claim of addr by any other MAC is a Conflict. Holding
// an address again replaces its MACs and keeps the claimers seen so far.
func (d *Detector) Hold(addr netip.Addr, ours ...net.HardwareAddr) error {
	if !addr.IsValid() || addr.IsUnspecified() {
		return fmt.Errorf("hold %v: not a usable address", addr)
	}
	addr = addr.Unmap().WithZone("")
	if len(ours) == 0 {
		return fmt.Errorf("hold %s: no hardware address of ours given", addr)
	}
	macs := make([]wire.MAC, 0, len(ours))
	for _, hw := range ours {
		m, err := wire.MACFrom(hw)
		if err != nil {
			return fmt.Errorf("hold %s: %w", addr, err)
		}
		macs = append(macs, m)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if h, ok := d.held[addr]; ok {
		h.ours = macs
		return nil
	}
	d.held[addr] = &held{ours: macs}
	// Whoever had the address before is no owner to compare with once
	// it is released again.
	d.owners.remove(addr)
	return nil
}

// Drop stops holding addr and forgets its competing claimers. Dropping an
// address not held does nothing.
func (d *Detector) Drop(addr netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.held, addr.Unmap().WithZone(""))
}

// Observe checks the claim o makes, if any, and reports a Conflict or an
// OwnerChange through the OnEvent function.
func (d *Detector) Observe(o Observation) {
	if o.VLAN != 0 {
		return
	}
	addr, mac, ok := o.Claim()
	if !ok || mac.IsZero() {
		return
	}
	var ev Event
	d.mu.Lock()
	if h, isHeld := d.held[addr]; isHeld {
		if !slices.Contains(h.ours, mac) && !slices.Contains(h.ours, o.EthSrc) {
			if c, report := d.conflict(h, addr, mac, o); report {
				ev = c
			}
		}
	} else if ch, report := d.ownership(addr, mac, o); report {
		ev = ch
	}
	d.mu.Unlock()
	if ev != nil && d.onEvent != nil {
		d.onEvent(ev)
	}
}

// due reports whether an event last reported at last may be followed by
// another at now.
func (d *Detector) due(last, now time.Time) bool {
	return d.repeat < 0 || now.Sub(last) >= d.repeat
}

func (d *Detector) conflict(h *held, addr netip.Addr, mac wire.MAC, o Observation) (Conflict, bool) {
	for i := range h.claimers {
		c := &h.claimers[i]
		if c.MAC != mac {
			continue
		}
		c.Count++
		c.Kind = o.Kind
		c.Last = later(c.Last, o.Time)
		if !d.due(c.reported, o.Time) {
			return Conflict{}, false
		}
		c.reported = o.Time
		return c.Conflict, true
	}
	c := claimer{
		Conflict: Conflict{Addr: addr, MAC: mac, Kind: o.Kind, First: o.Time, Last: o.Time, Count: 1},
		reported: o.Time,
	}
	if len(h.claimers) < d.maxClaimers {
		h.claimers = append(h.claimers, c)
	} else {
		oldest := 0
		for i := range h.claimers {
			if h.claimers[i].Last.Before(h.claimers[oldest].Last) {
				oldest = i
			}
		}
		h.claimers[oldest] = c
		d.claimersEvicted++
	}
	return c.Conflict, true
}

func (d *Detector) ownership(addr netip.Addr, mac wire.MAC, o Observation) (OwnerChange, bool) {
	ow, ok := d.owners.get(addr)
	if !ok {
		*d.owners.add(addr) = owner{mac: mac, lastSeen: o.Time}
		return OwnerChange{}, false
	}
	if ow.mac == mac {
		ow.lastSeen = later(ow.lastSeen, o.Time)
		return OwnerChange{}, false
	}
	ch := OwnerChange{
		Addr:        addr,
		Old:         ow.mac,
		New:         mac,
		FlipFlop:    ow.hasPrev && ow.prev == mac,
		Kind:        o.Kind,
		Time:        o.Time,
		OldLastSeen: ow.lastSeen,
	}
	ow.prev, ow.hasPrev, ow.mac, ow.lastSeen = ow.mac, true, mac, o.Time
	if !ow.reported.IsZero() && !d.due(ow.reported, o.Time) {
		ow.unreported++
		return OwnerChange{}, false
	}
	ch.Unreported, ow.unreported = ow.unreported, 0
	ow.reported = o.Time
	return ch, true
}

// Conflicts returns every competing claimer of the held addresses, sorted by
// address, then by when each was first seen.
func (d *Detector) Conflicts() []Conflict {
	d.mu.Lock()
	var out []Conflict
	for _, h := range d.held {
		for _, c := range h.claimers {
			out = append(out, c.Conflict)
		}
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b Conflict) int {
		return cmp.Or(a.Addr.Compare(b.Addr), a.First.Compare(b.First), slices.Compare(a.MAC[:], b.MAC[:]))
	})
	return out
}

// Owner returns the MAC that has addr, an address not held, as last seen,
// and when it was last seen with it.
func (d *Detector) Owner(addr netip.Addr) (wire.MAC, time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ow, ok := d.owners.peek(addr.Unmap().WithZone(""))
	if !ok {
		return wire.MAC{}, time.Time{}, false
	}
	return ow.mac, ow.lastSeen, true
}

// Stats returns how much the detector tracks and how much it forgot.
func (d *Detector) Stats() DetectorStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return DetectorStats{
		Held:            len(d.held),
		Owners:          d.owners.len(),
		OwnersEvicted:   d.owners.evicted,
		ClaimersEvicted: d.claimersEvicted,
	}
}
