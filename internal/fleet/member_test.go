package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/test/labtest"
)

// These tests drive members over a store of memory (fakeStore) on a fake
// clock, so that the fence, the deadline, resumptions, takeovers and moves
// are checked to the tick, without root, etcd or real time. The lab tests
// (fleet_lab_test.go) check the same against a real etcd.

// fakeTTL is the lease of these tests, whose times are written for it:
// renewals every second, the fence 4.5 s after the last one acknowledged,
// the lease gone 6 s after it.
const fakeTTL = 6 * time.Second

var fakeTiming = fleet.TimingFor(fakeTTL)

// bootAtEpoch is the Deadline's clock (CLOCK_BOOTTIME) at the fake clock's
// start: any reading past closedAt.
const bootAtEpoch = time.Hour

// fakeFleet is members of one fakeStore on one fake clock, all joined at
// its start, so that their renewals tick together.
type fakeFleet struct {
	t     *testing.T
	clock *clockwork.FakeClock
	epoch time.Time
	s     *fakeStore
	// running are the members whose renewals the clock waits for, and
	// deadlines their answer deadlines.
	running   map[string]*fleet.Member
	deadlines map[string]*announce.Deadline
	// bootAhead is how far the Deadline's clock has run past the fake
	// one: a process stopped (suspended, frozen) while CLOCK_BOOTTIME
	// counted on and its timers did not.
	bootAhead atomic.Int64
}

func newFakeFleet(t *testing.T) *fakeFleet {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(epoch)
	return &fakeFleet{t: t, clock: clock, epoch: epoch, s: newFakeStore(clock), running: map[string]*fleet.Member{}, deadlines: map[string]*announce.Deadline{}}
}

// now is the fake time since the start.
func (f *fakeFleet) now() time.Duration { return f.clock.Since(f.epoch) }

// boot reads the Deadline's clock, which runs with the fake one.
func (f *fakeFleet) boot() time.Duration {
	return bootAtEpoch + f.now() + time.Duration(f.bootAhead.Load())
}

func (f *fakeFleet) join(name string) (*fleet.Member, *fakeEngine) {
	f.t.Helper()
	return f.joinWith(name, func() []store.Interface {
		return []store.Interface{{Name: "eth0", MAC: "02:00:00:00:00:01", Up: true}}
	})
}

// joinWith is join with the host's interfaces as ifs reads them.
func (f *fakeFleet) joinWith(name string, ifs func() []store.Interface) (*fleet.Member, *fakeEngine) {
	f.t.Helper()
	return f.joinConfig(name, func(c *fleet.Config) { c.Interfaces = ifs })
}

// joinConfig is join with the member's configuration changed by set.
func (f *fakeFleet) joinConfig(name string, set func(*fleet.Config)) (*fleet.Member, *fakeEngine) {
	f.t.Helper()
	if f.now() != 0 {
		f.t.Fatal("join after the clock moved: the renewals would not tick together")
	}
	eng := newFakeEngine()
	eng.deadline = announce.NewDeadline(f.boot)
	cfg := fleet.Config{
		Ledger: f.s.ledger(name), Clock: f.clock, Node: name, TTL: fakeTTL, Log: testLog(f.t), Deadline: eng.deadline,
		Interfaces: func() []store.Interface {
			return []store.Interface{{Name: "eth0", MAC: "02:00:00:00:00:01", Up: true}}
		},
	}
	set(&cfg)
	m, err := fleet.Join(context.Background(), cfg, eng)
	if err != nil {
		f.t.Fatalf("join as %s: %v", name, err)
	}
	f.t.Cleanup(m.Close)
	f.running[name], f.deadlines[name] = m, cfg.Deadline
	// The first renewal is tried once the fence's timer and the ticker
	// are armed.
	f.waitRenewals(name, 1)
	return m, eng
}

// crash stops name's member as kill -9 would: its lease runs out.
func (f *fakeFleet) crash(name string) {
	f.running[name].Crash()
	delete(f.running, name)
}

