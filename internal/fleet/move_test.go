package fleet_test

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// moveAsync runs a move of vip to "to" through a mover of its own, with
// the given timeout on the fake clock, and sends its results when it ends.
func (f *fakeFleet) moveAsync(to string, timeout time.Duration) <-chan []store.MoveResult {
	done := make(chan []store.MoveResult, 1)
	go func() {
		res, err := fleet.NewTestMover(f.s.ledger("mover"), f.clock).Move(context.Background(), store.MoveRequest{Addrs: []netip.Addr{vip}, To: to, Interface: "eth0", Timeout: timeout})
		if err != nil {
			f.t.Errorf("move %s to %s: %v", vip, to, err)
		}
		done <- res
	}()
	return done
}

func waitMove(t *testing.T, done <-chan []store.MoveResult) []store.MoveResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("the move did not end")
		return nil
	}
}

// TestFakeMoveGivenUpAfterTheOwnerLetGo: a move whose mover gives up (its
// timeout passes, its lease and records go) after the owner let go, while
// the target could not reach the store, still ends on the target once it
// can, instead of leaving the address with nobody: the fault-injection
// suite's 17 s unanswered during an outage of all of etcd. Without it the
// target finds no move record left and does nothing.
func TestFakeMoveGivenUpAfterTheOwnerLetGo(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	_, bEng := f.join("b")
	f.claim(a, vip)
	// b reads the move, but its takes fail: the store gone away.
	f.s.failTakesNext("b", 1000)
	done := f.moveAsync("b", fakeTiming.Renew/2)
	eventually(t, func() bool { return !aEng.holds(vip) && f.owner(vip) == "" }, "the owner did not let go for the move")
	// The mover gives up before b looks again.
	f.advanceTo(fakeTiming.Renew / 2)
	res := waitMove(t, done)
	if len(res) != 1 || res[0].Done() || !strings.Contains(res[0].Error, "b takes it once it reaches the store") {
		t.Fatalf("the mover's result: %+v, want it given up, saying b takes the address", res)
	}
	never(t, func() bool { return bEng.holds(vip) }, "the target took the address though its store failed")
	f.s.failTakesNext("b", 0)
	f.advanceTo(2 * fakeTiming.Renew)
	eventually(t, func() bool { return bEng.holds(vip) && f.owner(vip) == "b" }, "the target of a move given up after its owner let go did not take the address")
	// The event comes after the claim is held.
	eventually(t, func() bool { return bEng.sawEvent(event.Move, "its mover had given up") }, "no event on the target says the move was taken though its mover gave up")
	checkNoOverlap(t, vip, aEng, bEng)
}

// TestFakeMoveGivenUpAsTheOwnerLetsGo: a move whose mover gives up just as
// the owner, having stopped answering, hands the address over leaves it
// with the owner, which claims it again, rather than with nobody.
func TestFakeMoveGivenUpAsTheOwnerLetsGo(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	_, bEng := f.join("b")
	f.claim(a, vip)
	// b cannot take it before the owner lets go, and the owner's hand-over
	// finds the move gone: its mover gave up then.
	f.s.mu.Lock()
	f.s.onHandOver = func(s *fakeStore) {
		s.onHandOver = nil
		for id, kv := range s.moves {
			if id == vip {
				s.revokeLocked(kv.lease)
			}
		}
	}
	f.s.mu.Unlock()
	res := waitMove(t, f.moveAsync("b", time.Minute))
	if len(res) != 1 || res[0].Done() {
		t.Fatalf("the mover's result: %+v, want the move ended before it was live", res)
	}
	eventually(t, func() bool { return aEng.holds(vip) && f.owner(vip) == "a" }, "the owner did not claim again an address whose move gave up as it let go")
	eventually(t, func() bool { return aEng.sawEvent(event.Move, "gave up before it was handed over") }, "no event on the owner says it kept the address")
	if !aEng.seesEvent(event.Resume, "claimed again: the move to b gave up") || aEng.sawEvent(event.Resume, "adopted from an earlier run") {
		t.Error("the claim's event does not say it was claimed again as its move gave up (it is this run's, not an earlier run's)")
	}
	f.advanceTo(2 * fakeTiming.Renew)
	never(t, func() bool { return bEng.holds(vip) || f.owner(vip) != "a" }, "the target took an address its owner kept")
	// The target forgot the move: a release later is not a hand-over.
	if _, _, err := a.Release(context.Background(), []netip.Addr{vip}); err != nil {
		t.Fatal(err)
	}
	f.advanceTo(4 * fakeTiming.Renew)
	never(t, func() bool { return bEng.holds(vip) || f.owner(vip) != "" }, "the target of a move given up took the address its owner released later")
	checkNoOverlap(t, vip, aEng, bEng)
}

// TestFakeMoveToAFencedTarget: a move's target that hears of the move
// while it is fenced (all of etcd was down, and came back with the move)
// takes the address once its fence lifts; the inbox told it once, and the
// owner, which let go meanwhile, is not there to tell it again (the
// fault-injection suite's 19 s unanswered in CI).
func TestFakeMoveToAFencedTarget(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	_, bEng := f.join("b")
	f.claim(a, vip)
	f.s.setCut("b", true)
	f.advanceTo(fakeTiming.FenceAfter())
	done := f.moveAsync("b", time.Minute)
	eventually(t, func() bool { return !aEng.holds(vip) && f.owner(vip) == "" }, "the owner did not let go for the move")
	// b's watch delivers the move while b is still fenced.
	f.s.setCut("b", false)
	f.s.touch()
	never(t, func() bool { return bEng.holds(vip) }, "a fenced target took the address")
	f.advanceTo(fakeTiming.FenceAfter() + fakeTiming.Renew)
	eventually(t, func() bool { return bEng.holds(vip) && f.owner(vip) == "b" }, "the target did not take the address once its fence lifted")
	if res := waitMove(t, done); len(res) != 1 || !res[0].Done() {
		t.Fatalf("the mover's result: %+v, want live on b", res)
	}
	checkNoOverlap(t, vip, aEng, bEng)
}

