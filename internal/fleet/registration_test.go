package fleet_test

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// hostInterfaces is a host's interfaces as a test changes them, for a
// member's Config.Interfaces.
type hostInterfaces struct {
	mu       sync.Mutex
	prefixes []netip.Prefix
}

func (h *hostInterfaces) read() []store.Interface {
	h.mu.Lock()
	defer h.mu.Unlock()
	return []store.Interface{{Name: "eth0", MAC: "02:00:00:00:00:01", Up: true, Prefixes: slices.Clone(h.prefixes)}}
}

// set makes ps eth0's addresses.
func (h *hostInterfaces) set(ps ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prefixes = nil
	for _, p := range ps {
		h.prefixes = append(h.prefixes, netip.MustParsePrefix(p))
	}
}

// node returns name's registration in the store, the lease it is bound to
// and how many times it was written again (Reregister); ok is false when
// there is none.
func (s *fakeStore) node(name string) (rec store.Node, lease fleet.LeaseID, writes int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	kv, ok := s.nodes[name]
	return kv.v, kv.lease, s.nodeWrites[name], ok
}

// putNode writes rec as its node's registration under a lease of its own,
// as another agent of that name would.
func (s *fakeStore) putNode(rec store.Node) fleet.LeaseID {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextLease++
	lease := s.nextLease
	s.leases[lease] = fakeLease{ttl: time.Hour, expires: s.clock.Now().Add(time.Hour)}
	s.nodes[rec.Node] = fakeKV[store.Node]{v: rec, lease: lease, create: s.bumpLocked()}
	return lease
}

// registers says whether name's registration in the store lists p on
// eth0, under name's member's lease.
func (f *fakeFleet) registers(name string, p string) bool {
	rec, lease, _, ok := f.s.node(name)
	now, _, _ := f.running[name].Lease()
	return ok && int64(lease) == now && len(rec.Interfaces) == 1 && slices.Contains(rec.Interfaces[0].Prefixes, netip.MustParsePrefix(p))
}

// TestFakeInterfacesChanged: an address added to the host after it joined
// is written to its registration, under its lease; an unchanged list
// writes nothing; a record of the node's name another agent wrote is left
// as it is; a burst of changes writes the latest state, without ever
// blocking the caller.
func TestFakeInterfacesChanged(t *testing.T) {
	const own, added = "192.0.2.2/24", "192.0.2.7/24"
	t.Run("an address added is registered", func(t *testing.T) {
		f := newFakeFleet(t)
		ifs := &hostInterfaces{}
		ifs.set(own)
		a, _ := f.joinWith("a", ifs.read)
		a.InterfacesChanged()
		never(t, func() bool { _, _, writes, _ := f.s.node("a"); return writes > 0 }, "the registration was written again with nothing changed")
		ifs.set(own, added)
		a.InterfacesChanged()
		eventually(t, func() bool { return f.registers("a", added) }, "the address added is not in the registration")
		if _, _, writes, _ := f.s.node("a"); writes != 1 {
			t.Errorf("the registration was written again %d times, want once", writes)
		}
		ifs.set(own)
		a.InterfacesChanged()
		eventually(t, func() bool { return !f.registers("a", added) && f.registers("a", own) }, "the address removed is still in the registration")
	})

	t.Run("another agent's record is left", func(t *testing.T) {
		f := newFakeFleet(t)
		ifs := &hostInterfaces{}
		ifs.set(own)
		a, _ := f.joinWith("a", ifs.read)
		other := store.Node{Node: "a", Host: "elsewhere", PID: 4242, Interfaces: []store.Interface{{Name: "eth9"}}}
		otherLease := f.s.putNode(other)
		ifs.set(own, added)
		a.InterfacesChanged()
		never(t, func() bool {
			rec, lease, writes, _ := f.s.node("a")
			return writes > 0 || lease != otherLease || rec.Host != "elsewhere"
		}, "a's agent wrote over the record of another agent of its name")
	})

	t.Run("a burst writes the latest state, the caller never waits", func(t *testing.T) {
		f := newFakeFleet(t)
		ifs := &hostInterfaces{}
		ifs.set(own)
		a, _ := f.joinWith("a", ifs.read)
		// The store hangs: every write waits for it.
		f.s.mu.Lock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 20 {
				ifs.set(own, netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)}), 24).String())
				a.InterfacesChanged()
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			f.s.mu.Unlock()
			t.Fatal("InterfacesChanged waited for the store")
		}
		f.s.mu.Unlock()
		eventually(t, func() bool { return f.registers("a", "192.0.2.119/24") }, "the latest state is not the registration")
		if _, _, writes, _ := f.s.node("a"); writes > 2 {
			t.Errorf("20 changes while the store hung wrote the registration %d times, want at most 2 (the one under way, then the latest)", writes)
		}
	})

	for _, tc := range []struct {
		name string
		// backAt is when the store answers again, cut off at the start.
		backAt   time.Duration
		newLease bool
	}{
		{name: "the store fails a moment: written once it answers", backAt: 2 * fakeTiming.Renew},
		{name: "fenced, the lease still alive: written once unfenced", backAt: 5 * time.Second},
		{name: "the lease lost: the new registration has it", backAt: 7 * time.Second, newLease: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet(t)
			ifs := &hostInterfaces{}
			ifs.set(own)
			a, aEng := f.joinWith("a", ifs.read)
			f.claim(a, vip)
			lease, _, _ := a.Lease()
			f.s.setCut("a", true)
			ifs.set(own, added)
			a.InterfacesChanged()
			f.advanceTo(tc.backAt - fakeTiming.Renew/2)
			f.s.setCut("a", false)
			f.advanceTo(tc.backAt + 2*fakeTiming.Renew)
			eventually(t, func() bool { return f.registers("a", added) }, "the address added is not in the registration")
			eventually(t, func() bool { return aEng.holds(vip) }, "a does not hold its claim again")
			now, _, fencedAt := a.Lease()
			if (now != lease) != tc.newLease || !fencedAt.IsZero() {
				t.Errorf("lease %x (was %x), fenced at %v: want a new lease %v, not fenced", now, lease, fencedAt, tc.newLease)
			}
			if _, _, writes, _ := f.s.node("a"); tc.newLease && writes != 0 {
				t.Errorf("the registration made under the new lease was written again %d times, want none (it was fresh)", writes)
			}
		})
	}
}