// advanceTo moves the clock to at in steps of half a renewal period (the
// fence's delay is a whole number of them), and after each waits until
// every running member has made the renewal it was due, acknowledged or
// not, and fenced if it was due to, and the store expired what is due. A
// fake timer's function runs on a goroutine of its own, which would
// otherwise read the clock after it moved on.
func (f *fakeFleet) advanceTo(at time.Duration) {
	f.t.Helper()
	renew := fakeTiming.Renew
	for now := f.now(); now < at; now = f.now() {
		next := min((now/(renew/2)+1)*(renew/2), at)
		f.clock.Advance(next - now)
		f.s.expire()
		for name, m := range f.running {
			if next%renew == 0 {
				f.waitRenewals(name, 1+int(next/renew))
			}
			// An owner on failsafe answers past the fence's delay, on
			// its peers' promises.
			if _, renewed, fencedAt := m.Lease(); fencedAt.IsZero() && !renewed.Add(fakeTiming.FenceAfter()).After(f.clock.Now()) && m.Info().Failsafe == nil {
				eventually(f.t, func() bool { _, _, fencedAt := m.Lease(); return !fencedAt.IsZero() }, name+" did not fence when due")
			}
		}
	}
}

// advanceUntil moves the fake clock from from on, step at a time up to
// until, and after each step waits up to a second of real time for cond;
// it says whether cond held. A member arms its next timer only once its
// last read or round returned, which a loaded machine may do after the
// clock has moved past it: one step of the clock could pass that timer
// for good.
func (f *fakeFleet) advanceUntil(from, until, step time.Duration, cond func() bool) bool {
	f.t.Helper()
	for at := from; !cond(); at += step {
		if at > until {
			return false
		}
		f.advanceTo(at)
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) && !cond() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return true
}

// waitRenewals waits until name tried its n-th renewal and, when the store
// acknowledged it, recorded it (so the fence's timer counts from it).
func (f *fakeFleet) waitRenewals(name string, n int) {
	f.t.Helper()
	m := f.running[name]
	labtest.Eventually(f.t, 5*time.Second, func() (bool, string) {
		got, ok := f.s.renewalsOf(name)
		if got < n {
			return false, name + " did not renew when due"
		}
		f.s.mu.Lock()
		rtt := f.s.renewRTT
		f.s.mu.Unlock()
		if rtt > 0 {
			// A slow store: the renewal sent a round trip ago is the
			// latest acknowledged by now, and must be recorded before
			// the clock moves on (else the fence's timer could run
			// first).
			sent := (f.now() - rtt) / fakeTiming.Renew * fakeTiming.Renew
			_, renewed, _ := m.Lease()
			return sent < 0 || !renewed.Before(f.epoch.Add(sent)), fmt.Sprintf("%s did not record the renewal sent at %v, acknowledged now", name, sent)
		}
		if !ok {
			return true, ""
		}
		_, renewed, _ := m.Lease()
		if !renewed.Equal(f.clock.Now()) {
			return false, name + " did not record its renewal"
		}
		// The member moves the deadline just after it records the
		// renewal: moved later, once the clock has, it would look set
		// then (TestFakeDeadline failed so under CI's load).
		if d := f.deadlines[name]; d != nil {
			if at, _ := d.At(); at < f.boot()+fakeTiming.FenceAfter() {
				return false, name + " did not move its deadline for its renewal"
			}
		}
		return true, ""
	})
}

func (f *fakeFleet) claim(m *fleet.Member, a netip.Addr) {
	f.t.Helper()
	if _, err := m.Claim(context.Background(), []announce.Request{{Addr: a, Interface: "eth0"}}, announce.ClaimOptions{}); err != nil {
		f.t.Fatalf("claim %s on %s: %v", a, m.Node(), err)
	}
}

