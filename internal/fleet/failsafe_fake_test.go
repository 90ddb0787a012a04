package fleet_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
		return slices.Equal(f.s.namedLocked("a"), []string{"b"})
	}, "a's failsafe set naming b is not in the store")
	f.s.setCut("a", true)
	f.s.setCut("b", true)
	f.advanceTo(fakeTiming.TTL + 2*fakeTiming.Renew)
	eventually(t, func() bool { return a.Info().Failsafe != nil }, "a did not answer on failsafe with b's promise")
	roundAt := f.now()
	f.s.setCut("b", false)
	// a's next round comes a renewal period after its last returned, on
	// a timer a loaded machine may arm after the test moved the clock on:
	// so the clock goes on half a period at a time, up to two, while the
	// fence's message below tells the refused round from promises that
	// ran out.
	fenced := func() bool { _, _, fencedAt := a.Lease(); return !fencedAt.IsZero() }
	if !f.advanceUntil(roundAt+fakeTiming.Renew, roundAt+2*fakeTiming.Renew, fakeTiming.Renew/2, fenced) {
		t.Fatal("a did not fence when b answered that it reaches the store")
	}
	if !eng.seesEvent(event.Fence, "the failsafe ended: b reaches-store") {
		t.Errorf("a's fence does not say the failsafe ended on b's answer: %q", eng.eventsOf(event.Fence))
	}
}

// TestFakeFailsafeSharedKeys: two nodes with the failsafe agree a key from
// the X25519 halves in their records, and a round between them goes with
// it; with a node whose record has none (an older vip), the owner asks
// signed, and the node, which knows the owner's, answers signed as asked.
func TestFakeFailsafeSharedKeys(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprintf("older b %v", older), func(t *testing.T) {
			f := newFakeFleet(t)
			a, _ := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
			bConf := failsafeConfig(t)
			answers := &versionConn{PacketConn: bConf.Conn, versions: map[byte]int{}}
			bConf.Conn = answers
			b, _ := f.joinConfig("b", func(c *fleet.Config) { c.Failsafe = bConf })
			f.claim(a, netip.MustParseAddr("192.0.2.10"))
			if older {
				f.s.mu.Lock()
				kv := f.s.nodes["b"]
				kv.v.FailsafeDH = ""
				f.s.nodes["b"] = kv
				f.s.mu.Unlock()
			}
			namesB := func() bool { return slices.Equal(f.named("a"), []string{"b"}) }
			if !f.advanceUntil(fakeTiming.Renew/2, 2*fakeTiming.TTL, fakeTiming.Renew/2, namesB) {
				t.Fatal("a's failsafe set naming b is not in the store")
			}
			a.ReadPeers(context.Background())
			b.ReadPeers(context.Background())
			ab, _ := a.KeyOf("b")
			ba, _ := b.KeyOf("a")
			if older {
				if ab.MAC != nil || ab.Sign == nil || ba.MAC == nil {
					t.Fatalf("a shares %x with b, whose record has no X25519 key (b shares %x with a); want none, and b's public key", ab.MAC, ba.MAC)
				}
			} else if ab.MAC == nil || !bytes.Equal(ab.MAC, ba.MAC) {
				t.Fatalf("a and b share %x and %x, want one key", ab.MAC, ba.MAC)
			}
			f.s.setCut("a", true)
			f.s.setCut("b", true)
			if !f.advanceUntil(f.now()+fakeTiming.Renew, f.now()+fakeTiming.TTL+3*fakeTiming.Renew, fakeTiming.Renew/2,
				func() bool { return a.Info().Failsafe != nil }) {
				t.Fatal("a did not answer on failsafe with b's promise")
			}
			// Under their key; signed too if an answer was slow enough
			// for a to ask again (a loaded machine). To a's signed
			// questions only, b's record having no X25519 key.
			got := answers.sent()
			if !older && got[failsafe.VersionMAC] == 0 {
				t.Errorf("b answered in versions %v, want under the key it shares with a", got)
			}
			if older && (got[failsafe.VersionMAC] != 0 || got[failsafe.VersionSigned] == 0) {
				t.Errorf("b answered in versions %v, want signed only", got)
			}
		})
	}
}

// versionConn counts the failsafe datagrams written through it, by
// version.
type versionConn struct {
	net.PacketConn
	mu       sync.Mutex
	versions map[byte]int
}

func (c *versionConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if len(b) > 4 {
		c.mu.Lock()
		c.versions[b[4]]++
		c.mu.Unlock()
	}
	return c.PacketConn.WriteTo(b, addr)
}

func (c *versionConn) sent() map[byte]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.versions)
}

