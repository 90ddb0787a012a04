package fleet

import (
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
)

// TestFailsafePromiseLeavesALifetime: the deadline a failsafe round gives
// an owner that added its addresses (--assign) is set LifetimeLate before
// the promise's end, and leaves, read a round's timeout and assignedSlack
// after the round was sent, the second of lifetime the kernel needs, at
// every TTL, with the promise in the whole milliseconds it travels in. At
// the default TTL (2 s) the promise of TTL/2 left less than a second, so no
// lifetime fit and the kernel took the addresses off for the whole outage.
// Owners without added addresses keep TTL/2.
func TestFailsafePromiseLeavesALifetime(t *testing.T) {
	for _, ttl := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 6 * time.Second, 30 * time.Second} {
		tm := TimingFor(ttl)
		sent := time.Duration(tm.failsafePromiseAssigned().Milliseconds()) * time.Millisecond
		if left := sent - announce.LifetimeLate - tm.failsafeTimeout() - assignedSlack; left < time.Second {
			t.Errorf("TTL %v: a round read at its timeout and slack leaves %v of deadline, want a second at least", ttl, left)
		}
		if tm.failsafePromise() != ttl/2 || tm.failsafePromiseAssigned() < tm.failsafePromise() {
			t.Errorf("TTL %v: promises %v and %v (assigned), want TTL/2 and no less", ttl, tm.failsafePromise(), tm.failsafePromiseAssigned())
		}
	}
	if got := TimingFor(2 * time.Second).failsafePromiseAssigned(); got > 1800*time.Millisecond {
		t.Errorf("at the default TTL an owner with added addresses asks a promise of %v: over the 1.8 s it needs", got)
	}
}