func (f *fakeFleet) standby(m *fleet.Member, a netip.Addr) {
	f.t.Helper()
	if _, err := m.Standby(context.Background(), []announce.Request{{Addr: a, Interface: "eth0"}}, announce.ClaimOptions{}); err != nil {
		f.t.Fatalf("standby for %s on %s: %v", a, m.Node(), err)
	}
}

// owner is the node whose claim of a the store holds, "" for none.
func (f *fakeFleet) owner(a netip.Addr) string {
	c, _, ok := f.s.claim(a)
	if !ok {
		return ""
	}
	return c.Node
}

func eventually(t *testing.T, cond func() bool, why string) {
	t.Helper()
	labtest.Eventually(t, 5*time.Second, func() (bool, string) { return cond(), why })
}

// never checks, for a while of real time, that cond stays false.
func never(t *testing.T, cond func() bool, why string) {
	t.Helper()
	for range 10 {
		if cond() {
			t.Fatal(why)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deadlineLog records each answer deadline set, with the fake time then.
type deadlineLog struct {
	mu   sync.Mutex
	sets []deadlineSet
}

type deadlineSet struct{ when, at time.Duration }

func (f *fakeFleet) recordDeadline(d *announce.Deadline) *deadlineLog {
	f.t.Helper()
	l := &deadlineLog{}
	stop, err := d.Watch(func(at time.Duration) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.sets = append(l.sets, deadlineSet{when: f.now(), at: at})
		return nil
	}, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(stop)
	return l
}

func (l *deadlineLog) all() []deadlineSet {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sets)
}

// closed says whether a deadline is the one a fence sets: always passed.
func closed(at time.Duration) bool { return at <= time.Millisecond }

// TestFakeDeadline: each renewal the store acknowledges moves the deadline
// to its send time plus fence-after; a renewal that fails leaves it, and
// the fence closes it at fence-after; when the store says the lease is gone
// it is closed at once, not at fence-after, before the member joins again.
func TestFakeDeadline(t *testing.T) {
	none := time.Duration(-1)
	for _, tc := range []struct {
		name string
		// cutAt cuts the member off from the store; revokeAt revokes its
		// lease in the store (none: never).
		cutAt, revokeAt time.Duration
		until           time.Duration
		// wantClosedAt is when the deadline is first closed (none: never).
		wantClosedAt time.Duration
		// rtt, when set, is how long each renewal takes to be
		// acknowledged from the start (a slow store).
		rtt time.Duration
	}{
		// The longest round trip the TTL survives is the fence's delay
		// less a renewal period: renewals overlap, and each
		// acknowledgement counts from its own send, however late.
		{name: "renewals acknowledged 3 s late: never closed", cutAt: none, revokeAt: none, until: 15 * time.Second, wantClosedAt: none,
			rtt: 3 * time.Second},
		{name: "renewals acknowledged 4 s late: closed at fence-after", cutAt: none, revokeAt: none, until: 6 * time.Second,
			wantClosedAt: fakeTiming.FenceAfter(), rtt: 4 * time.Second},
		{name: "renewals acknowledged", cutAt: none, revokeAt: none, until: 5 * time.Second, wantClosedAt: none},
		{name: "renewals fail: closed at fence-after", cutAt: 1500 * time.Millisecond, revokeAt: none, until: 6 * time.Second,
			wantClosedAt: time.Second + fakeTiming.FenceAfter()},
		{name: "lease gone: closed at once", cutAt: none, revokeAt: 2500 * time.Millisecond, until: 3 * time.Second,
			wantClosedAt: 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet(t)
			a, aEng := f.join("a")
			log := f.recordDeadline(aEng.deadline)
			f.s.setRenewRTT(tc.rtt)
			f.claim(a, vip)
			lease, _, _ := a.Lease()
			for _, step := range []struct {
				at time.Duration
				do func()
			}{
				{tc.cutAt, func() { f.s.setCut("a", true) }},
				{tc.revokeAt, func() { f.s.revoke(fleet.LeaseID(lease)) }},
			} {
				if step.at != none {
					f.advanceTo(step.at)
					step.do()
				}
			}
			f.advanceTo(tc.until)
			if tc.wantClosedAt != none {
				eventually(t, func() bool { return aEng.sawEvent(event.Fence, "") }, "not fenced")
			}
			if tc.cutAt != none {
				// The fence says when the last acknowledged renewal
				// was sent, and what came after.
				last := f.epoch.Add(tc.cutAt / fakeTiming.Renew * fakeTiming.Renew).Local().Format("15:04:05.000")
				for _, want := range []string{"acknowledged since " + last + ", when it was sent", "answered in 0s on average", "renewals sent since are unanswered"} {
					if !aEng.seesEvent(event.Fence, want) {
						t.Errorf("the fence event does not say %q: %v", want, aEng.eventsOf(event.Fence))
					}
				}
			}
			if tc.revokeAt != none {
				// It joins again under a new lease, whose grant opens
				// the deadline again.
				eventually(t, func() bool { return aEng.sawEvent(event.Resume, "resumed 1 claims") }, "the claim was not taken again")
				if now, _, _ := a.Lease(); now == lease {
					t.Errorf("still lease %x after it was revoked", lease)
				}
			}
			sets := log.all()
			firstClosed := none
			for i, s := range sets {
				if i == 0 {
					continue // the deadline as it was when the watch began
				}
				if closed(s.at) {
					if firstClosed == none {
						firstClosed = s.when
					}
					continue
				}
				// Every open deadline is a renewal's (or a grant's) send
				// time plus fence-after, on the Deadline's clock: a
				// round trip before it was set, for a slow store's
				// renewal.
				if want := bootAtEpoch + s.when - tc.rtt + fakeTiming.FenceAfter(); tc.rtt > 0 && s.at == want {
					continue
				}
				if want := bootAtEpoch + s.when + fakeTiming.FenceAfter(); s.at != want {
					t.Errorf("the deadline set at %v is %v, want %v (its send time plus fence-after)", s.when, s.at-bootAtEpoch, want-bootAtEpoch)
				}
			}
			if firstClosed != tc.wantClosedAt {
				t.Errorf("the deadline was first closed at %v, want %v (none is %v)", firstClosed, tc.wantClosedAt, none)
			}
			if tc.cutAt != none {
				// No renewal acknowledged after the cut: the last open
				// deadline is the last renewal's before it.
				last := time.Duration(0)
				for _, s := range sets {
					if !closed(s.at) {
						last = s.when
					}
				}
				if want := tc.cutAt / fakeTiming.Renew * fakeTiming.Renew; last != want {
					t.Errorf("the last deadline moved at %v, want %v (the last renewal before the cut)", last, want)
				}
			}
		})
	}
}

// TestFakeFenceAndResume: a member cut off from the store fences at
// fence-after, not before; when the store answers again, a key still its own
// resumes, a free one is taken again, one another node took is lost to it.
func TestFakeFenceAndResume(t *testing.T) {
	for _, tc := range []struct {
		name string
		// backAt is when the store answers a again.
		backAt time.Duration
		// standby has b stand by for the address.
		standby   bool
		wantHeld  bool
		wantOwner string
		newLease  bool
		wantEvent announce.EventKind
		wantMsg   string
	}{
		{name: "key still its own: resumed", backAt: 5 * time.Second, wantHeld: true, wantOwner: "a",
			wantEvent: event.Resume, wantMsg: "resumed 1 claims"},
		{name: "lease expired, key free: taken again", backAt: 7 * time.Second, wantHeld: true, wantOwner: "a", newLease: true,
			wantEvent: event.Resume, wantMsg: "resumed 1 claims"},
		{name: "taken by a standby: lost", backAt: 7 * time.Second, standby: true, wantOwner: "b", newLease: true,
			wantEvent: event.Taken, wantMsg: "lost to b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet(t)
			a, aEng := f.join("a")
			var bEng *fakeEngine
			if tc.standby {
				var b *fleet.Member
				b, bEng = f.join("b")
				f.claim(a, vip)
				f.standby(b, vip)
			} else {
				f.claim(a, vip)
			}
			lease, _, _ := a.Lease()
			if a.Info().Unreachable {
				t.Error("a's status says the store is unreachable while it renews")
			}
			f.s.setCut("a", true)
			f.advanceTo(fakeTiming.FenceAfter() - time.Millisecond)
			// Two renewal periods with no acknowledgement: the status
			// says the store is away before the fence does.
			if !a.Info().Unreachable {
				t.Errorf("a's status does not say the store is unreachable %v after its last renewal", fakeTiming.FenceAfter())
			}
			if _, _, fencedAt := a.Lease(); !fencedAt.IsZero() || !aEng.holds(vip) {
				t.Fatalf("fenced at %v, before fence-after (%v)", f.now(), fakeTiming.FenceAfter())
			}
			f.advanceTo(fakeTiming.FenceAfter())
			eventually(t, func() bool { return !aEng.holds(vip) }, "not fenced at fence-after")
			if _, _, fencedAt := a.Lease(); !fencedAt.Equal(f.epoch.Add(fakeTiming.FenceAfter())) {
				t.Errorf("fenced at %v, want at fence-after, %v", fencedAt.Sub(f.epoch), fakeTiming.FenceAfter())
			}
			if st := a.Status(vip); len(st) != 1 || st[0].State != api.StateFenced {
				t.Errorf("a's status of %s while fenced: %+v, want fenced", vip, st)
			}
			f.advanceTo(tc.backAt - fakeTiming.Renew/2)
			if tc.standby {
				eventually(t, func() bool { return bEng.holds(vip) }, "the standby did not take the address when a's lease expired")
			}
			f.s.setCut("a", false)
			f.advanceTo(tc.backAt)
			eventually(t, func() bool { return aEng.sawEvent(tc.wantEvent, tc.wantMsg) }, "no event says "+tc.wantMsg)
			eventually(t, func() bool { return aEng.holds(vip) == tc.wantHeld }, "a's engine does not hold the address as it should")
			if tc.wantHeld && !aEng.seesEvent(event.Resume, "resumed after the fence: the store answers again") {
				// The claim's event is a hook's VIP_REASON: this run
				// fenced it, no earlier run recorded it.
				t.Error("the claim's event does not say it resumed after the fence")
			}
			if aEng.sawEvent(event.Resume, "adopted from an earlier run") {
				t.Error("a claim resumed after the fence is told as adopted from an earlier run")
			}
			if got := f.owner(vip); got != tc.wantOwner {
				t.Errorf("the store's owner of %s: %q, want %q", vip, got, tc.wantOwner)
			}
			if now, _, _ := a.Lease(); (now != lease) != tc.newLease {
				t.Errorf("lease %x after the resumption, was %x: want a new one %v", now, lease, tc.newLease)
			}
			if c, _, _ := f.s.claim(vip); tc.newLease && !tc.standby && c.Since.Before(f.epoch.Add(fakeTiming.FenceAfter())) {
				// Made again after its lease expired: since then, not
				// since the first claim (issue 24).
				t.Errorf("the key made again at the resumption says since %v, before the fence", c.Since.Sub(f.epoch))
			}
			if tc.standby {
				checkNoOverlap(t, vip, aEng, bEng)
				if st := a.Status(vip); len(st) != 1 || st[0].State != api.StateLost {
					t.Errorf("a's status of %s: %+v, want lost", vip, st)
				}
				// Both times: when b took it (its claim's), and when a
				// found it (issue 24: only the second was said).
				c, _, _ := f.s.claim(vip)
				took := c.Since.Local().Format("15:04:05")
				want := fmt.Sprintf("lost to b, which took it at %s; found at %s, when this node's fence lifted", took, f.epoch.Add(tc.backAt).Local().Format("15:04:05"))
				if got := a.Notes()[vip]; got != want {
					t.Errorf("a's note: %q, want %q", got, want)
				}
				if !aEng.seesEvent(event.Taken, "(it took it at "+c.Since.Local().Format("15:04:05.000")+")") {
					t.Error("the loss's event does not say when b took it")
				}
			}
		})
	}
}