// TestFakeTakeGuardedAgainstALapsingOwner has c, which joined after a
// wrote its failsafe set (so the set leaves c out), claim a's address
// just as a's lease expires: after c read the sets, which found a alive,
// and before c's transaction. a may answer for the address on failsafe,
// alone (its set names no node: it joined first), so c must not take it: the
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
	if err == nil || !strings.Contains(err.Error(), "may answer alone on failsafe") {
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
		return f.s.namedLocked("a")
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
	// a reads its peers, c among them, while it answers on failsafe (the
	// store answers its reads, not its renewals).
	nodeReads := func() int { return f.countOf(func(s *fakeStore) int { return s.nodeReads["a"] }) }
	before := nodeReads()
	if !f.advanceUntil(2*fakeTiming.TTL, 3*fakeTiming.TTL, fakeTiming.Renew/2, func() bool { return nodeReads() > before }) {
		t.Fatal("a did not read its peers again while it answered on failsafe")
	}
	if got := setOfA(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("a's failsafe set is %v while it answers on failsafe, want [b]: c, never asked, could take once a's lease is gone", got)
	}
	// Its rounds go on asking the set's nodes, b alone: c, outside it,
	// waits for it (failsafeBlocks). Before, a round compared the peers
	// read with the set and, finding c, ended the failsafe: a fenced.
	// The clock moves half a renewal period at a time, each step waiting
	// for a's round: a loaded machine may run it late.
	readAt := f.clock.Now()
	acked := func() bool {
		fs := a.Info().Failsafe
		return fs != nil && fs.AckedAt.After(readAt.Add(fakeTiming.Renew))
	}
	if !f.advanceUntil(f.now()+fakeTiming.Renew/2, f.now()+3*fakeTiming.Renew, fakeTiming.Renew/2, acked) {
		_, _, fencedAt := a.Lease()
		t.Fatalf("a fenced at %v, once it read c among its peers while it answered on failsafe: it should go on asking its set's nodes (failsafe %+v)", fencedAt, a.Info().Failsafe)
	}
	if fs := a.Info().Failsafe; !slices.Equal(fs.AckedBy, []string{"b"}) {
		t.Fatalf("a's failsafe is acknowledged by %v, want b alone", fs.AckedBy)
	}
	// The store back: the set names c.
	f.s.mu.Lock()
	f.s.renewCut["a"], f.s.renewCut["b"] = false, false
	f.s.mu.Unlock()
	// a reads its peers a TTL after its last read, on a timer it arms
	// once that read returned: on a loaded machine, after the test moved
	// the fake clock on. So the clock goes on a renewal period at a time,
	// up to a TTL more, until the set names c.
	namesC := func() bool { return slices.Equal(setOfA(), []string{"b", "c"}) }
	if !f.advanceUntil(3*fakeTiming.TTL, 4*fakeTiming.TTL, fakeTiming.Renew, namesC) {
		t.Fatalf("a's failsafe set is %v a TTL after the store came back, want [b c]", setOfA())
	}
}

// TestFakeFailsafeSetWriteUnsure has a write of a's failsafe set, naming c
// as well as b, take in the store but its answer fail. The store may then
// have either set: a round that asked b alone, the set a recorded, would
// leave out c, whom the store's names, and c, never asked, would take
// once a's lease was gone. So a's rounds ask the nodes of both: here c's
// agent does not answer, and a, cut off from the store with b, fences
// instead of answering on b's promise alone.
func TestFakeFailsafeSetWriteUnsure(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.joinConfig("b", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.claim(a, netip.MustParseAddr("192.0.2.10"))
	names := func(want ...string) func() bool {
		return func() bool { return slices.Equal(f.named("a"), want) }
	}
	if !f.advanceUntil(fakeTiming.Renew/2, 2*fakeTiming.TTL, fakeTiming.Renew/2, names("b")) {
		t.Fatal("a's failsafe set naming b is not in the store")
	}
	if _, _, _, err := f.s.ledger("c").Register(context.Background(), time.Hour, keyedRecord(t, "c"), nil, nil); err != nil {
		t.Fatal(err)
	}
	f.s.mu.Lock()
	f.s.setAnswerLost = map[string]int{"a": 1}
	f.s.mu.Unlock()
	// a reads its peers again a TTL on (the fake store's watch tells
	// nothing), and writes its set naming c, which takes unanswered.
	if !f.advanceUntil(f.now()+fakeTiming.Renew/2, f.now()+2*fakeTiming.TTL, fakeTiming.Renew/2, names("b", "c")) {
		t.Fatal("a did not write its failsafe set naming c")
	}
	if why := a.Info().FailsafeUnready; why != "" {
		t.Fatalf("a's failsafe is not ready after a write of its set whose answer was lost: %q", why)
	}
	f.s.mu.Lock()
	f.s.renewCut["a"], f.s.renewCut["b"] = true, true
	f.s.setAnswerLost["a"] = 100 // a's writes of its set go on taking unanswered
	f.s.mu.Unlock()
	fenced := func() bool { _, _, at := a.Lease(); return !at.IsZero() }
	if !f.advanceUntil(f.now()+fakeTiming.Renew/2, f.now()+2*fakeTiming.TTL, fakeTiming.Renew/2, fenced) {
		t.Fatalf("a answers on failsafe (%+v) on b's promise alone, while the store may have its set naming c, which never promised", a.Info().Failsafe)
	}
}

// setOf reads node's failsafe set from the fake store.
func (f *fakeFleet) setOf(node string) (store.FailsafeSet, bool) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	kv, ok := f.s.failsafes[node]
	return kv.v, ok
}

