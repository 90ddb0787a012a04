package fleet_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/test/labtest"
)

// The fence, the answer deadline and the operations around them, against
// a real etcd: what the member must never do while its lease is in doubt.

// TestLeaseRevokedSilencesAtOnce: when the store says the lease is gone
// before its time (revoked by an operator, say), the answer deadline
// closes at once, though it was seconds ahead, and though the engine's
// Revoke is stuck behind a slow claim: the fence takes no lock that I/O
// holds. Before it, the deadline was ahead and no further than the
// fence's delay from the last renewal.
func TestLeaseRevokedSilencesAtOnce(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, aEng := w.join(t, "a")
	if err := claim(t, a, vip); err != nil {
		t.Fatal(err)
	}
	if left := a.DeadlineLeft(); left <= 0 || left > a.Timing().FenceAfter() || !aEng.deadline.Open() {
		t.Fatalf("a's deadline is %v ahead, want within (0, %v]", left, a.Timing().FenceAfter())
	}
	aEng.suspendWait = make(chan struct{})
	defer close(aEng.suspendWait)
	id, _, _ := a.Lease()
	revoked := time.Now()
	if _, err := w.client(t, "b").Revoke(context.Background(), clientv3.LeaseID(id)); err != nil {
		t.Fatal(err)
	}
	labtest.Eventually(t, 2*a.Timing().Renew+time.Second, func() (bool, string) {
		return !aEng.deadline.Open(), fmt.Sprintf("a's deadline is open %v after its lease was revoked (%v left)", time.Since(revoked).Round(time.Millisecond), a.DeadlineLeft())
	})
	// Closed by the fence, not passed by itself: it reads as closed, not
	// as the time of a renewal.
	if at, _ := aEng.deadline.At(); at > time.Second {
		t.Fatalf("the deadline passed by itself at %v, %v after the revocation: the fence did not close it", at, time.Since(revoked).Round(time.Millisecond))
	}
	if !aEng.holds(vip) {
		t.Fatal("the engine's Revoke ran: the test did not hold it")
	}
}

// TestYieldReachesTheStore: a claim the engine gives up by itself (it
// yielded to a competing claimer) loses its key too, so the store no
// longer names a for it and b can claim it; before, the key stayed a's,
// release said "not held" and a fence and resume would take it back.
func TestYieldReachesTheStore(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, aEng := w.join(t, "a")
	b, _ := w.join(t, "b")
	if err := claim(t, a, vip); err != nil {
		t.Fatal(err)
	}
	aEng.yield(vip)
	bc := w.client(t, "b")
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		v, err := bc.Fleet(context.Background())
		for _, c := range v.Claims {
			if c.Claim.Addr == vip {
				return false, fmt.Sprintf("the store still names %s for %s after a yielded it", c.Claim.Node, vip)
			}
		}
		return err == nil, fmt.Sprintf("read the fleet: %v", err)
	})
	if st := a.Status(vip); len(st) != 0 {
		t.Errorf("a's status after the yield: %+v, want nothing", st)
	}
	if err := claim(t, b, vip); err != nil {
		t.Errorf("b's claim after a yielded: %v", err)
	}
	if !aEng.seesEvent(event.Release, "yielded") {
		t.Error("a published no release event for the yield")
	}
}

// TestSlowClaimHoldsUpNoOtherAddress: while one claim waits (its engine
// slow to open a port), a release, a claim and a standby of other
// addresses go through at once; the member once serialised them all
// behind one lock held across the store's round trips and the engine.
func TestSlowClaimHoldsUpNoOtherAddress(t *testing.T) {
	w := newWorld(t, "a")
	a, aEng := w.join(t, "a")
	slow, other, third := vip, netip.MustParseAddr("198.51.100.20"), netip.MustParseAddr("198.51.100.21")
	if err := claim(t, a, other); err != nil {
		t.Fatal(err)
	}
	wait := make(chan struct{})
	aEng.mu.Lock()
	aEng.claimWait = map[netip.Addr]chan struct{}{slow: wait}
	aEng.mu.Unlock()
	slowDone := make(chan error, 1)
	go func() { slowDone <- claim(t, a, slow) }()
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		v, err := w.client(t, "a").Fleet(context.Background())
		_, held := v.ClaimOf(slow)
		return err == nil && held, "the slow claim's key was not written"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, _, err := a.Release(ctx, []netip.Addr{other}); err != nil {
		t.Fatalf("a release of another address behind a slow claim: %v", err)
	}
	if err := claim(t, a, third); err != nil {
		t.Fatalf("a claim of another address behind a slow claim: %v", err)
	}
	close(wait)
	if err := <-slowDone; err != nil {
		t.Fatalf("the slow claim: %v", err)
	}
	if !aEng.holds(slow) || !aEng.holds(third) || aEng.holds(other) {
		t.Errorf("the engine holds %v, want %v and %v", aEng.Held(), slow, third)
	}
}