// TestFakeTakeovers: a standby takes an address when its owner's lease
// expires (not before), and never when the owner let it go on purpose: a
// release, or a yield the engine decided by itself, whose key goes too.
func TestFakeTakeovers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		owner     func(f *fakeFleet, a *fleet.Member, aEng *fakeEngine)
		wantOwner string
		wantEvent string
		// ownerEvent is what the owner's agent says it did, if anything.
		ownerEvent string
	}{
		{name: "owner dies: the standby takes over at its lease's expiry",
			owner: func(f *fakeFleet, _ *fleet.Member, aEng *fakeEngine) {
				f.crash("a")
				aEng.drop([]netip.Addr{vip}) // its process is gone
			},
			wantOwner: "b", wantEvent: "lease of its owner a expired"},
		{name: "owner releases: nobody takes it",
			owner: func(f *fakeFleet, a *fleet.Member, _ *fakeEngine) {
				if _, _, err := a.Release(context.Background(), []netip.Addr{vip}); err != nil {
					f.t.Fatal(err)
				}
			}},
		{name: "owner yields: its key goes, nobody takes it",
			owner:      func(_ *fakeFleet, _ *fleet.Member, aEng *fakeEngine) { aEng.yield(vip) },
			ownerEvent: "released in the store too"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet(t)
			a, aEng := f.join("a")
			b, bEng := f.join("b")
			f.claim(a, vip)
			f.standby(b, vip)
			tc.owner(f, a, aEng)
			if tc.ownerEvent != "" {
				eventually(t, func() bool { return aEng.sawEvent(event.Release, tc.ownerEvent) }, "no event of the owner says "+tc.ownerEvent)
			}
			if tc.wantOwner == "" {
				eventually(t, func() bool { return f.owner(vip) == "" }, "the owner's key stayed in the store")
				never(t, func() bool { return bEng.holds(vip) }, "the standby took an address its owner let go on purpose")
			}
			f.advanceTo(fakeTTL - time.Millisecond)
			never(t, func() bool { return bEng.holds(vip) }, "the standby took the address before the owner's lease expired")
			f.advanceTo(fakeTTL + fakeTiming.Renew)
			if tc.wantOwner == "" {
				never(t, func() bool { return bEng.holds(vip) }, "the standby took an address its owner let go on purpose")
				if got := f.owner(vip); got != "" {
					t.Errorf("the store's owner of %s: %q, want none", vip, got)
				}
				return
			}
			eventually(t, func() bool { return bEng.holds(vip) }, "the standby did not take the address")
			eventually(t, func() bool { return bEng.sawEvent(event.Standby, tc.wantEvent) }, "no standby event says "+tc.wantEvent)
			if got := f.owner(vip); got != tc.wantOwner {
				t.Errorf("the store's owner of %s: %q, want %q", vip, got, tc.wantOwner)
			}
			checkNoOverlap(t, vip, aEng, bEng)
		})
	}
}

