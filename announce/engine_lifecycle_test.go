package announce

import (
	"context"
	"errors"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// fakeAssigner records the addresses it added and removed; have lists the
// addresses the interfaces already had.
type fakeAssigner struct {
	mu      sync.Mutex
	have    map[netip.Addr]bool
	added   []netip.Addr
	removed []netip.Addr
	addErr  error
}

func (f *fakeAssigner) Add(_ string, a netip.Addr) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.addErr != nil {
		return false, f.addErr
	}
	if f.have[a] {
		return false, nil
	}
	f.have[a] = true
	f.added = append(f.added, a)
	return true, nil
}

func (f *fakeAssigner) Remove(_ string, a netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.have, a)
	f.removed = append(f.removed, a)
	return nil
}

func (f *fakeAssigner) removedList() []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]netip.Addr(nil), f.removed...)
}

func newAssignHarness(t *testing.T, have ...netip.Addr) (*engineHarness, *fakeAssigner) {
	t.Helper()
	fa := &fakeAssigner{have: map[netip.Addr]bool{}}
	for _, a := range have {
		fa.have[a] = true
	}
	h := newEngineHarness(t, nil)
	h.e.cfg.Assigner = fa
	return h, fa
}

func TestEngineAssign(t *testing.T) {
	h, fa := newAssignHarness(t, b4) // b4 was on the interface before vip
	st, err := h.claimWith(t, ClaimOptions{Assign: true}, Request{a4, "eth0"}, Request{b4, "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	if !st[0].AddedAddress || st[1].AddedAddress {
		t.Errorf("got added %v and %v, want a4 added by vip and b4 not", st[0].AddedAddress, st[1].AddedAddress)
	}
	if _, _, err := h.e.Release(context.Background(), []netip.Addr{a4, b4}); err != nil {
		t.Fatal(err)
	}
	if got := fa.removedList(); len(got) != 1 || got[0] != a4 {
		t.Errorf("got removed %v, want only a4: never remove an address vip did not add", got)
	}
}

// TestEngineLeaveKeepsAddresses: Leave stops the claims as Suspend does but
// leaves the addresses vip added on the interface, for the next agent;
// Suspend removes them.
func TestEngineLeaveKeepsAddresses(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stop        func(e *Engine, addrs []netip.Addr) ([]netip.Addr, []netip.Addr, error)
		wantRemoved []netip.Addr
	}{
		{"leave", func(e *Engine, addrs []netip.Addr) ([]netip.Addr, []netip.Addr, error) {
			return e.Leave(addrs, "restart")
		}, nil},
		{"suspend", func(e *Engine, addrs []netip.Addr) ([]netip.Addr, []netip.Addr, error) {
			return e.Suspend(addrs, "fenced")
		}, []netip.Addr{a4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, fa := newAssignHarness(t)
			if _, err := h.claimWith(t, ClaimOptions{Assign: true}, Request{a4, "eth0"}); err != nil {
				t.Fatal(err)
			}
			stopped, _, err := tc.stop(h.e, []netip.Addr{a4})
			if err != nil || len(stopped) != 1 {
				t.Fatalf("stopped %v, %v; want a4", stopped, err)
			}
			if len(h.e.Status()) != 0 {
				t.Errorf("still held: %+v", h.e.Status())
			}
			if got := fa.removedList(); !slices.Equal(got, tc.wantRemoved) {
				t.Errorf("removed %v, want %v", got, tc.wantRemoved)
			}
		})
	}
}

