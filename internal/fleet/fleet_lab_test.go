package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

// ttl is the shortest lease etcd grants, so that expiries come quickly.
const ttl = 2 * time.Second

var vip = netip.MustParseAddr("198.51.100.10")

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// world is a store host and agent hosts on one lab segment.
type world struct {
	l     *lab.Lab
	etcd  *etcdlab.Etcd
	hosts map[string]*lab.Host
}

func newWorld(t *testing.T, names ...string) *world {
	t.Helper()
	labtest.RequireTool(t, "etcd")
	cfgs := []lab.HostConfig{{Name: "store", IPv4: netip.MustParsePrefix("192.0.2.1/24")}}
	for i, n := range names {
		cfgs = append(cfgs, lab.HostConfig{Name: n, IPv4: netip.MustParsePrefix(fmt.Sprintf("192.0.2.%d/24", i+11))})
	}
	l := labtest.New(t, cfgs...)
	w := &world{l: l, hosts: map[string]*lab.Host{}}
	for _, h := range l.Hosts {
		w.hosts[h.Name] = h
	}
	w.etcd = etcdlab.StartEtcd(t, w.hosts["store"])
	return w
}

// client is a store client whose connections leave from host name.
func (w *world) client(t *testing.T, name string) *store.Client {
	t.Helper()
	url := "etcd://" + strings.TrimPrefix(w.etcd.Endpoint(), "http://")
	c, err := store.Open(context.Background(), store.Config{URL: url, Dial: labtest.DialIn(w.hosts[name]), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("open the store from %s: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mover is a Mover on host name, as vip move makes one.
func (w *world) mover(t *testing.T, name string) *fleet.Mover {
	t.Helper()
	mv := fleet.NewMover(w.client(t, name))
	t.Cleanup(mv.Close)
	return mv
}

// join starts a member on host name with a fake engine.
func (w *world) join(t *testing.T, name string) (*fleet.Member, *fakeEngine) {
	t.Helper()
	eng := newFakeEngine()
	eng.deadline = announce.NewDeadline(nil)
	m, err := fleet.Join(context.Background(), fleet.Config{
		Store: w.client(t, name), Node: name, TTL: ttl, Log: testLog(t), Deadline: eng.deadline,
		Interfaces: func() []store.Interface {
			return []store.Interface{{Name: "eth0", MAC: "02:00:00:00:00:01", Up: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24")}}}
		},
	}, eng)
	if err != nil {
		t.Fatalf("join as %s: %v", name, err)
	}
	t.Cleanup(m.Close)
	return m, eng
}

// ownerAndStandby joins a and b: a claims vip, b stands by for it.
func ownerAndStandby(t *testing.T, w *world) (a *fleet.Member, aEng *fakeEngine, b *fleet.Member, bEng *fakeEngine) {
	t.Helper()
	a, aEng = w.join(t, "a")
	b, bEng = w.join(t, "b")
	if err := claim(t, a, vip); err != nil {
		t.Fatalf("claim on a: %v", err)
	}
	if _, err := b.Standby(context.Background(), []announce.Request{{Addr: vip, Interface: "eth0"}}, announce.ClaimOptions{}); err != nil {
		t.Fatalf("standby on b: %v", err)
	}
	return a, aEng, b, bEng
}

func claim(t *testing.T, m *fleet.Member, a netip.Addr) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := m.Claim(ctx, []announce.Request{{Addr: a, Interface: "eth0"}}, announce.ClaimOptions{})
	return err
}

// checkNoOverlap fails if a and b ever answered for addr at once.
func checkNoOverlap(t *testing.T, addr netip.Addr, a, b *fakeEngine) {
	t.Helper()
	for _, sa := range a.answered(addr) {
		for _, sb := range b.answered(addr) {
			aEnd, bEnd := sa.to, sb.to
			if aEnd.IsZero() {
				aEnd = time.Now()
			}
			if bEnd.IsZero() {
				bEnd = time.Now()
			}
			if sa.from.Before(bEnd) && sb.from.Before(aEnd) {
				t.Fatalf("both nodes answered for %s at once: a %v–%v, b %v–%v", addr, sa.from, sa.to, sb.from, sb.to)
			}
		}
	}
}

func TestClaimHeldByAnotherNodeIsRefused(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, _ := w.join(t, "a")
	b, bEng := w.join(t, "b")
	if err := claim(t, a, vip); err != nil {
		t.Fatalf("claim on a: %v", err)
	}
	err := claim(t, b, vip)
	var held *fleet.HeldError
	if !errors.As(err, &held) || held.Node != "a" {
		t.Fatalf("claim on b: got %v, want a HeldError naming a", err)
	}
	if !strings.Contains(err.Error(), "vip move "+vip.String()+" --to b") || !strings.Contains(err.Error(), "--take-over") {
		t.Errorf("the refusal names neither way on: %v", err)
	}
	if bEng.holds(vip) {
		t.Fatal("b answers for an address a holds")
	}
	if _, _, err := a.Release(context.Background(), []netip.Addr{vip}); err != nil {
		t.Fatalf("release on a: %v", err)
	}
	if err := claim(t, b, vip); err != nil {
		t.Fatalf("claim on b after a released: %v", err)
	}
	v, err := w.client(t, "store").Fleet(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cv, ok := v.ClaimOf(vip); !ok || cv.Claim.Node != "b" {
		t.Errorf("the fleet shows %+v for %s, want it held by b", cv, vip)
	}
	if len(v.Nodes) != 2 {
		t.Errorf("the fleet shows %d live nodes, want 2", len(v.Nodes))
	}
}

func TestMoveNeverOverlaps(t *testing.T) {
	w := newWorld(t, "a", "b", "client")
	a, aEng := w.join(t, "a")
	_, bEng := w.join(t, "b")
	second := netip.MustParseAddr("198.51.100.11")
	for _, x := range []netip.Addr{vip, second} {
		if err := claim(t, a, x); err != nil {
			t.Fatal(err)
		}
	}
	mover := w.mover(t, "client")
	res, err := mover.Move(context.Background(), store.MoveRequest{All: true, From: "a", To: "b"})
	if err != nil {
		t.Fatalf("drain a to b: %v", err)
	}
	if len(res) != 2 {
		t.Fatalf("got %d results, want 2: %+v", len(res), res)
	}
	for _, r := range res {
		t.Logf("move of %s: released +%v, live +%v", r.Addr, r.Released.Sub(r.Asked).Round(time.Microsecond), r.Live.Sub(r.Asked).Round(time.Microsecond))
		if !r.Done() || r.Waited || r.Released.After(r.Live) {
			t.Errorf("move of %s: %+v, want released by a, then live on b, without waiting", r.Addr, r)
		}
		if aEng.holds(r.Addr) || !bEng.holds(r.Addr) {
			t.Errorf("after the move of %s: a holds %v, b holds %v", r.Addr, aEng.holds(r.Addr), bEng.holds(r.Addr))
		}
		checkNoOverlap(t, r.Addr, aEng, bEng)
	}
	// Nobody holds this one: the move is a claim on the target.
	free := netip.MustParseAddr("198.51.100.12")
	res, err = mover.Move(context.Background(), store.MoveRequest{Addrs: []netip.Addr{free}, To: "b"})
	if err != nil || len(res) != 1 || !res[0].Unheld || !res[0].Done() {
		t.Fatalf("move of an address nobody holds: %+v, %v", res, err)
	}
	// Refused before anything changes.
	_, err = mover.Move(context.Background(), store.MoveRequest{Addrs: []netip.Addr{vip}, To: "nobody"})
	if !errors.Is(err, store.ErrRefused) || !strings.Contains(err.Error(), "not alive") {
		t.Errorf("move to a node not alive: got %v", err)
	}
	_, err = mover.Move(context.Background(), store.MoveRequest{Addrs: []netip.Addr{vip}, To: "a", Interface: "eth9"})
	if !errors.Is(err, store.ErrRefused) || !strings.Contains(err.Error(), "no interface eth9") {
		t.Errorf("move to a missing interface: got %v", err)
	}
	if !bEng.holds(vip) {
		t.Error("a refused move changed the owner")
	}
}

func TestStandbyTakesOverWhenTheOwnerDies(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, _, _, bEng := ownerAndStandby(t, w)
	died := time.Now()
	a.Crash()
	labtest.Eventually(t, ttl+3*time.Second, func() (bool, string) {
		return bEng.holds(vip), "the standby b did not take the address of the dead owner"
	})
	took := time.Since(died)
	t.Logf("the standby was live %v after the owner died (TTL %v)", took.Round(time.Millisecond), ttl)
	if took > ttl+time.Second {
		t.Errorf("the standby was live %v after the owner died, want within TTL + 1s (%v)", took, ttl+time.Second)
	}
	// The event comes after the engine's claim and the standby record's
	// deletion: wait for it, not just look.
	labtest.Eventually(t, 2*time.Second, func() (bool, string) {
		return bEng.sawEvent(event.Standby, "lease of its owner a expired"), "no standby event says why b took the address"
	})
}

func TestMoveWaitsForAnOwnerThatDoesNotAnswer(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, _ := w.join(t, "a")
	_, bEng := w.join(t, "b")
	if err := claim(t, a, vip); err != nil {
		t.Fatal(err)
	}
	a.Crash()
	res, err := w.mover(t, "b").Move(context.Background(), store.MoveRequest{Addrs: []netip.Addr{vip}, To: "b"})
	if err != nil || len(res) != 1 {
		t.Fatalf("move from a dead owner: %+v, %v", res, err)
	}
	t.Logf("move from a dead owner: live %v after asked", res[0].Live.Sub(res[0].Asked).Round(time.Millisecond))
	if r := res[0]; !r.Done() || !r.Waited {
		t.Errorf("got %+v, want live on b after waiting for a's lease", r)
	}
	if !bEng.holds(vip) {
		t.Error("b does not hold the address after the move")
	}
}

func TestFencedBeforeTheLeaseExpires(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, aEng, _, bEng := ownerAndStandby(t, w)
	cutAt := time.Now()
	cut := labtest.Isolate(t, w.l, w.hosts["a"], w.hosts["store"])
	bc := w.client(t, "b")
	labtest.Eventually(t, ttl+5*time.Second, func() (bool, string) {
		v, err := bc.Fleet(context.Background())
		return bEng.holds(vip), fmt.Sprintf("the standby did not take over from the cut-off owner (fleet %+v, %v)", v, err)
	})
	if aEng.holds(vip) {
		t.Fatal("a still answers though b took the address: a did not fence")
	}
	checkNoOverlap(t, vip, aEng, bEng)
	var fencedAt time.Time
	if _, _, f := a.Lease(); !f.IsZero() {
		fencedAt = f
	}
	bSpans, aSpans := bEng.answered(vip), aEng.answered(vip)
	t.Logf("cut at %s; a fenced %v after the cut and stopped answering %v before b began; b live %v after the cut",
		cutAt.Format("15:04:05.000"), fencedAt.Sub(cutAt).Round(time.Millisecond),
		bSpans[0].from.Sub(aSpans[0].to).Round(time.Millisecond), bSpans[0].from.Sub(cutAt).Round(time.Millisecond))
	if st := a.Status(vip); len(st) != 1 || st[0].State != api.StateFenced {
		t.Errorf("a's status for %s: %+v, want fenced", vip, st)
	}
	if !aEng.seesEvent(event.Fence, "") {
		t.Error("a published no fence event")
	}
	cut.Heal(t)
	labtest.Eventually(t, 15*time.Second, func() (bool, string) {
		st := a.Status(vip)
		return len(st) == 1 && st[0].State == api.StateLost, fmt.Sprintf("a's status after the heal: %+v, want lost", st)
	})
	if aEng.holds(vip) {
		t.Error("a answers again for an address b took")
	}
	if !aEng.seesEvent(event.Taken, "lost to b") {
		t.Error("a did not report the address lost to b")
	}
	if err := claim(t, a, vip); err == nil {
		t.Error("a could claim the address b holds after the heal")
	}
	// a joined again under a new lease: cut off again, it fences again.
	other := netip.MustParseAddr("198.51.100.30")
	if err := claim(t, a, other); err != nil {
		t.Fatalf("a claim on a after the heal: %v", err)
	}
	labtest.Isolate(t, w.l, w.hosts["a"], w.hosts["store"])
	labtest.Eventually(t, ttl+5*time.Second, func() (bool, string) {
		_, _, f := a.Lease()
		return !f.IsZero() && !aEng.holds(other), "a did not fence when cut off a second time"
	})
}

// TestLeaderLossFencesNothing has the only agent of a fleet, run as the
// agent runs it by default (the failsafe on, the answer deadline checked),
// hold an address while the leader of its 3-member etcd cluster is
// killed. The election that follows must not fence it, at the default
// TTL: alone, it answers on failsafe past its lease's deadline. Without
// that, at a 2 s TTL, it fenced on most elections (the fence 1.17 s after
// its last renewal).
func TestLeaderLossFencesNothing(t *testing.T) {
	labtest.RequireTool(t, "etcd")
	l := labtest.New(t,
		lab.HostConfig{Name: "s1", IPv4: netip.MustParsePrefix("192.0.2.1/24")},
		lab.HostConfig{Name: "s2", IPv4: netip.MustParsePrefix("192.0.2.3/24")},
		lab.HostConfig{Name: "s3", IPv4: netip.MustParsePrefix("192.0.2.4/24")},
		lab.HostConfig{Name: "a", IPv4: netip.MustParsePrefix("192.0.2.11/24")},
	)
	cluster := etcdlab.StartEtcdCluster(t, l.Hosts[0], l.Hosts[1], l.Hosts[2])
	var hostports []string
	for _, e := range cluster.Endpoints() {
		hostports = append(hostports, strings.TrimPrefix(e, "http://"))
	}
	c, err := store.Open(context.Background(), store.Config{URL: "etcd://" + strings.Join(hostports, ","), Dial: labtest.DialIn(l.Hosts[3]), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eng := newFakeEngine()
	eng.deadline = announce.NewDeadline(nil)
	// The default TTL: the one that must ride out an election.
	m, err := fleet.Join(context.Background(), fleet.Config{Store: c, Node: "a", Log: testLog(t), Deadline: eng.deadline, Failsafe: failsafeConfig(t)}, eng)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := claim(t, m, vip); err != nil {
		t.Fatal(err)
	}
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		return m.FailsafeSetWritten(), "a's failsafe set, naming nobody, is not in the store"
	})
	killed := time.Now()
	cluster.KillLeader(t)
	labtest.Eventually(t, 3*fleet.DefaultTTL, func() (bool, string) {
		_, renewed, _ := m.Lease()
		return renewed.After(killed), "no renewal reached the cluster after its leader was killed"
	})
	if _, _, fencedAt := m.Lease(); !fencedAt.IsZero() || !eng.holds(vip) {
		t.Fatalf("the claim was fenced (at %v) when the leader was killed", fencedAt)
	}
	// A fence the election caused is over by now (the store answered
	// again): its event says it was.
	if fences := eng.eventsOf(event.Fence); len(fences) > 0 {
		t.Fatalf("a fenced while the leader was elected: %q", fences)
	}
	if at, now := eng.deadline.At(); at <= now {
		t.Fatalf("a's answer deadline passed %v ago, after the election", now-at)
	}
}

func TestStoreRestartedClaimsResume(t *testing.T) {
	w := newWorld(t, "a")
	a, aEng := w.join(t, "a")
	if err := claim(t, a, vip); err != nil {
		t.Fatal(err)
	}
	w.etcd.Stop(t)
	labtest.Eventually(t, ttl+5*time.Second, func() (bool, string) {
		return !aEng.holds(vip), "a still answers with the store down past its fence"
	})
	w.etcd.Restart(t)
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		return aEng.holds(vip), fmt.Sprintf("a's claim did not resume after the store restarted: %+v", a.Status(vip))
	})
	if !aEng.seesEvent(event.Resume, "resumed 1") {
		t.Error("no resume event")
	}
	v, err := w.client(t, "store").Fleet(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cv, ok := v.ClaimOf(vip); !ok || cv.Claim.Node != "a" {
		t.Errorf("the store does not show a holding %s after the restart: %+v", vip, v.Claims)
	}
}

// TestResumeRefusedByTheEngineIsReleased: after the fence, a claim the
// engine will not take back (its interface cannot be opened, say) is
// released, not left listed as fenced by an unfenced node: its key goes,
// so that another node can claim the address, and an event says why. The
// other claim resumes.
func TestResumeRefusedByTheEngineIsReleased(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, aEng := w.join(t, "a")
	other := netip.MustParseAddr("198.51.100.11")
	for _, v := range []netip.Addr{vip, other} {
		if err := claim(t, a, v); err != nil {
			t.Fatal(err)
		}
	}
	w.etcd.Stop(t)
	labtest.Eventually(t, ttl+5*time.Second, func() (bool, string) {
		return !aEng.holds(vip) && !aEng.holds(other), "a still answers with the store down past its fence"
	})
	aEng.mu.Lock()
	aEng.refuses[other] = errors.New("interface eth0 cannot be opened")
	aEng.mu.Unlock()
	w.etcd.Restart(t)
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		return aEng.holds(vip), fmt.Sprintf("a's claim of %s did not resume after the store restarted: %+v", vip, a.Status())
	})
	labtest.Eventually(t, 5*time.Second, func() (bool, string) {
		st := a.Status(other)
		return len(st) == 0, fmt.Sprintf("%s, which the engine refused, is still listed: %+v", other, st)
	})
	if !aEng.seesEvent(event.Release, "not resumed after the fence") {
		t.Errorf("no release event for %s", other)
	}
	if !aEng.seesEvent(event.Resume, "1 released") {
		t.Error("the resume event does not count the release")
	}
	v, err := w.client(t, "store").Fleet(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cv, ok := v.ClaimOf(other); ok {
		t.Errorf("the store still shows %s held by %s, which does not answer for it", other, cv.Claim.Node)
	}
	b, _ := w.join(t, "b")
	if err := claim(t, b, other); err != nil {
		t.Errorf("b cannot claim %s, released by a: %v", other, err)
	}
}

func TestReleaseIsNotTakenByAStandby(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, aEng, _, bEng := ownerAndStandby(t, w)
	if _, _, err := a.Release(context.Background(), []netip.Addr{vip}); err != nil {
		t.Fatal(err)
	}
	// A claim on a succeeds only while the address is free: had the
	// standby taken the released address, it would be refused.
	if err := claim(t, a, vip); err != nil {
		t.Fatalf("a could not claim again what it released (did the standby take it?): %v", err)
	}
	if bEng.holds(vip) || !aEng.holds(vip) {
		t.Error("the standby took an address its owner released on purpose")
	}
}

// testLog logs to the test's output, debug included with VIP_TEST_DEBUG set.
func testLog(t *testing.T) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("VIP_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

func TestTakeOverIsAMoveHere(t *testing.T) {
	w := newWorld(t, "a", "b")
	a, aEng := w.join(t, "a")
	b, bEng := w.join(t, "b")
	if err := claim(t, a, vip); err != nil {
		t.Fatal(err)
	}
	free := netip.MustParseAddr("198.51.100.20")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := b.TakeOver(ctx, []announce.Request{{Addr: vip, Interface: "eth0"}, {Addr: free, Interface: "eth0"}}, announce.ClaimOptions{}, false)
	if err != nil || len(st) != 2 {
		t.Fatalf("take over on b: %+v, %v", st, err)
	}
	if aEng.holds(vip) || !bEng.holds(vip) || !bEng.holds(free) {
		t.Fatalf("after the take-over: a holds %v, b holds %v and %v", aEng.holds(vip), bEng.holds(vip), bEng.holds(free))
	}
	checkNoOverlap(t, vip, aEng, bEng)
	if err := claim(t, a, vip); err == nil {
		t.Error("a could claim again what b took over")
	}
}

func TestMoveCountsTheTrafficAtTheTarget(t *testing.T) {
	w := newWorld(t, "a", "b", "c")
	a, _ := w.join(t, "a")
	_, bEng := w.join(t, "b")
	_, cEng := w.join(t, "c")
	bEng.countTraffic(vip)
	other := netip.MustParseAddr("198.51.100.21")
	for _, x := range []netip.Addr{vip, other} {
		if err := claim(t, a, x); err != nil {
			t.Fatal(err)
		}
	}
	mover := w.mover(t, "store")
	// b counts: 100 packets between its two readings, a second apart.
	res, err := mover.Move(context.Background(), store.MoveRequest{Addrs: []netip.Addr{vip}, To: "b", TrafficWindow: time.Second})
	if err != nil || len(res) != 1 || !res[0].Done() {
		t.Fatalf("move to b: %+v, %v", res, err)
	}
	if tr := res[0].Traffic; tr == nil || !tr.Counted || tr.Packets != 100 || tr.Bytes != 6400 || time.Duration(tr.Window) != time.Second {
		t.Errorf("traffic after the move to b: %+v, want 100 packets counted over 1s", tr)
	}
	if took := res[0].Live.Sub(res[0].Asked); took > 900*time.Millisecond {
		t.Errorf("the move was live %v after asked: the window must not delay it", took)
	}
	// c does not count (its responder is the sockets').
	res, err = mover.Move(context.Background(), store.MoveRequest{Addrs: []netip.Addr{other}, To: "c", TrafficWindow: time.Second})
	if err != nil || len(res) != 1 || !res[0].Done() || !cEng.holds(other) {
		t.Fatalf("move to c: %+v, %v", res, err)
	}
	if tr := res[0].Traffic; tr == nil || tr.Counted {
		t.Errorf("traffic after the move to c: %+v, want not counted", tr)
	}
	got := res[0].API().Summary()
	if !strings.Contains(got, "traffic not counted on c") {
		t.Errorf("summary %q does not say the traffic was not counted", got)
	}
}