// TestFakeMoves: a move hands the address over from an owner that answers
// at once, and waits for the lease of one cut off from the store; the two
// never answer at once.
func TestFakeMoves(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cutOwner   bool
		wantWaited bool
	}{
		{name: "owner answers: handed over"},
		{name: "owner cut off: taken when its lease expires", cutOwner: true, wantWaited: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet(t)
			a, aEng := f.join("a")
			b, bEng := f.join("b")
			f.claim(a, vip)
			if tc.cutOwner {
				f.s.setCut("a", true)
			}
			type result struct {
				st  []announce.Status
				err error
			}
			done := make(chan result, 1)
			go func() {
				st, err := b.TakeOver(context.Background(), []announce.Request{{Addr: vip, Interface: "eth0"}}, announce.ClaimOptions{}, false)
				done <- result{st, err}
			}()
			if tc.cutOwner {
				never(t, func() bool { return bEng.holds(vip) }, "the target took the address while its owner's lease was alive")
				f.advanceTo(fakeTTL)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the move did not end")
			}
			if r.err != nil {
				t.Fatalf("take over: %v", r.err)
			}
			if !bEng.holds(vip) || aEng.holds(vip) {
				t.Errorf("after the move: a holds %v, b holds %v; want b alone", aEng.holds(vip), bEng.holds(vip))
			}
			if got := f.owner(vip); got != "b" {
				t.Errorf("the store's owner of %s: %q, want b", vip, got)
			}
			// The owner tells of its release after the hand-over's
			// transaction, which may be after the move is live.
			released := func() bool { return aEng.sawEvent(event.Move, "released for a move to b") }
			if tc.wantWaited {
				never(t, released, "an owner cut off from the store released the address for the move")
			} else {
				eventually(t, released, "the owner did not release the address for the move")
			}
			checkNoOverlap(t, vip, aEng, bEng)
		})
	}
}