func TestEngineAssignRollsBack(t *testing.T) {
	h, fa := newAssignHarness(t)
	// The hold fails after the address was added: it must be removed again.
	if _, err := h.claim(t, Request{b4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	h.ports["eth0"].holdErr = errors.New("no")
	if _, err := h.claimWith(t, ClaimOptions{Assign: true}, Request{a4, "eth0"}); err == nil {
		t.Fatal("want an error")
	}
	if got := fa.removedList(); len(got) != 1 || got[0] != a4 {
		t.Errorf("got removed %v, want a4 removed by the rollback", got)
	}
	if len(h.e.Status()) != 1 {
		t.Error("want only b4 held")
	}
}

func TestEngineAssignNeedsAnAssigner(t *testing.T) {
	h := newEngineHarness(t, nil)
	if _, err := h.claimWith(t, ClaimOptions{Assign: true}, Request{a4, "eth0"}); !errors.Is(err, ErrNoAssigner) {
		t.Errorf("got %v, want ErrNoAssigner", err)
	}
}

func stateOf(t *testing.T, e *Engine, a netip.Addr) string {
	t.Helper()
	st := e.Status(a)
	if len(st) != 1 {
		t.Fatalf("%s is not held", a)
	}
	return st[0].State
}

func TestEngineFollowsInterface(t *testing.T) {
	h := newEngineHarness(t, nil)
	events, cancel := h.e.Subscribe(100)
	defer cancel()
	if _, err := h.claim(t, Request{a4, "eth0"}, Request{a6, "eth0"}); err != nil {
		t.Fatal(err)
	}
	eth0 := h.ports["eth0"]
	rounds := eth0.rounds()

	h.e.InterfaceChanged(InterfaceChange{Name: "eth0", Index: 2, MAC: eth0.MAC(), Up: false})
	if s := stateOf(t, h.e, a4); s != api.StateWaiting {
		t.Errorf("link down: got state %s, want %s", s, api.StateWaiting)
	}
	h.e.InterfaceChanged(InterfaceChange{Name: "eth0", Index: 2, MAC: eth0.MAC(), Up: true})
	if s := stateOf(t, h.e, a4); s != api.StateAnnouncing {
		t.Errorf("link up: got state %s, want %s (burst re-armed)", s, api.StateAnnouncing)
	}
	waitFor(t, func() bool { return eth0.rounds() >= rounds+2 }, "a new first round for both addresses after link up")

	// A new MAC: the port is reopened and the burst re-armed.
	newMAC := net.HardwareAddr{2, 0, 0, 0, 0, 0x99}
	h.e.InterfaceChanged(InterfaceChange{Name: "eth0", Index: 2, MAC: newMAC, Up: true})
	if !eth0.isClosed() {
		t.Error("MAC change: want the old port closed")
	}
	if p := h.ports["eth0"]; p == eth0 || !p.isHeld(a4) || !p.isHeld(a6) {
		t.Error("MAC change: want a new port holding both addresses")
	}

	// Deleted: the claims wait; an interface of the same name brings them back.
	h.e.InterfaceChanged(InterfaceChange{Name: "eth0", Deleted: true})
	if s := stateOf(t, h.e, a6); s != api.StateWaiting {
		t.Errorf("deleted: got state %s, want %s", s, api.StateWaiting)
	}
	if !h.ports["eth0"].isClosed() {
		t.Error("deleted: want the port closed")
	}
	h.e.InterfaceChanged(InterfaceChange{Name: "eth0", Index: 9, MAC: newMAC, Up: true})
	if s := stateOf(t, h.e, a6); s != api.StateAnnouncing {
		t.Errorf("returned: got state %s, want %s", s, api.StateAnnouncing)
	}
	var kinds []EventKind
	for len(events) > 0 {
		kinds = append(kinds, (<-events).Kind)
	}
	var ifaceEvents int
	for _, k := range kinds {
		if k == EventInterface {
			ifaceEvents++
		}
	}
	if ifaceEvents != 5 {
		t.Errorf("got events %v, want 5 interface events (down, up, MAC, deleted, returned)", kinds)
	}
}

func TestEngineAdopt(t *testing.T) {
	h := newEngineHarness(t, map[string]error{"eth1": errors.New("gone")})
	h.e.cfg.Assigner = &fakeAssigner{have: map[netip.Addr]bool{a4: true}}
	old := t0.Add(-time.Hour)
	st, err := h.e.Adopt(context.Background(), []Claim{
		{Addr: a4, Interface: "eth0", ClaimedAt: old, RefreshedAt: old, Options: ClaimOptions{Assign: true}, AddedAddress: true},
		{Addr: a6, Interface: "eth1", ClaimedAt: old, RefreshedAt: old},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !st[0].ClaimedAt.Equal(old) || !st[0].RefreshedAt.Equal(t0) || !st[0].AddedAddress || st[0].State != api.StateAnnouncing {
		t.Errorf("adopted a4: got %+v, want its old ClaimedAt, a fresh burst and AddedAddress kept (vip added it before the crash)", st[0])
	}
	if st[1].State != api.StateWaiting {
		t.Errorf("adopted a6 on a missing interface: got %s, want %s", st[1].State, api.StateWaiting)
	}
}

// TestClaimEventSaysWhy: a claim's event (a hook's VIP_REASON) says why
// the engine took it: claimed, adopted from an earlier run's record, or
// taken again for the reason its caller gives (the fleet's fence lifted),
// which an earlier run's adoption is not.
func TestClaimEventSaysWhy(t *testing.T) {
	resumed := "resumed after the fence: the store answers again"
	for _, tc := range []struct {
		name string
		take func(e *Engine, c Claim) error
		want string
		// kind is the event's: a claim taken back is a resume.
		kind EventKind
	}{
		{"claimed", func(e *Engine, c Claim) error {
			_, err := e.Claim(context.Background(), []Request{{Addr: c.Addr, Interface: c.Interface}}, ClaimOptions{})
			return err
		}, "claimed", EventClaim},
		{"adopted", func(e *Engine, c Claim) error {
			_, err := e.Adopt(context.Background(), []Claim{c})
			return err
		}, "adopted from an earlier run", EventResume},
		{"resumed", func(e *Engine, c Claim) error {
			_, err := e.Resume(context.Background(), []Claim{c}, resumed)
			return err
		}, resumed, EventResume},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newEngineHarness(t, nil)
			events, cancel := h.e.Subscribe(100)
			defer cancel()
			if err := tc.take(h.e, Claim{Addr: a4, Interface: "eth0", ClaimedAt: t0, RefreshedAt: t0}); err != nil {
				t.Fatal(err)
			}
			for {
				select {
				case ev := <-events:
					if ev.Kind != EventClaim && ev.Kind != EventResume {
						continue
					}
					if ev.Kind != tc.kind {
						t.Errorf("the claim's event is a %s event, want %s", ev.Kind, tc.kind)
					}
					if ev.Message != tc.want {
						t.Errorf("the claim's event says %q, want %q", ev.Message, tc.want)
					}
					return
				case <-time.After(5 * time.Second):
					t.Fatal("no claim event")
				}
			}
		})
	}
}

func TestEventsLostAreCounted(t *testing.T) {
	h := newHub()
	ch, cancel := h.subscribe(2)
	defer cancel()
	for range 5 {
		h.publish(Event{Kind: EventClaim})
	}
	<-ch
	<-ch
	h.publish(Event{Kind: EventRelease})
	if ev := <-ch; ev.Kind != EventMissed || ev.Count != 3 {
		t.Errorf("got %+v, want a lost event counting 3", ev)
	}
	h.publish(Event{Kind: EventRelease})
	if ev := <-ch; ev.Kind != EventRelease {
		t.Errorf("got %+v, want the release event after the lost marker", ev)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEngineClaimsWaitWhileAPort: an interface made a port of a bridge
// receives nothing itself any more, so its claims wait, and the event says
// why, and its port stops answering (an in-kernel responder would see the
// frames before the bridge); freed, the claims come back, answered, with a
// burst.
func TestEngineClaimsWaitWhileAPort(t *testing.T) {
	h := newEngineHarness(t, nil)
	events, cancel := h.e.Subscribe(100)
	defer cancel()
	if _, err := h.claim(t, Request{a4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	eth0 := h.ports["eth0"]
	h.e.InterfaceChanged(InterfaceChange{Name: "eth0", Index: 2, MAC: eth0.MAC(), Up: true, Master: "a port of bridge br0"})
	if s := stateOf(t, h.e, a4); s != api.StateWaiting {
		t.Errorf("made a port: got state %s, want %s", s, api.StateWaiting)
	}
	if eth0.isHeld(a4) {
		t.Errorf("made a port: the port still answers for %s, want it silent", a4)
	}
	rounds := eth0.rounds()
	h.e.InterfaceChanged(InterfaceChange{Name: "eth0", Index: 2, MAC: eth0.MAC(), Up: true})
	if s := stateOf(t, h.e, a4); s != api.StateAnnouncing {
		t.Errorf("freed: got state %s, want %s (burst re-armed)", s, api.StateAnnouncing)
	}
	if !eth0.isHeld(a4) {
		t.Errorf("freed: the port does not answer for %s, want it to again", a4)
	}
	waitFor(t, func() bool { return eth0.rounds() > rounds }, "a new first round once freed")
	var msgs []string
	for len(events) > 0 {
		if ev := <-events; ev.Kind == EventInterface {
			msgs = append(msgs, ev.Message)
		}
	}
	if len(msgs) != 2 || !strings.Contains(msgs[0], "became a port of bridge br0, which receives its frames") || !strings.HasPrefix(msgs[1], "up") {
		t.Errorf("got interface events %q, want one saying it became a port of br0, then up", msgs)
	}
}

// kernel is the addresses the fake interfaces have, for EngineConfig.Kernel.
func (f *fakeAssigner) kernel(string) map[netip.Addr]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.have)
}

// TestEngineSilentWhereTheKernelAnswers: the port answers only for
// addresses the kernel does not have on the interface (added by --assign, or
// there before), so each request gets one answer; all are announced. An
// address the kernel gets back when its interface comes up is dropped from
// the port then.
func TestEngineSilentWhereTheKernelAnswers(t *testing.T) {
	h, fa := newAssignHarness(t, b4) // b4 was on the interface before vip
	h.e.cfg.Kernel = fa.kernel
	if _, err := h.claimWith(t, ClaimOptions{Assign: true}, Request{a4, "eth0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.claim(t, Request{b4, "eth0"}, Request{a6, "eth0"}); err != nil {
		t.Fatal(err)
	}
	p := h.ports["eth0"]
	for a, want := range map[netip.Addr]bool{a4: false, b4: false, a6: true} {
		if got := p.isHeld(a); got != want {
			t.Errorf("%s held by the port: got %v, want %v (the kernel answers for a4, added, and b4, already there)", a, got, want)
		}
	}
	waitFor(t, func() bool { return p.rounds() >= 3 }, "a first round for each, the silent ones too")

	// The interface goes away with its addresses and comes back down: the
	// port answers for a4 until the kernel has it again, once it is up.
	h.e.InterfaceChanged(InterfaceChange{Name: "eth0", Deleted: true})
	fa.mu.Lock()
	delete(fa.have, a4)
	fa.mu.Unlock()
	h.e.InterfaceChanged(InterfaceChange{Name: "eth0", Index: 2, MAC: p.MAC(), Up: false})
	p = h.ports["eth0"]
	if !p.isHeld(a4) {
		t.Fatal("back but down, without its address: want the port answering for a4")
	}
	h.e.InterfaceChanged(InterfaceChange{Name: "eth0", Index: 2, MAC: p.MAC(), Up: true})
	if p.isHeld(a4) {
		t.Error("up with a4 added back: want the port silent for it, the kernel answering")
	}
	if st := h.e.Status(a4)[0]; st.Answered != 7 || st.State != api.StateAnnouncing {
		t.Errorf("a4 after the port fell silent: got %+v, want the port's 7 answers kept and a burst", st)
	}
}