// records is a log of the messages a member logged, for a test to read.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) said(msg string) bool { return slices.Contains(r.all(), msg) }

func (r *records) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// TestFakeRegistrationSaysHowThePredecessorStopped: an agent that stops
// for a restart (Leave) says so in its registration, under its lease; its
// successor on the host says it took over the records of an agent that
// stopped for a restart, and of one that died only when the record says
// no stop (issue 31: every restart was told as a death).
func TestFakeRegistrationSaysHowThePredecessorStopped(t *testing.T) {
	t.Run("Leave records the stop", func(t *testing.T) {
		f := newFakeFleet(t)
		a, _ := f.join("a")
		f.advanceTo(1500 * time.Millisecond)
		lease, _, _ := a.Lease()
		a.Leave()
		rec, under, _, ok := f.s.node("a")
		if !ok || int64(under) != lease || !rec.Stopped.Equal(f.clock.Now()) {
			t.Errorf("after Leave the registration is %+v under lease %x (found %v), want it stopped at %v under %x", rec, under, ok, f.clock.Now(), lease)
		}
	})
	host, _ := os.Hostname()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skipf("no boot id to make this host's predecessor with: %v", err)
	}
	// A process that ran and is gone: the predecessor's pid.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Date(2025, 12, 31, 23, 59, 58, 0, time.UTC)
	for _, tc := range []struct {
		name          string
		stopped       time.Time
		want, wantNot string
	}{
		{"stopped for a restart", stopped,
			"took over the records of this node's agent, which stopped for a restart", "took over the records of this node's agent that died (it recorded no stop)"},
		{"died", time.Time{},
			"took over the records of this node's agent that died (it recorded no stop)", "took over the records of this node's agent, which stopped for a restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet(t)
			f.s.putNode(store.Node{Node: "a", Host: host, BootID: strings.TrimSpace(string(boot)), PID: gone.Process.Pid, Stopped: tc.stopped})
			log := &records{}
			eng := newFakeEngine()
			m, err := fleet.Join(context.Background(), fleet.Config{Ledger: f.s.ledger("a"), Clock: f.clock, Node: "a", TTL: fakeTTL, Log: slog.New(log)}, eng)
			if err != nil {
				t.Fatalf("join over this host's predecessor: %v", err)
			}
			t.Cleanup(m.Close)
			if !log.said(tc.want) || log.said(tc.wantNot) {
				t.Errorf("the successor logged %q, want %q and not %q", log.all(), tc.want, tc.wantNot)
			}
		})
	}
}