// TestFakeReleaseReachesTheStore: a release whose key deletion the store
// did not take (cut off for a moment) still reaches it: the key, bound to
// a lease that lives as long as the agent, would keep every other node
// from the address, answered by nobody. It is deleted once the store
// answers, within a renewal period or two; a key claimed again meanwhile
// is left.
func TestFakeReleaseReachesTheStore(t *testing.T) {
	for _, again := range []bool{false, true} {
		name := "released"
		if again {
			name = "claimed again meanwhile"
		}
		t.Run(name, func(t *testing.T) {
			f := newFakeFleet(t)
			a, aEng := f.join("a")
			f.claim(a, vip)
			f.s.setCut("a", true)
			if _, _, err := a.Release(context.Background(), []netip.Addr{vip}); err != nil {
				t.Fatal(err)
			}
			f.s.setCut("a", false)
			if got := f.owner(vip); got != "a" {
				t.Fatalf("the store's owner of %s after a release cut off: %q, want a (the deletion failed)", vip, got)
			}
			if again {
				f.claim(a, vip)
			}
			f.advanceTo(2 * fakeTiming.Renew)
			if again {
				never(t, func() bool { return f.owner(vip) != "a" || !aEng.holds(vip) }, "the key of an address claimed again was deleted")
				return
			}
			eventually(t, func() bool { return f.owner(vip) == "" }, "the released key stayed in the store")
		})
	}
}

