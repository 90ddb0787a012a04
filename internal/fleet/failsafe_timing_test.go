package fleet

import (
	"testing"
	"time"
)

// TestFailsafePromiseLeavesALifetime: the deadline a failsafe round gives
// an owner that added its addresses (--assign) leaves, however late in the
// round's timeout it is read, the second of lifetime the kernel needs and
// the quarter of a second it may take past it, at every TTL; at the
// default TTL (2 s) the promise of TTL/2 left less than a second, so no
// lifetime fit and the kernel took the addresses off for the whole outage.
// Owners without added addresses keep TTL/2, and no node grants more than
// the longer promise.
func TestFailsafePromiseLeavesALifetime(t *testing.T) {
	for _, ttl := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 6 * time.Second, 30 * time.Second} {
		tm := TimingFor(ttl)
		if left := tm.failsafePromiseAssigned() - tm.failsafeTimeout(); left < assignedLifetimeNeeds {
			t.Errorf("TTL %v: a round read at its timeout leaves %v of deadline, want at least %v", ttl, left, assignedLifetimeNeeds)
		}
		if tm.failsafePromise() != ttl/2 || tm.failsafePromiseAssigned() < tm.failsafePromise() {
			t.Errorf("TTL %v: promises %v and %v (assigned), want TTL/2 and no less", ttl, tm.failsafePromise(), tm.failsafePromiseAssigned())
		}
	}
	if got := TimingFor(2 * time.Second).failsafePromiseAssigned(); got > 1600*time.Millisecond {
		t.Errorf("at the default TTL an owner with added addresses asks a promise of %v: over the 1.6 s it needs", got)
	}
}
