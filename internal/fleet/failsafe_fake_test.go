package fleet_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/event"
	"github.com/vipctl/vip/internal/failsafe"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// TestFakeAdoptWaitsForKeptPromises starts an agent whose predecessor
// promised an owner on failsafe, a, to take none of its addresses for 3 s
// more (the promise kept on disk). Re-adopting the predecessor's claim of
// an address whose key is free is a take through the store: it waits for
// the promise to end, since the address may be one a answers for on that
// promise. Meanwhile the status says to whom this node promised, until
// when. Without the wait, the key is this node's at once.
func TestFakeAdoptWaitsForKeptPromises(t *testing.T) {
	f := newFakeFleet(t)
	until := f.epoch.Add(3 * time.Second)
	path := filepath.Join(t.TempDir(), "promises")
	raw, err := json.Marshal(map[string]time.Time{"a": until})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b, eng := f.joinConfig("b", func(c *fleet.Config) { c.Promises = path })
	if p := b.Info().Promised; p == nil || p.Owner != "a" || !p.Until.Equal(until) {
		t.Errorf("b's status says it promised %+v, want a until %s", p, until)
	}

	addr := netip.MustParseAddr("192.0.2.10")
	adopted := make(chan error, 1)
	go func() {
		_, err := b.Adopt(context.Background(), []announce.Claim{{Addr: addr, Interface: "eth0"}})
		adopted <- err
	}()
	never(t, func() bool { return f.owner(addr) == "b" }, "b took the key at once while its promise to a was in force")
	f.advanceTo(2500 * time.Millisecond)
	never(t, func() bool { return f.owner(addr) == "b" }, "b took the key 2.5 s in, while its promise to a was in force until 3 s")
	f.advanceTo(3500 * time.Millisecond)
	eventually(t, func() bool { return f.owner(addr) == "b" && eng.holds(addr) }, "b did not adopt the claim once its promise ended")
	if err := <-adopted; err != nil {
		t.Fatalf("adopt after the promise ended: %v", err)
	}
	if p := b.Info().Promised; p != nil {
		t.Errorf("b's status says it promised %+v after the promise ended", p)
	}
}