// TestFakeMoveArrivesOnceTheStoreAnswers: the target of a move, whose
// store fails just as its inbox tells it of the move, reads the move again
// once the store answers and takes the address its owner let go, instead
// of leaving it free: the inbox tells of a move once (the fault-injection
// suite found an address left free for 17 s by a move during an outage of
// etcd).
func TestFakeMoveArrivesOnceTheStoreAnswers(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	_, bEng := f.join("b")
	f.claim(a, vip)
	// Both of b's notices (the move asked, the owner let go) come while
	// its store fails, until the owner has let go. (Failing only b's next
	// two operations was not enough: another of b's reads could use one
	// up, and b then took the address at once, in CI.)
	f.s.failNext("b", 1<<30)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		res, err := fleet.NewTestMover(f.s.ledger("mover"), f.clock).Move(ctx, store.MoveRequest{Addrs: []netip.Addr{vip}, To: "b", Interface: "eth0"})
		if err == nil && (len(res) != 1 || !res[0].Done()) {
			err = fmt.Errorf("the move did not end live: %+v", res)
		}
		done <- err
	}()
	eventually(t, func() bool { return !aEng.holds(vip) && f.owner(vip) == "" }, "the owner did not let go for the move")
	never(t, func() bool { return bEng.holds(vip) }, "the target took the address though its store failed")
	f.s.failNext("b", 0)
	f.advanceTo(3 * fakeTiming.Renew)
	eventually(t, func() bool { return bEng.holds(vip) && f.owner(vip) == "b" }, "the target did not take the address once the store answered")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkNoOverlap(t, vip, aEng, bEng)
}