// named names the live nodes node's failsafe set in the fake store names
// (nil: it has none).
func (f *fakeFleet) named(node string) []string {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.s.namedLocked(node)
}

// namedLocked is named, with the store's lock held.
func (s *fakeStore) namedLocked(node string) []string {
	kv, ok := s.failsafes[node]
	if !ok {
		return nil
	}
	var nodes []store.Node
	for name, n := range s.nodes {
		nodes = append(nodes, store.Node{Node: name, CreateRev: n.create})
	}
	return kv.v.Named(nodes)
}

// TestFakeFailsafeAloneRidesAnOutage has a, the only node of its fleet,
// hold an address when the store goes away. No other node could take the
// address, and one that joins finds a's set, which names nobody, and
// waits: a answers on past its lease's deadline, alone, for 30 s (6 s
// TTL), saying so in its status, then fences, saying why. Without it, a
// fenced 4.5 s after its last renewal: a fleet of one went dark on every
// etcd leader election longer than its margin.
func TestFakeFailsafeAloneRidesAnOutage(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.10")
	f := newFakeFleet(t)
	a, eng := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.claim(a, addr)
	eventually(t, func() bool {
		s, ok := f.setOf("a")
		return ok && s.Alone() && s.AloneMS == (36*time.Second).Milliseconds()
	}, "a's failsafe set, naming nobody and saying it answers alone for 36 s past its lease, is not in the store")
	f.s.setCut("a", true)
	f.advanceTo(2 * fakeTTL)
	if _, _, fencedAt := a.Lease(); !fencedAt.IsZero() || !eng.holds(addr) {
		t.Fatalf("a, alone, fenced (at %v) 12 s into a store outage", fencedAt)
	}
	fs := a.Info().Failsafe
	if fs == nil || len(fs.AckedBy) != 0 || !fs.AloneUntil.Equal(f.epoch.Add(fakeTiming.FenceAfter()+30*time.Second)) {
		t.Fatalf("a's status says %+v, want it answering on failsafe alone until %v", fs, f.epoch.Add(fakeTiming.FenceAfter()+30*time.Second))
	}
	if !eng.seesEvent(event.Failsafe, "answering on failsafe alone") {
		t.Errorf("no event says a answers on failsafe alone: %q", eng.eventsOf(event.Failsafe))
	}
	f.advanceTo(fakeTiming.FenceAfter() + 30*time.Second - fakeTiming.Renew/2)
	if _, _, fencedAt := a.Lease(); !fencedAt.IsZero() {
		t.Fatalf("a fenced at %v, before its 30 s alone on failsafe ended", fencedAt)
	}
	f.advanceTo(fakeTiming.FenceAfter() + 30*time.Second + fakeTiming.Renew/2)
	eventually(t, func() bool { _, _, fencedAt := a.Lease(); return !fencedAt.IsZero() }, "a did not fence once its 30 s alone on failsafe ended")
	if !eng.seesEvent(event.Fence, "answered alone on failsafe") {
		t.Errorf("a's fence does not say it answered alone for as long as it may: %q", eng.eventsOf(event.Fence))
	}
}