// TestFakeMoveTakenOnTheKeysDeletionRecordsTheRelease: a target that
// waits for the owner to let go, and takes the address when the key's
// deletion reaches it before the owner's notice does, records in the
// history when the owner let go, as it does when the notice comes first
// (issue 35: moves of a group with no "released" in vip history --json).
// It read the move again; the copy it kept from the mover's notice says
// nothing of the release.
func TestFakeMoveTakenOnTheKeysDeletionRecordsTheRelease(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	_, bEng := f.join("b")
	f.claim(a, vip)
	// The owner is slow to let go, so that b tries first and waits on
	// the key; the hand-over then tells b nothing but the key's deletion.
	letGo := holdReleases(aEng)
	f.s.mu.Lock()
	f.s.quietHandOver = true
	f.s.mu.Unlock()
	done := f.moveAsync("b", time.Minute)
	eventually(t, func() bool {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		return f.s.takesTried["b"] > 0
	}, "b did not try to take the address moving to it")
	letGo()
	eventually(t, func() bool { return bEng.holds(vip) && f.owner(vip) == "b" }, "b did not take the address once a let go")
	res := waitMove(t, done)
	if len(res) != 1 || !res[0].Done() {
		t.Fatalf("the move: %+v", res)
	}
	moved := f.movesRecorded(vip)
	if len(moved) != 1 || moved[0].Released.IsZero() || moved[0].Asked.IsZero() {
		t.Fatalf("the history's record of the move: %+v, want one with when it was asked and released", moved)
	}
	checkNoOverlap(t, vip, aEng, bEng)
}

// TestFakeMoveTakenOnAnOlderReadRecordsTheRelease: a target that read the
// move before the owner let go, and whose take reaches the store after
// the owner's hand-over (the key deleted, the release written into the
// move), takes it on the move as it is then, so that the history's
// record of the move has its release as the mover's line does. The CI of
// stop 38 failed on this race: the take compared only which move it
// was, and recorded the copy it had read, with no release.
func TestFakeMoveTakenOnAnOlderReadRecordsTheRelease(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	_, bEng := f.join("b")
	f.claim(a, vip)
	letGo := holdReleases(aEng)
	hold := make(chan struct{})
	f.s.mu.Lock()
	f.s.holdTakes = hold
	f.s.mu.Unlock()
	done := f.moveAsync("b", time.Minute)
	eventually(t, func() bool {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		return f.s.takesHeld > 0
	}, "b did not try to take the address moving to it")
	// b holds a copy of the move read before a let go; a lets go now.
	letGo()
	eventually(t, func() bool {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		kv, moving := f.s.moves[vip]
		_, held := f.s.claims[vip]
		return moving && !kv.v.Released.IsZero() && !held
	}, "a did not hand the address over")
	f.s.mu.Lock()
	f.s.holdTakes = nil
	f.s.mu.Unlock()
	close(hold)
	res := waitMove(t, done)
	if len(res) != 1 || !res[0].Done() {
		t.Fatalf("the move: %+v", res)
	}
	eventually(t, func() bool { return bEng.holds(vip) && f.owner(vip) == "b" }, "b did not take the address once a let go")
	moved := f.movesRecorded(vip)
	if len(moved) != 1 || moved[0].Released.IsZero() || !moved[0].Released.Equal(res[0].Released) {
		t.Fatalf("the history's record of the move: %+v, want one released when the mover says (%v)", moved, res[0].Released)
	}
	checkNoOverlap(t, vip, aEng, bEng)
}

// TestFakeMoveAndHistoryShareOneTimeline: vip move (and vip drain) and vip
// history print a move's steps from the same times, the owner's release
// and the target's take as the move record and the history record hold
// them, not each its own measure (issue 35: drain said released +70 ms,
// history 56 ms for one move). Both lines say the same.
func TestFakeMoveAndHistoryShareOneTimeline(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	_, bEng := f.join("b")
	f.claim(a, vip)
	res := waitMove(t, f.moveAsync("b", time.Minute))
	if len(res) != 1 || !res[0].Done() {
		t.Fatalf("the move: %+v", res)
	}
	eventually(t, func() bool { return bEng.holds(vip) }, "b does not answer")
	moved := f.movesRecorded(vip)
	if len(moved) != 1 {
		t.Fatalf("the history has %d records of the move, want 1", len(moved))
	}
	r, h := res[0], moved[0]
	if !r.Released.Equal(h.Released) || !r.Taken.Equal(h.Time) || !r.Asked.Equal(h.Asked) {
		t.Errorf("the mover's timeline (asked %v, released %v, taken %v) is not the history's (asked %v, released %v, taken %v)",
			r.Asked, r.Released, r.Taken, h.Asked, h.Released, h.Time)
	}
	line, record := r.API().Summary(), h.Describe()
	steps := regexp.MustCompile(`released by a \+\d+ ms, taken by b \+\d+ ms`)
	if m := steps.FindString(line); m == "" || !strings.Contains(record, m) {
		t.Errorf("vip move printed %q and vip history %q: not the same steps", line, record)
	}
	checkNoOverlap(t, vip, aEng, bEng)
}

// movesRecorded returns the history's records of moves of a, in order.
func (f *fakeFleet) movesRecorded(a netip.Addr) []store.Change {
	var out []store.Change
	for _, ch := range f.s.History() {
		if ch.Kind == store.ChangeMove && ch.Addr == a {
			out = append(out, ch)
		}
	}
	return out
}