// TestFakeClaimManyInBatches: a claim of many free addresses makes their
// keys a batch at a time, not a transaction each; one another node holds
// among them is refused, and the others are claimed all the same.
func TestFakeClaimManyInBatches(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	b, _ := f.join("b")
	held := netip.MustParseAddr("198.51.100.200")
	f.claim(b, held)
	var reqs []announce.Request
	for i := range 40 {
		reqs = append(reqs, announce.Request{Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + i)}), Interface: "eth0"})
	}
	f.s.mu.Lock()
	before := f.s.rev
	f.s.mu.Unlock()
	if _, err := a.Claim(context.Background(), reqs, announce.ClaimOptions{}); err != nil {
		t.Fatalf("claim %d free addresses: %v", len(reqs), err)
	}
	f.s.mu.Lock()
	writes := f.s.rev - before
	f.s.mu.Unlock()
	if want := int64((len(reqs) + store.MaxGroupAddrs - 1) / store.MaxGroupAddrs); writes != want {
		t.Errorf("a claim of %d free addresses took %d writes of the store, want %d (batches of %d)", len(reqs), writes, want, store.MaxGroupAddrs)
	}
	mixed := []announce.Request{{Addr: held, Interface: "eth0"}}
	for i := range 5 {
		mixed = append(mixed, announce.Request{Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(100 + i)}), Interface: "eth0"})
	}
	_, err := a.Claim(context.Background(), mixed, announce.ClaimOptions{})
	var rf *announce.RefusedError
	if !errors.As(err, &rf) || len(rf.Refused) != 1 || rf.Refused[0].Addr != held {
		t.Fatalf("claim with b's %s among free addresses: %v; want it alone refused", held, err)
	}
	for _, r := range append(reqs, mixed[1:]...) {
		if got := f.owner(r.Addr); got != "a" || !aEng.holds(r.Addr) {
			t.Errorf("%s: the store's owner %q, a's engine holds it %v; want a's", r.Addr, got, aEng.holds(r.Addr))
		}
	}
	if got := f.owner(held); got != "b" {
		t.Errorf("%s: the store's owner %q, want b's still", held, got)
	}
}

// TestFakeTakesKeepTheGuard: a node's takes read the failsafe sets once,
// not once a take, while nothing they rest on changes; a set written since
// fails the next takes' transactions, which read them again, once for all,
// and take.
func TestFakeTakesKeepTheGuard(t *testing.T) {
	f := newFakeFleet(t)
	a, aEng := f.join("a")
	f.join("b")
	reads := func() int {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		return f.s.setReads["a"]
	}
	addr := func(i byte) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, i}) }
	f.claim(a, addr(1))
	first := reads()
	f.claim(a, addr(2))
	f.claim(a, addr(3))
	if got := reads(); first != 1 || got != first {
		t.Fatalf("reads of the failsafe sets: %d for the first claim, %d after three; want 1 and 1", first, got)
	}
	f.s.mu.Lock()
	lease := f.s.nodes["b"].lease
	f.s.mu.Unlock()
	lb := &fakeLedger{s: f.s, node: "b"}
	if _, err := lb.PutFailsafeSet(context.Background(), store.FailsafeSet{Node: "b", Lease: int64(lease), Nodes: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	// Forty addresses: two batches, each its own transaction, both
	// failing on the guard; one read serves both.
	var reqs []announce.Request
	for i := byte(4); i < 44; i++ {
		reqs = append(reqs, announce.Request{Addr: addr(i), Interface: "eth0"})
	}
	if _, err := a.Claim(context.Background(), reqs, announce.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := reads(); got != 2 {
		t.Errorf("reads of the failsafe sets after b wrote its set and a claimed in two batches: %d, want 2", got)
	}
	for i := byte(1); i < 44; i++ {
		if f.owner(addr(i)) != "a" || !aEng.holds(addr(i)) {
			t.Errorf("%s not a's", addr(i))
		}
	}
}