// TestFakeNewcomerWaitsForAnOwnerAlone has a, alone in its fleet, vanish
// (kill -9, its host cut off) while it holds an address: it may answer on
// failsafe alone for 30 s past its lease's deadline. c, which joined since
// (a's set does not name it), finds a's lease gone and claims the address:
// refused, saying why, for the 36 s the set says (the 30 s, and a TTL for
// a lease ended early), then taken, and the set cleared. Without the wait,
// c answered beside a; with a set that names nobody holding c for good, as
// before, c never took it.
func TestFakeNewcomerWaitsForAnOwnerAlone(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.10")
	f := newFakeFleet(t)
	a, _ := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.claim(a, addr)
	eventually(t, func() bool { s, ok := f.setOf("a"); return ok && s.Alone() }, "a's failsafe set, naming nobody, is not in the store")
	c, cEng := f.join("c")
	f.crash("a")
	f.advanceTo(fakeTTL + fakeTiming.Renew)
	if o := f.owner(addr); o != "" {
		t.Fatalf("%s holds %s a TTL after a vanished", o, addr)
	}
	claim := func() error {
		_, err := c.Claim(context.Background(), []announce.Request{{Addr: addr, Interface: "eth0"}}, announce.ClaimOptions{})
		return err
	}
	seen := f.now()
	if err := claim(); err == nil || !strings.Contains(err.Error(), "may answer alone on failsafe") {
		t.Fatalf("c's claim of a vanished owner alone's address: %v, want a refusal saying a may answer alone on failsafe", err)
	}
	f.advanceTo(seen + 36*time.Second - fakeTiming.Renew)
	if err := claim(); err == nil {
		t.Fatalf("c took %s %v after it found a's lease gone: a may answer alone for 36 s", addr, 36*time.Second-fakeTiming.Renew)
	}
	f.advanceTo(seen + 36*time.Second)
	if err := claim(); err != nil {
		t.Fatalf("c's claim once a's time alone on failsafe passed: %v", err)
	}
	if o := f.owner(addr); o != "c" || !cEng.holds(addr) {
		t.Errorf("%s holds %s in the store (c's engine: %v), want c", o, addr, cEng.holds(addr))
	}
	if _, ok := f.setOf("a"); ok {
		t.Errorf("a's set is still in the store once its time alone passed")
	}
}

