package announce

import "sync/atomic"

// Totals counts what an engine has done since it started, over every claim
// it has held, released ones included: the counters an operator graphs.
// Unlike a claim's own counts they do not start again when an address is
// released and claimed anew.
type Totals struct {
	// Answered counts requests answered (ARP replies and solicited
	// advertisements).
	Answered uint64
	// GratuitousFrames counts the frames of gratuitous rounds sent.
	GratuitousFrames uint64
	// ProbeFrames counts the probes sent for silent competing claimers.
	ProbeFrames uint64
	// Conflicts counts conflict reports: another MAC seen answering for a
	// held address (the detector reports a steady one about once a second).
	Conflicts uint64
	// ClaimerFrames counts the frames those competing claimers were seen
	// sending.
	ClaimerFrames uint64
}

// totals are the engine's running Totals. The answers of released claims
// are kept under the engine's lock (they are added up with the held ones');
// the rest are counted where they happen, by the sender and the guard.
type totals struct {
	answeredReleased uint64
	gratuitousFrames atomic.Uint64
	probeFrames      atomic.Uint64
	conflicts        atomic.Uint64
	claimerFrames    atomic.Uint64
}

// Totals returns what the engine has done since it started.
func (e *Engine) Totals() Totals {
	e.mu.Lock()
	answered := e.totals.answeredReleased
	for _, cs := range e.claims {
		answered += e.answeredLocked(cs)
	}
	e.mu.Unlock()
	return Totals{
		Answered:         answered,
		GratuitousFrames: e.totals.gratuitousFrames.Load(),
		ProbeFrames:      e.totals.probeFrames.Load(),
		Conflicts:        e.totals.conflicts.Load(),
		ClaimerFrames:    e.totals.claimerFrames.Load(),
	}
}