// TestFakeFailsafeAsksTheStoreNow has b asked by an owner, a, whose
// renewals no longer reach the store. While the store answers b, b says
// so, and a must fence. The store then stops answering b too, a moment
// after b's last renewal was acknowledged (a store-wide outage just
// begun): b's renewal is still recent, but the store does not answer it
// now, so b promises instead, and a keeps answering on failsafe. Judged
// on the renewal alone, b said it reached the store and a fenced: every
// address of the fleet dark for the outage (4-5 s in the nemesis).
func TestFakeFailsafeAsksTheStoreNow(t *testing.T) {
	f := newFakeFleet(t)
	b, _ := f.joinConfig("b", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	q := failsafe.Message{Kind: failsafe.KindAsk, From: "a", To: "b", Nonce: "n1", Lease: 7, Seq: 1, PromiseMS: 1500}
	if v, _, why := b.FailsafeDecide(q); v != failsafe.ReachesStore {
		t.Fatalf("b, renewed and reaching the store, answered %v (%s), want %v", v, why, failsafe.ReachesStore)
	}
	f.s.setCut("b", true)
	// Half a renewal period on: b's last renewal is recent, and the
	// answer read a moment ago is old enough to be read again.
	f.advanceTo(fakeTiming.Renew / 2)
	v, p, why := b.FailsafeDecide(q)
	if v != failsafe.Accepted || p <= 0 {
		t.Fatalf("b, renewed %v ago but cut off from the store now, answered %v (%s, promise %v), want a promise", fakeTiming.Renew/2, v, why, p)
	}
	if p > fakeTiming.TTL/2 {
		t.Errorf("b promised %v, more than half a TTL (%v)", p, fakeTiming.TTL/2)
	}
}

// failsafeConfig is a failsafe on a UDP socket of the loopback, with a key
// of its own and its promises kept in a directory of the test's.
func failsafeConfig(t *testing.T) *fleet.FailsafeConfig {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &fleet.FailsafeConfig{Key: key, Conn: conn, Advertise: netip.MustParseAddrPort(conn.LocalAddr().String()),
		Promises: filepath.Join(t.TempDir(), "promises")}
}

// TestFakeFailsafeRefusedRoundFences has a, the owner of an address, and
// b cut off from the store together: a answers on b's promise. Then the
// store comes back to b first, and b answers a's next round that it
// reaches the store: a fences at that round, saying why, with no wait for
// the promises in force to end.
func TestFakeFailsafeRefusedRoundFences(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.10")
	f := newFakeFleet(t)
	a, eng := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.joinConfig("b", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.claim(a, addr)
	// a joined before b: it reads the peers again a TTL on (the fake
	// store's watch tells nothing), and writes its set naming b.
	f.advanceTo(fakeTiming.TTL)
	eventually(t, func() bool {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		set, ok := f.s.failsafes["a"]
		return ok && slices.Equal(set.v.Nodes, []string{"b"})
	}, "a's failsafe set naming b is not in the store")
	f.s.setCut("a", true)
	f.s.setCut("b", true)
	f.advanceTo(fakeTiming.TTL + 2*fakeTiming.Renew)
	eventually(t, func() bool { return a.Info().Failsafe != nil }, "a did not answer on failsafe with b's promise")
	roundAt := f.now()
	f.s.setCut("b", false)
	f.advanceTo(roundAt + fakeTiming.Renew)
	eventually(t, func() bool { _, _, fencedAt := a.Lease(); return !fencedAt.IsZero() }, "a did not fence when b answered that it reaches the store")
	if !eng.sawEvent(event.Fence, "the failsafe ended: b reaches-store") {
		t.Errorf("a's fence does not say the failsafe ended on b's answer: %q", eng.eventsOf(event.Fence))
	}
}

// TestFakeTakeGuardedAgainstALapsingOwner has c, which joined after a
// wrote its failsafe set (so the set leaves c out), claim a's address
// just as a's lease expires: after c read the sets, which found a alive,
// and before c's transaction. a may answer for the address on failsafe,
// on the promises of nodes that are not c, so c must not take it: the
// transaction compares that a's record is still the one read, fails, and
// c reads the sets again, which now hold its takes. Without the compare,
// c took the address that a still answered for.
func TestFakeTakeGuardedAgainstALapsingOwner(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	eventually(t, func() bool {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		_, ok := f.s.failsafes["a"]
		return ok
	}, "a's failsafe set is not in the store")
	c, cEng := f.join("c")
	addr := netip.MustParseAddr("192.0.2.10")
	f.claim(a, addr)
	aLease, _, _ := a.Lease()
	f.s.mu.Lock()
	f.s.beforeAcquire = func(s *fakeStore) { s.revokeLocked(fleet.LeaseID(aLease)) }
	f.s.mu.Unlock()
	_, err := c.Claim(context.Background(), []announce.Request{{Addr: addr, Interface: "eth0"}}, announce.ClaimOptions{})
	if err == nil || !strings.Contains(err.Error(), "may still answer on failsafe") {
		t.Fatalf("c's claim as a's lease expired under it: %v, want a refusal saying a may still answer on failsafe", err)
	}
	if o := f.owner(addr); o != "" || cEng.holds(addr) {
		t.Errorf("%s holds %s in the store (c's engine: %v), while a may answer for it on failsafe", o, addr, cEng.holds(addr))
	}
}

// TestFakeFailsafeSetGrowsNotOnFailsafe has a answer on b's promise, its
// renewals unanswered while its other requests reach the store (one
// stream dropped), c having joined a moment before. a must not write c
// into its failsafe set while it answers on failsafe: c never promised,
// and being in the set it could take a's addresses once a's lease is
// gone. Left out, c is held by the set like any node that joined during
// an outage. Once the store acknowledges a again, the set names c.
func TestFakeFailsafeSetGrowsNotOnFailsafe(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.joinConfig("b", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.claim(a, netip.MustParseAddr("192.0.2.10"))
	f.advanceTo(fakeTiming.TTL)
	setOfA := func() []string {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		return f.s.failsafes["a"].v.Nodes
	}
	eventually(t, func() bool { return slices.Equal(setOfA(), []string{"b"}) }, "a's failsafe set naming b is not in the store")
	// c joins after a's read of its peers; a reads them again a TTL
	// after it (the fake store's watch tells nothing), inside the
	// lease of its last renewal acknowledged.
	f.advanceTo(fakeTiming.TTL + fakeTiming.Renew)
	if _, _, _, err := f.s.ledger("c").Register(context.Background(), time.Hour, store.Node{Node: "c"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	f.s.mu.Lock()
	f.s.renewCut["a"], f.s.renewCut["b"] = true, true
	f.s.mu.Unlock()
	f.advanceTo(fakeTiming.TTL + 3*fakeTiming.Renew)
	eventually(t, func() bool { return a.Info().Failsafe != nil }, "a did not answer on failsafe with b's promise")
	f.advanceTo(2*fakeTiming.TTL + fakeTiming.Renew/2)
	if got := setOfA(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("a's failsafe set is %v while it answers on failsafe, want [b]: c, never asked, could take once a's lease is gone", got)
	}
	// The store back: the set names c.
	f.s.mu.Lock()
	f.s.renewCut["a"], f.s.renewCut["b"] = false, false
	f.s.mu.Unlock()
	f.advanceTo(3 * fakeTiming.TTL)
	eventually(t, func() bool { return slices.Equal(setOfA(), []string{"b", "c"}) }, "a's failsafe set does not name c once the store is back")
}