// TestFakeLeaveDropsTheSet has a, alone, stop to be started again
// (Leave: its lease kept, its answers closed): its set goes, as a node
// that joins after would otherwise wait half a minute on it for nothing.
// b stops the same way while it answers on failsafe alone: the addresses
// it added keep the lifetimes the failsafe gave them, so its set stays.
func TestFakeLeaveDropsTheSet(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	eventually(t, func() bool { _, ok := f.setOf("a"); return ok }, "a's failsafe set is not in the store")
	a.Leave()
	delete(f.running, "a")
	if s, ok := f.setOf("a"); ok {
		t.Fatalf("a's set %+v is still in the store after a left", s)
	}

	g := newFakeFleet(t)
	b, _ := g.joinConfig("b", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	g.claim(b, netip.MustParseAddr("192.0.2.11"))
	eventually(t, func() bool { _, ok := g.setOf("b"); return ok }, "b's failsafe set is not in the store")
	g.s.setCut("b", true)
	g.advanceTo(2 * fakeTTL)
	if fs := b.Info().Failsafe; fs == nil || fs.AloneUntil.IsZero() {
		t.Fatalf("b does not answer on failsafe alone: %+v", fs)
	}
	g.s.setCut("b", false)
	b.Leave()
	delete(g.running, "b")
	if _, ok := g.setOf("b"); !ok {
		t.Fatal("b's set went when it left while answering on failsafe alone")
	}
}

// TestFakeFailsafeAloneThroughASlowStore has a, alone, answer on failsafe
// alone while the store acknowledges every renewal 3 s after it was sent
// (later than an owner starts asking, 2 s at a 6 s TTL). Each late answer
// must neither end the failsafe nor move the deadline back to 4.5 s past
// its renewal: a stays on failsafe, says so once, and keeps a deadline
// 30 s past the latest renewal acknowledged. Ended at each answer, it
// began again at the next round, with an event and a record each time,
// and the deadline (with the lifetimes of the addresses it added) went
// back and forth.
func TestFakeFailsafeAloneThroughASlowStore(t *testing.T) {
	f := newFakeFleet(t)
	a, eng := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.claim(a, netip.MustParseAddr("192.0.2.10"))
	eventually(t, func() bool { s, ok := f.setOf("a"); return ok && s.Alone() }, "a's failsafe set, naming nobody, is not in the store")
	f.s.setRenewRTT(3 * time.Second)
	f.advanceTo(4 * fakeTTL)
	if _, _, fencedAt := a.Lease(); !fencedAt.IsZero() {
		t.Fatalf("a fenced at %v with the store slow", fencedAt)
	}
	if fs := a.Info().Failsafe; fs == nil || fs.AloneUntil.IsZero() {
		t.Fatalf("a's status says %+v with the store slow, want it on failsafe alone", fs)
	}
	if evs := eng.eventsOf(event.Failsafe); len(evs) != 1 {
		t.Errorf("a's failsafe events with the store slow: %q, want the one that it answers alone", evs)
	}
	_, renewed, _ := a.Lease()
	want := bootAtEpoch + renewed.Sub(f.epoch) + fakeTiming.FenceAfter() + 30*time.Second
	if at, _ := eng.deadline.At(); at != want {
		t.Errorf("a's answer deadline is %v, want %v: 30 s past the one its latest renewal acknowledged gave", at, want)
	}
}

// TestFakeFailsafeUnreadySaysWhy: an owner's status says when a store
// outage now would find no failsafe, and why: here c, which runs without
// it and cannot promise. Alone, before it read its peers, it would answer
// on failsafe alone: nothing to say.
func TestFakeFailsafeUnreadySaysWhy(t *testing.T) {
	f := newFakeFleet(t)
	a, _ := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	if why := a.Info().FailsafeUnready; why != "" {
		t.Fatalf("a, alone, says its failsafe is not ready: %q", why)
	}
	f.join("c")
	// a reads its peers again a TTL on (the fake store's watch tells
	// nothing).
	f.advanceTo(fakeTiming.TTL)
	eventually(t, func() bool {
		return strings.Contains(a.Info().FailsafeUnready, "c cannot promise (run without --failsafe")
	},
		"a's status does not say that c, without the failsafe, leaves it none")
}

// TestFakeSetsReadWhenAnOwnerWent has a and b, each with the failsafe, at
// rest for five TTLs: a reads its peers every TTL (the fake store's watch
// tells nothing), but not the failsafe sets, which only a lapsed owner's
// can make its to clear. Then b's lease runs out: a's next read of its
// peers, finding b gone, reads the sets. Before, every read of the peers
// read every set too: at a thousand nodes, each set naming every other,
// megabytes a node a TTL.
func TestFakeSetsReadWhenAnOwnerWent(t *testing.T) {
	f := pairAtRest(t)
	setReads := func() int { return f.countOf(func(s *fakeStore) int { return s.setReads["a"] }) }
	before := setReads()
	f.restsFor(t, 5, setReads, "the failsafe sets")
	f.s.setCut("b", true)
	f.advanceTo(f.now() + fakeTiming.TTL)
	if !f.advanceUntil(f.now()+fakeTiming.Renew/2, f.now()+3*fakeTiming.TTL, fakeTiming.Renew/2, func() bool { return setReads() > before }) {
		t.Fatal("a did not read the failsafe sets once b's lease ran out")
	}
}

// TestFakePeersCountedAtRest has a and b, each with the failsafe, at rest:
// a counts the nodes' records a TTL apart instead of reading them all
// (the fake store's watch tells nothing, as a broken one would), and reads
// them when the count changes (c joins), or peersReadEvery TTLs on at the
// latest. Before, it read every record every TTL: at a thousand nodes,
// hundreds of kilobytes a node a TTL.
func TestFakePeersCountedAtRest(t *testing.T) {
	f := pairAtRest(t)
	nodeReads := func() int { return f.countOf(func(s *fakeStore) int { return s.nodeReads["a"] }) }
	f.restsFor(t, 4, nodeReads, "the nodes' records")
	if _, _, _, err := f.s.ledger("c").Register(context.Background(), time.Hour, keyedRecord(t, "c"), nil, nil); err != nil {
		t.Fatal(err)
	}
	namesBC := func() bool { return slices.Equal(f.named("a"), []string{"b", "c"}) }
	if !f.advanceUntil(f.now()+fakeTiming.Renew/2, f.now()+2*fakeTiming.TTL, fakeTiming.Renew/2, namesBC) {
		t.Fatal("a did not read c's record a TTL after it joined")
	}
	// Nothing changes since: a reads them again within peersReadEvery
	// TTLs all the same.
	before := nodeReads()
	if !f.advanceUntil(f.now()+fakeTiming.TTL, f.now()+11*fakeTiming.TTL, fakeTiming.TTL, func() bool { return nodeReads() > before }) {
		t.Fatal("a did not read the nodes' records within ten TTLs at rest")
	}
}

// pairAtRest joins a and b, each with the failsafe, has a claim an
// address, and returns once a's set names b and a TTL more has passed.
func pairAtRest(t *testing.T) *fakeFleet {
	f := newFakeFleet(t)
	a, _ := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.joinConfig("b", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	f.claim(a, netip.MustParseAddr("192.0.2.10"))
	namesB := func() bool { return slices.Equal(f.named("a"), []string{"b"}) }
	if !f.advanceUntil(fakeTiming.Renew/2, 2*fakeTiming.TTL, fakeTiming.Renew/2, namesB) {
		t.Fatal("a's failsafe set naming b is not in the store")
	}
	f.advanceTo(f.now() + fakeTiming.TTL)
	return f
}

// countOf reads one of the fake store's counters, under its lock.
func (f *fakeFleet) countOf(read func(*fakeStore) int) int {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return read(f.s)
}

// restsFor moves the clock on ttls TTLs, and fails if count moved
// meanwhile: a read of what at rest.
func (f *fakeFleet) restsFor(t *testing.T, ttls int, count func() int, what string) {
	t.Helper()
	before := count()
	f.advanceTo(f.now() + time.Duration(ttls)*fakeTiming.TTL)
	if got := count(); got != before {
		t.Fatalf("a read %s %d times in %d TTLs at rest, want none", what, got-before, ttls)
	}
}

// keyedRecord is a record of node that runs the failsafe, with a key and
// an address to ask it at, and no agent answering there.
func keyedRecord(t *testing.T, node string) store.Node {
	cfg := failsafeConfig(t)
	return store.Node{Node: node, FailsafeKey: failsafe.PublicKey(cfg.Key), Failsafe: cfg.Advertise.String()}
}

// TestFakeSetNamesByRevision: an owner's set names its nodes by the
// revision it read them at, not by name: a few bytes however large the
// fleet, where a set of names, rewritten by every owner as each node
// joined, was O(N) bytes written N times by N owners. A node whose record
// is made again (its lease lost, it joined again) is named only once the
// owner rewrites its set past that record, never before: a set that
// named it by its name would have it named while the owner never read
// the new record.
func TestFakeSetNamesByRevision(t *testing.T) {
	f := pairAtRest(t)
	set, ok := f.setOf("a")
	if !ok || set.Format != store.FailsafeFormat || set.Nodes != nil || set.Rev == 0 {
		t.Fatalf("a's set: %+v; want format %d, a revision, and no names", set, store.FailsafeFormat)
	}
	f.s.mu.Lock()
	bRev := f.s.nodes["b"].create
	f.s.mu.Unlock()
	if set.Rev < bRev {
		t.Fatalf("a's set is at revision %d, before b's record (%d)", set.Rev, bRev)
	}
	// b's record made again, a's set not yet rewritten: b is not named.
	f.s.mu.Lock()
	lease := f.s.nodes["b"].lease
	f.s.revokeLocked(lease)
	f.s.mu.Unlock()
	if got := f.named("a"); len(got) != 0 {
		t.Fatalf("a's set names %v with b's record gone", got)
	}
	if _, _, _, err := f.s.ledger("b2").Register(context.Background(), time.Hour, keyedRecord(t, "b"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := f.named("a"); len(got) != 0 {
		t.Fatalf("a's set names %v before a read b's new record", got)
	}
	// c joins: a's count a TTL apart differs, and it reads the records
	// (the fake store's watch tells nothing).
	if _, _, _, err := f.s.ledger("c").Register(context.Background(), time.Hour, keyedRecord(t, "c"), nil, nil); err != nil {
		t.Fatal(err)
	}
	namesBC := func() bool { return slices.Equal(f.named("a"), []string{"b", "c"}) }
	if !f.advanceUntil(f.now()+fakeTiming.Renew/2, f.now()+3*fakeTiming.TTL, fakeTiming.Renew/2, namesBC) {
		t.Fatalf("a did not rewrite its set to name b's new record and c: it names %v", f.named("a"))
	}
}

// TestFakeRejoinedNodeClearsALapsedSet: b, of a's set, loses its lease and
// joins again (a new record, made after a's set's revision), and a's lease
// goes. a's set does not name b's new record, but b had one at its
// revision, which a read and would ask: b, whose promises bind it
// whichever of its agents made them, clears a's set as any node of it
// would, and takes again. Without that, a set whose nodes all joined again
// (a store that froze and lost every lease as its owner died) held every
// take until an operator cleared it.
func TestFakeRejoinedNodeClearsALapsedSet(t *testing.T) { rejoinedClears(t, false) }

// TestFakeRejoinedNodeClearsACompactedSet: as above, with the store
// compacted past the set's revision by the time b joins again, so that a
// read of b's record then fails. The watch told b of its record's
// deletion, which stood until the revision before, later than the set's:
// b was named, and clears the set. Before, it could not tell, and the set
// held every take until an operator cleared it.
func TestFakeRejoinedNodeClearsACompactedSet(t *testing.T) { rejoinedClears(t, true) }

// rejoinedClears: b, named by a's set, loses its lease as a is cut off,
// joins again, and clears a's set once a's lease is gone; with compact,
// the store compacted past the set's revision before b joins again.
func rejoinedClears(t *testing.T, compact bool) {
	f := pairAtRest(t)
	b := f.running["b"]
	set, _ := f.setOf("a")
	f.s.setCut("a", true)
	f.s.mu.Lock()
	f.s.revokeLocked(f.s.nodes["b"].lease)
	lives := f.s.lives["b"]
	deleted := lives[len(lives)-1][1] + 1
	f.s.mu.Unlock()
	if compact {
		// The watch tells b of its record's deletion (the fake's
		// watch tells nothing: as etcd's would), naming it only; b
		// reads which record it was. Then the store compacts.
		gone := []store.Node{{Node: "b"}}
		b.OwnGone(gone, deleted)
		if gone[0].CreateRev == 0 || gone[0].CreateRev > set.Rev {
			t.Fatalf("b's record deleted at %d was created at %d, want one at or before a's set's revision %d", deleted, gone[0].CreateRev, set.Rev)
		}
		b.ApplyPeers(nil, gone, deleted)
		f.s.mu.Lock()
		f.s.compacted = f.s.rev + 1
		f.s.mu.Unlock()
	}
	rejoined := func() bool {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		kv, ok := f.s.nodes["b"]
		return ok && kv.create > set.Rev
	}
	if !f.advanceUntil(f.now()+fakeTiming.Renew/2, f.now()+2*fakeTiming.TTL, fakeTiming.Renew/2, rejoined) {
		t.Fatal("b did not join again")
	}
	if _, err := f.s.ledger("b").NodeAt(context.Background(), "b", set.Rev); compact && err == nil {
		t.Fatal("the fake store answered a read at a compacted revision")
	}
	cleared := func() bool { _, ok := f.setOf("a"); return !ok }
	if !f.advanceUntil(f.now()+fakeTiming.Renew/2, f.now()+4*fakeTiming.TTL, fakeTiming.Renew/2, cleared) {
		t.Fatalf("b, in a's set under its earlier record, did not clear it once a's lease went (compacted: %v): %+v", compact, set)
	}
	f.claim(b, netip.MustParseAddr("192.0.2.11"))
}

// TestFakeOwnLivesFromTheWatch: what the store says of this node's own
// records is what its lives hold. The watch hands over one revision's
// changes a call: a record deleted at r stood at r-1 (the deletion names
// the record's creation), one made again at r' stands from r'. A read says
// its record stood at the read's revision. Nothing is inferred from the
// view: after the watch lost changes and a read older than the view was
// installed, a later change of another node extends no life over the
// revisions where the record was gone.
func TestFakeOwnLivesFromTheWatch(t *testing.T) {
	a := aloneAfterARead(t)
	recs, rev, _ := a.PeersView()
	created := recs["a"]
	if !a.LivedAt(created) || !a.LivedAt(rev) || a.LivedAt(created-1) || a.LivedAt(rev+1) {
		t.Fatalf("a's record, created at %d and read at %d: lives wrong", created, rev)
	}
	// A deletion whose record's creation the store no longer said
	// proves nothing.
	a.ApplyPeers(nil, []store.Node{{Node: "a"}}, rev+3)
	if a.LivedAt(rev + 2) {
		t.Fatal("a deletion that named no creation made a life")
	}
	if !a.ApplyPeers(nil, []store.Node{{Node: "a", CreateRev: created}}, rev+10) {
		t.Fatal("a did not apply its record's deletion")
	}
	again := keyedRecord(t, "a")
	again.CreateRev = rev + 12
	if !a.ApplyPeers([]store.Node{again}, nil, rev+12) {
		t.Fatal("a did not apply its record made again")
	}
	for r, want := range map[int64]bool{rev + 9: true, rev + 10: false, rev + 11: false, rev + 12: true} {
		if got := a.LivedAt(r); got != want {
			t.Errorf("LivedAt(%d) = %v, want %v (deleted at %d, made again at %d)", r, got, want, rev+10, rev+12)
		}
	}
	// The watch loses changes; a read older than the view is installed
	// (the store's revision is still rev); the watch, resumed, tells of
	// another node at rev+20. a's record made again at rev+12 has been
	// seen at rev+12 only: nothing says it stood at rev+15.
	a.ApplyPeers(nil, nil, 0)
	if r := a.ReadPeers(context.Background()); r >= rev+10 {
		t.Fatalf("the fake store read at %d, want one older than the view's", r)
	}
	x := keyedRecord(t, "x")
	x.CreateRev = rev + 20
	a.ApplyPeers([]store.Node{x}, nil, rev+20)
	if a.LivedAt(rev+15) || a.LivedAt(rev+11) {
		t.Error("a life was made of the view, past what the store said")
	}
	if !a.LivedAt(created) || !a.LivedAt(rev+9) {
		t.Error("the lives the store said were lost")
	}
}

// TestFakeWatchGoesOnFromTheRead: a watch of the nodes' records that lost
// changes (compacted past them) returns where etcd compacted to; the next
// watch goes on from the read of every record that follows, not from
// there: a read older than that point (begun before the loss), watched on
// from the compaction, would leave out the changes between.
func TestFakeWatchGoesOnFromTheRead(t *testing.T) {
	f := newFakeFleet(t)
	f.s.mu.Lock()
	f.s.loseNodes = make(chan int64, 1)
	f.s.mu.Unlock()
	a, _ := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	watchesOf := func() []int64 {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		var revs []int64
		for _, w := range f.s.nodeWatches {
			if w[0] == "a" {
				revs = append(revs, w[1].(int64))
			}
		}
		return revs
	}
	if !f.advanceUntil(0, 2*fakeTiming.TTL, fakeTiming.Renew/2, func() bool { return len(watchesOf()) == 1 }) {
		t.Fatal("a did not watch the nodes' records")
	}
	_, first, _ := a.PeersView()
	f.s.loseNodes <- first + 50 // compacted to a revision past any read
	if !f.advanceUntil(f.now()+fakeTiming.Renew/2, f.now()+4*fakeTiming.TTL, fakeTiming.Renew/2, func() bool { return len(watchesOf()) >= 2 }) {
		t.Fatalf("a did not watch again after its watch lost changes (watches from %v)", watchesOf())
	}
	_, read, stale := a.PeersView()
	if got := watchesOf()[1]; stale || got != read || got >= first+50 {
		t.Errorf("a watched again from %d (view at %d, stale %v), want from the read that followed the loss, not from %d", got, read, stale, first+50)
	}
}

// aloneAfterARead is a, alone in a fake fleet with the failsafe, once it has
// read its peers.
func aloneAfterARead(t *testing.T) *fleet.Member {
	t.Helper()
	f := newFakeFleet(t)
	a, _ := f.joinConfig("a", func(c *fleet.Config) { c.Failsafe = failsafeConfig(t) })
	read := func() bool { _, rev, _ := a.PeersView(); return rev > 0 }
	if !f.advanceUntil(0, 2*fakeTiming.TTL, fakeTiming.Renew/2, read) {
		t.Fatal("a did not read its peers")
	}
	return a
}

// TestFakePeersViewNeverGoesBack: a read of every record that the watch
// overtook while it was under way (a node joined after the read's
// revision, and the watch told of it) leaves the newer view as it is:
// installed, it dropped the node, and the next set, at a later revision,
// named it unasked. A watch compacted past changes it had not told stops
// the view (nothing from the watch, no set written) until a read of every
// record.
func TestFakePeersViewNeverGoesBack(t *testing.T) {
	a := aloneAfterARead(t)
	_, rev, _ := a.PeersView()
	x := keyedRecord(t, "x")
	x.CreateRev = rev + 5
	if !a.ApplyPeers([]store.Node{x}, nil, rev+5) {
		t.Fatal("a did not apply the watch's change")
	}
	a.ReadPeers(context.Background()) // the store is at an older revision
	if recs, got, _ := a.PeersView(); recs["x"] != rev+5 || got != rev+5 {
		t.Fatalf("after a read older than the watch: %v at %d; want x, at %d", recs, got, rev+5)
	}
	a.ApplyPeers(nil, nil, 0)
	y := keyedRecord(t, "y")
	y.CreateRev = rev + 7
	if a.ApplyPeers([]store.Node{y}, nil, rev+7) {
		t.Fatal("a applied a change after its watch lost some")
	}
	if _, _, stale := a.PeersView(); !stale {
		t.Fatal("a's view is not stale after its watch lost changes")
	}
	if from, ok := a.WatchFrom(rev + 9); ok {
		t.Fatalf("the watch would go on from %d over a stale view, want it to wait for a read", from)
	}
	readAt := a.ReadPeers(context.Background())
	recs, got, stale := a.PeersView()
	if readAt == 0 || stale || recs["x"] != 0 || recs["y"] != 0 || recs["a"] == 0 {
		t.Fatalf("after the read that follows the loss: %v, stale %v; want the store's records, a alone", recs, stale)
	}
	// The watch goes on from the read installed, older than where the
	// last watch got to: from anywhere later, the changes between would
	// be lost to the view.
	if from, ok := a.WatchFrom(0); !ok || from != got {
		t.Fatalf("the watch goes on from %d (%v), want the read's revision %d", from, ok, got)
	}
}