// TestResumeWaitsForTheFencesRevocation: a cut-off owner fences by its
// timer while the engine's Revoke is stuck behind a slow claim; its lease
// expires; once the store is back the member learns the lease is gone and
// joins again under a new one. Until the stuck revocation returns, the new
// lease must not open the deadline: the engine still holds the claim,
// whose key went with the old lease and may be another node's.
func TestResumeWaitsForTheFencesRevocation(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, aEng := w.join(t, "a")
	if err := claim(t, a, vip); err != nil {
		t.Fatal(err)
	}
	aEng.suspendWait = make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(aEng.suspendWait)
		}
	}
	defer release()
	oldLease, _, _ := a.Lease()
	cut := labtest.Isolate(t, w.l, w.hosts["a"], w.hosts["store"])
	labtest.Eventually(t, ttl+3*time.Second, func() (bool, string) {
		_, _, fenced := a.Lease()
		return !fenced.IsZero(), "a did not fence when cut off"
	})
	bc := w.client(t, "b")
	labtest.Eventually(t, 2*ttl+3*time.Second, func() (bool, string) {
		r, err := bc.TimeToLive(context.Background(), clientv3.LeaseID(oldLease))
		return err == nil && r.TTL == -1, fmt.Sprintf("a's lease has not expired in the store (%+v, %v)", r, err)
	})
	cut.Heal(t)
	// Three renewal periods and a second for a to hear the lease is gone
	// and try to join again, all the while with the revocation stuck.
	end := time.Now().Add(3*a.Timing().Renew + time.Second)
	for time.Now().Before(end) {
		if aEng.deadline.Open() && aEng.holds(vip) {
			t.Fatal("the deadline opened under a new lease while the engine still held a claim whose key had expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	release()
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		id, _, fenced := a.Lease()
		return id != oldLease && fenced.IsZero() && aEng.holds(vip) && aEng.deadline.Open(),
			fmt.Sprintf("a did not resume under a new lease once the revocation returned (lease %x, fenced %v, holds %v)", id, fenced, aEng.holds(vip))
	})
}

// holdClaims makes every claim of addr wait inside the engine until the
// returned release is called (at cleanup at the latest), and returns a
// channel that hears each claim as it starts to wait.
func holdClaims(t *testing.T, eng *fakeEngine, addr netip.Addr) (entered <-chan netip.Addr, release func()) {
	t.Helper()
	wait, in := make(chan struct{}), make(chan netip.Addr, 8)
	eng.mu.Lock()
	eng.claimWait, eng.entered = map[netip.Addr]chan struct{}{addr: wait}, in
	eng.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(wait) }) }
	t.Cleanup(release)
	return in, release
}

// TestClaimInFlightAcrossLeaseLoss: a claim inside the engine (its key
// made under a's lease) when a is cut off, fences, and loses its lease to
// the store's expiry, while b, standing by, takes the address: once the
// claim returns it must not count as a's. The resumption waits for it,
// and reports the address lost to b.
func TestClaimInFlightAcrossLeaseLoss(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, aEng := w.join(t, "a")
	b, bEng := w.join(t, "b")
	slow := netip.MustParseAddr("198.51.100.40")
	entered, release := holdClaims(t, aEng, slow)
	done := make(chan error, 1)
	go func() { done <- claim(t, a, slow) }()
	<-entered
	if _, err := b.Standby(context.Background(), []announce.Request{{Addr: slow, Interface: "eth0"}}, announce.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	cut := labtest.Isolate(t, w.l, w.hosts["a"], w.hosts["store"])
	labtest.Eventually(t, ttl+5*time.Second, func() (bool, string) {
		return bEng.holds(slow), "b did not take over from the cut-off a"
	})
	oldLease, _, _ := a.Lease()
	cut.Heal(t)
	// a hears its lease is gone and waits for the claim in flight, which
	// it must not outrun: the claim is let go once a has joined again
	// under a new lease, or after it had time to.
	end := time.Now().Add(3*a.Timing().Renew + 2*time.Second)
	for time.Now().Before(end) {
		if id, _, _ := a.Lease(); id != oldLease {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	release()
	if err := <-done; err != nil {
		t.Logf("the claim in flight returned: %v", err)
	}
	labtest.Eventually(t, 15*time.Second, func() (bool, string) {
		st := a.Status(slow)
		id, _, fenced := a.Lease()
		return id != oldLease && fenced.IsZero() && len(st) == 1 && st[0].State == api.StateLost && !aEng.holds(slow),
			fmt.Sprintf("a's status for %s: %+v (engine holds %v), want lost to b and not answered", slow, st, aEng.holds(slow))
	})
	if !bEng.holds(slow) {
		t.Error("b no longer holds the address")
	}
}

// TestYieldDoesNotDropAReclaimedKey: the key deletion after a yield waits
// for a claim of the same address in flight, and leaves the key of an
// address claimed again: the engine never answers for an address whose
// key is gone.
func TestYieldDoesNotDropAReclaimedKey(t *testing.T) {
	w := newWorld(t, "a")
	a, aEng := w.join(t, "a")
	if err := claim(t, a, vip); err != nil {
		t.Fatal(err)
	}
	entered, release := holdClaims(t, aEng, vip)
	done := make(chan error, 1)
	go func() { done <- claim(t, a, vip) }() // a refresh, its key a's
	<-entered
	aEng.yield(vip)
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	bc := w.client(t, "a")
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		v, err := bc.Fleet(context.Background())
		_, held := v.ClaimOf(vip)
		return err == nil && (held == aEng.holds(vip)), fmt.Sprintf("the engine holds %s: %v, its key in the store: %v", vip, aEng.holds(vip), held)
	})
}
