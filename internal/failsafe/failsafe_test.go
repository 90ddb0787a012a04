package failsafe

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// memNet is an in-memory datagram network: no socket of the host's.
type memNet struct {
	mu    sync.Mutex
	conns map[netip.AddrPort]*memConn
	next  uint16
	// tap, when set, sees every datagram sent (a copy).
	tap func(from, to netip.AddrPort, b []byte)
}

func newMemNet() *memNet { return &memNet{conns: map[netip.AddrPort]*memConn{}, next: 40000} }

func (n *memNet) listen(addr netip.AddrPort) *memConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr.Port() == 0 {
		n.next++
		addr = netip.AddrPortFrom(addr.Addr(), n.next)
	}
	c := &memConn{net: n, addr: addr, in: make(chan datagram, 64), done: make(chan struct{}), moved: make(chan struct{})}
	n.conns[addr] = c
	return c
}

func (n *memNet) send(from, to netip.AddrPort, b []byte) {
	n.mu.Lock()
	c, tap := n.conns[to], n.tap
	n.mu.Unlock()
	if tap != nil {
		tap(from, to, append([]byte(nil), b...))
	}
	if c == nil {
		return
	}
	select {
	case c.in <- datagram{from: from, b: append([]byte(nil), b...)}:
	default:
	}
}

type datagram struct {
	from netip.AddrPort
	b    []byte
}

type memConn struct {
	net      *memNet
	addr     netip.AddrPort
	in       chan datagram
	done     chan struct{}
	once     sync.Once
	mu       sync.Mutex
	deadline time.Time
	// moved is closed when the deadline moves: a read waiting wakes, as
	// on a socket.
	moved chan struct{}
}

func (c *memConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		c.mu.Lock()
		d, moved := c.deadline, c.moved
		c.mu.Unlock()
		var timeout <-chan time.Time
		var timer *time.Timer
		if !d.IsZero() {
			timer = time.NewTimer(time.Until(d))
			timeout = timer.C
		}
		select {
		case dg := <-c.in:
			return copy(b, dg.b), net.UDPAddrFromAddrPort(dg.from), nil
		case <-c.done:
			return 0, nil, net.ErrClosed
		case <-timeout:
			return 0, nil, os.ErrDeadlineExceeded
		case <-moved:
			if timer != nil {
				timer.Stop()
			}
		}
	}
}

func (c *memConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	c.net.send(c.addr, addr.(*net.UDPAddr).AddrPort(), b)
	return len(b), nil
}

func (c *memConn) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.net.mu.Lock()
		delete(c.net.conns, c.addr)
		c.net.mu.Unlock()
	})
	return nil
}
func (c *memConn) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(c.addr) }
func (c *memConn) SetDeadline(t time.Time) error {
	return c.SetReadDeadline(t)
}
func (c *memConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	close(c.moved)
	c.moved = make(chan struct{})
	c.mu.Unlock()
	return nil
}
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// rig is an owner a and a node b on a memNet: b's server decides with
// decide, a asks through it. With mac, the two share a key (version 2);
// without, they sign (version 1).
type rig struct {
	net    *memNet
	keys   map[string]PeerKey
	aKey   ed25519.PrivateKey
	bKey   ed25519.PrivateKey
	asker  *Asker
	server *Server
	bAddr  netip.AddrPort
	asked  chan Message
}

func newRig(t *testing.T, decide Decide) *rig { return newRigOf(t, decide, false) }

func newRigOf(t *testing.T, decide Decide, mac bool) *rig {
	t.Helper()
	r := &rig{net: newMemNet(), aKey: newKey(t), bKey: newKey(t), asked: make(chan Message, 16)}
	r.keys = map[string]PeerKey{"a": {Sign: r.aKey.Public().(ed25519.PublicKey)}, "b": {Sign: r.bKey.Public().(ed25519.PublicKey)}}
	if mac {
		// The pair's key, the same from either side: a node's keyOf
		// of the other gives it.
		shared := sharedKey(t, "a", r.aKey, "b", r.bKey)
		for _, n := range []string{"a", "b"} {
			k := r.keys[n]
			k.MAC = shared
			r.keys[n] = k
		}
	}
	keyOf := func(n string) (PeerKey, bool) { k, ok := r.keys[n]; return k, ok }
	r.bAddr = netip.MustParseAddrPort("192.0.2.2:7370")
	r.server = NewServer(ServerConfig{Conn: r.net.listen(r.bAddr), Node: "b", Key: r.bKey, KeyOf: keyOf,
		Decide: func(q Message) (Verdict, time.Duration, string) {
			r.asked <- q
			return decide(q)
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.server.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	r.asker = NewAsker("a", r.aKey, keyOf)
	r.asker.listen = func() (net.PacketConn, error) {
		return r.net.listen(netip.MustParseAddrPort("192.0.2.1:0")), nil
	}
	return r
}

// tapVersions returns what gives the versions of the datagrams sent on
// r's network since, in order.
func (r *rig) tapVersions() func() []byte {
	var mu sync.Mutex
	var versions []byte
	r.net.tap = func(_, _ netip.AddrPort, b []byte) {
		mu.Lock()
		versions = append(versions, b[len(magic)])
		mu.Unlock()
	}
	return func() []byte {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(versions)
	}
}

// impostor takes b's place: b's server stops, and whatever listens at b's
// address now answers each datagram with answer's (nil: none).
func (r *rig) impostor(t *testing.T, answer func(dg []byte) []byte) {
	r.server.conn.Close()
	conn := r.net.listen(r.bAddr)
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, MaxDatagram)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			if a := answer(buf[:n]); a != nil {
				conn.WriteTo(a, from)
			}
		}
	}()
}

// sharedKey is the key a's keyring agrees with b's public half, checked
// to be the one b's agrees with a's.
func sharedKey(t testing.TB, a string, aKey ed25519.PrivateKey, b string, bKey ed25519.PrivateKey) []byte {
	t.Helper()
	ra, err := NewKeyring(a, aKey)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := NewKeyring(b, bKey)
	if err != nil {
		t.Fatal(err)
	}
	ab, err := ra.Shared(b, rb.Public())
	if err != nil {
		t.Fatal(err)
	}
	ba, err := rb.Shared(a, ra.Public())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ab, ba) {
		t.Fatalf("%s and %s agreed different keys", a, b)
	}
	return ab
}

func accept(d time.Duration) Decide {
	return func(Message) (Verdict, time.Duration, string) { return Accepted, d, "" }
}

func TestAskAndAnswer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		decide      Decide
		want        Verdict
		wantPromise time.Duration
	}{
		{"accepted, the promise capped at what was asked", accept(5 * time.Second), Accepted, 3 * time.Second},
		{"accepted, less than asked", accept(time.Second), Accepted, time.Second},
		{"reaches the store", func(Message) (Verdict, time.Duration, string) { return ReachesStore, time.Hour, "renewed 100ms ago" }, ReachesStore, 0},
	} {
		for _, mac := range []bool{false, true} {
			version := map[bool]int{false: VersionSigned, true: VersionMAC}[mac]
			t.Run(fmt.Sprintf("%s, version %d", tc.name, version), func(t *testing.T) {
				r := newRigOf(t, tc.decide, mac)
				versions := r.tapVersions()
				got := r.asker.Ask(context.Background(), []Target{{"b", r.bAddr}}, 7, 3*time.Second, 2*time.Second)
				if len(got) != 1 || got[0].Err != nil {
					t.Fatalf("replies %+v, want one answer", got)
				}
				if got[0].Verdict != tc.want || got[0].Promise != tc.wantPromise {
					t.Errorf("got %s for %v, want %s for %v", got[0].Verdict, got[0].Promise, tc.want, tc.wantPromise)
				}
				q := <-r.asked
				if q.From != "a" || q.To != "b" || q.Lease != 7 || q.Promise() != 3*time.Second || q.Version != version {
					t.Errorf("b was asked %+v, want version %d", q, version)
				}
				if got := versions(); string(got) != string([]byte{byte(version), byte(version)}) {
					t.Errorf("datagrams of versions %v, want a question and its answer of %d", got, version)
				}
			})
		}
	}
}

// TestNoAnswerInTime: a node that does not answer, or is not there, counts
// as no answer once the timeout passed, and a round waits no longer.
func TestNoAnswerInTime(t *testing.T) {
	r := newRig(t, accept(time.Second))
	start := time.Now()
	got := r.asker.Ask(context.Background(), []Target{{"b", r.bAddr}, {"c", netip.MustParseAddrPort("192.0.2.3:7370")}}, 7, time.Second, 200*time.Millisecond)
	if got[0].Err != nil || got[0].Verdict != Accepted {
		t.Errorf("b: %+v, want accepted", got[0])
	}
	if !errors.Is(got[1].Err, ErrNoAnswer) {
		t.Errorf("c (absent): %+v, want no answer", got[1])
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("the round took %v, want its 200ms timeout", took)
	}
}

// TestForgedAnswerIsNoAnswer: an answer signed by any key but the one b
// registered (someone who read b's record, which holds only the public
// half) counts as no answer.
func TestForgedAnswerIsNoAnswer(t *testing.T) {
	r := newRig(t, accept(time.Second))
	r.server.key = newKey(t) // b's server now signs with a key the fleet does not know
	got := r.asker.Ask(context.Background(), []Target{{"b", r.bAddr}}, 7, time.Second, 300*time.Millisecond)
	if !errors.Is(got[0].Err, ErrNoAnswer) {
		t.Errorf("a forged answer gave %+v, want no answer", got[0])
	}
}

// TestForgedMACIsNoAnswer: with shared keys, someone at b's address who
// answers each question, echoing its nonce, with a MAC under any key but
// the one a and b share gets no answer counted: an impostor who read the
// store (both public halves) and agrees a key from its own X25519 key, or
// a third node c, which shares a key with a. Answered under the pair's
// key, the same answers count: the check is what refuses the others.
func TestForgedMACIsNoAnswer(t *testing.T) {
	for name, c := range map[string]struct {
		key  func(r *rig) []byte
		want error
	}{
		"an impostor's key": {func(r *rig) []byte { return sharedKey(t, "a", r.aKey, "b", newKey(t)) }, ErrNoAnswer},
		"c's key with a":    {func(r *rig) []byte { return sharedKey(t, "a", r.aKey, "c", newKey(t)) }, ErrNoAnswer},
		"the pair's key":    {func(r *rig) []byte { return r.keys["b"].MAC }, nil},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRigOf(t, accept(time.Second), true)
			key := c.key(r)
			r.impostor(t, func(dg []byte) []byte {
				var q Message
				if len(dg) < headerLen+macSize || json.Unmarshal(dg[headerLen:len(dg)-macSize], &q) != nil {
					return nil
				}
				a, _ := SealMAC(key, Message{Kind: KindAnswer, From: "b", To: "a", Nonce: q.Nonce, Verdict: Accepted, PromiseMS: 1000})
				return a
			})
			got := r.asker.Ask(context.Background(), []Target{{"b", r.bAddr}}, 7, time.Second, 300*time.Millisecond)
			if c.want == nil && (got[0].Err != nil || got[0].Verdict != Accepted) {
				t.Errorf("an answer under the pair's key gave %+v, want it accepted", got[0])
			}
			if c.want != nil && !errors.Is(got[0].Err, c.want) {
				t.Errorf("an answer under %s gave %+v, want no answer", name, got[0])
			}
		})
	}
}

// TestAnsweredInTheVersionAsked: a node that shares a key with the owner
// still answers a signed question signed (an older vip asked it), and an
// owner that shares none with a node asks it signed.
func TestAnsweredInTheVersionAsked(t *testing.T) {
	r := newRigOf(t, accept(time.Second), true)
	q := Message{Kind: KindAsk, From: "a", To: "b", Nonce: "n", Lease: 7, Seq: 1, Sent: time.Now(), PromiseMS: 1000}
	b, err := Seal(r.aKey, q)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := r.server.Handle(b)
	if err != nil {
		t.Fatal(err)
	}
	if reply[len(magic)] != VersionSigned {
		t.Errorf("a signed question answered in version %d", reply[len(magic)])
	}
	if _, err := Open(reply, func(string) (PeerKey, bool) { return PeerKey{Sign: r.bKey.Public().(ed25519.PublicKey)}, true }); err != nil {
		t.Errorf("the answer does not verify against b's public key: %v", err)
	}
	k := r.keys["b"]
	k.MAC = nil
	r.keys["b"] = k
	versions := r.tapVersions()
	if got := r.asker.Ask(context.Background(), []Target{{"b", r.bAddr}}, 7, time.Second, time.Second); got[0].Err != nil {
		t.Fatalf("asked signed: %+v", got[0])
	}
	if got := versions(); string(got) != string([]byte{VersionSigned, VersionSigned}) {
		t.Errorf("datagrams of versions %v, want both signed", got)
	}
}

// TestAskedAgainSigned: b's view of a lacks the X25519 half a's key with
// it needs (b read a's record before a's agent was upgraded), so b drops
// a's question under their key; at half the round's timeout a asks again,
// signed, and b's answer to that counts.
func TestAskedAgainSigned(t *testing.T) {
	r := newRigOf(t, accept(time.Second), true)
	k := r.keys["a"]
	k.MAC = nil
	keyOfB := func(n string) (PeerKey, bool) {
		if n == "a" {
			return k, true
		}
		kb, ok := r.keys[n]
		return kb, ok
	}
	r.server.keyOf = keyOfB
	versions := r.tapVersions()
	got := r.asker.Ask(context.Background(), []Target{{"b", r.bAddr}}, 7, time.Second, 400*time.Millisecond)
	if got[0].Err != nil || got[0].Verdict != Accepted {
		t.Fatalf("asked again signed: %+v, want accepted", got[0])
	}
	if got[0].RTT < 200*time.Millisecond {
		t.Errorf("answered after %v, before the question asked again at half the timeout", got[0].RTT)
	}
	if got := versions(); string(got) != string([]byte{VersionMAC, VersionSigned, VersionSigned}) {
		t.Errorf("datagrams of versions %v, want a question under the key, one signed, and its signed answer", got)
	}
	if r.server.Dropped() != 1 {
		t.Errorf("b dropped %d datagrams, want the one question it could not verify", r.server.Dropped())
	}
}

// TestAskEndsWithItsContext: a round whose context ends, before it
// starts or while it waits, ends then, not at its timeout nor at the
// point it would ask again signed.
func TestAskEndsWithItsContext(t *testing.T) {
	for _, early := range []bool{true, false} {
		t.Run(fmt.Sprintf("ended before it starts %v", early), func(t *testing.T) {
			r := newRigOf(t, accept(time.Second), true)
			r.impostor(t, func([]byte) []byte { return nil }) // b is silent
			ctx, cancel := context.WithCancel(context.Background())
			if early {
				cancel()
			} else {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			defer cancel()
			start := time.Now()
			got := r.asker.Ask(ctx, []Target{{"b", r.bAddr}}, 7, time.Second, 10*time.Second)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("the round took %v after its context ended, want it over then", took)
			}
			if !errors.Is(got[0].Err, ErrNoAnswer) {
				t.Errorf("got %+v, want no answer", got[0])
			}
		})
	}
}

// TestKeyringAgrees: a keyring derives the same X25519 key from the same
// failsafe key, agrees with each node a key that node agrees back, one
// for each pair, and refuses keys that are not X25519 public halves.
func TestKeyringAgrees(t *testing.T) {
	ka, kb, kc := newKey(t), newKey(t), newKey(t)
	ra, _ := NewKeyring("a", ka)
	again, _ := NewKeyring("a", ka)
	if ra.Public() != again.Public() {
		t.Error("the same failsafe key derived two X25519 keys")
	}
	ab, ac := sharedKey(t, "a", ka, "b", kb), sharedKey(t, "a", ka, "c", kc)
	if bytes.Equal(ab, ac) || len(ab) != 32 {
		t.Errorf("keys shared with b and c: %x, %x; want two of 32 bytes", ab, ac)
	}
	// The names are bound in: the same keys under other names agree
	// another key.
	if renamed := sharedKey(t, "a", ka, "x", kb); bytes.Equal(renamed, ab) {
		t.Error("the key shared does not depend on the names")
	}
	rb, _ := NewKeyring("b", kb)
	if k, err := ra.Shared("b", rb.Public()); err != nil || !bytes.Equal(k, ab) {
		t.Errorf("agreed again: %x, %v; want %x", k, err, ab)
	}
	for name, pub := range map[string]string{
		"not base64":      "!!",
		"short":           "c2hvcnQ=",
		"a low-order one": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
	} {
		if _, err := ra.Shared("z", pub); err == nil {
			t.Errorf("%s: agreed a key", name)
		}
	}
	if _, err := ra.Shared("a", ra.Public()); err == nil {
		t.Error("agreed a key with itself")
	}
}

// TestReplayedAnswerIsNoAnswer: b's accepted answer of one round, sent
// again in a later round (b itself now silent), is no answer: its nonce
// is the old question's.
func TestReplayedAnswerIsNoAnswer(t *testing.T) {
	r := newRig(t, accept(time.Second))
	var mu sync.Mutex
	var answers [][]byte
	r.net.tap = func(from, to netip.AddrPort, b []byte) {
		if from == r.bAddr {
			mu.Lock()
			answers = append(answers, b)
			mu.Unlock()
		}
	}
	if got := r.asker.Ask(context.Background(), []Target{{"b", r.bAddr}}, 7, time.Second, time.Second); got[0].Err != nil {
		t.Fatalf("first round: %+v", got[0])
	}
	mu.Lock()
	old := answers[0]
	mu.Unlock()
	// b goes away; an attacker at b's address replays the old answer to
	// every question.
	r.impostor(t, func([]byte) []byte { return old })
	got := r.asker.Ask(context.Background(), []Target{{"b", r.bAddr}}, 7, time.Second, 300*time.Millisecond)
	if !errors.Is(got[0].Err, ErrNoAnswer) {
		t.Errorf("a replayed answer gave %+v, want no answer", got[0])
	}
}

// TestReplayedQuestionGetsNone: a question taken once is not answered
// again, nor one older under the same lease, nor one under a lease not
// seen before that was sent long ago.
func TestReplayedQuestionGetsNone(t *testing.T) {
	r := newRig(t, accept(time.Second))
	seal := func(m Message) []byte {
		b, err := Seal(r.aKey, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := time.Now()
	q := Message{Kind: KindAsk, From: "a", To: "b", Nonce: "n1", Lease: 7, Seq: 10, Sent: now, PromiseMS: 1000}
	if _, err := r.server.Handle(seal(q)); err != nil {
		t.Fatalf("a fresh question: %v", err)
	}
	for name, m := range map[string]Message{
		"the same again":             q,
		"an older one":               {Kind: KindAsk, From: "a", To: "b", Nonce: "n0", Lease: 7, Seq: 9, Sent: now, PromiseMS: 1000},
		"a new lease, sent long ago": {Kind: KindAsk, From: "a", To: "b", Nonce: "n2", Lease: 8, Seq: 11, Sent: now.Add(-time.Hour), PromiseMS: 1000},
	} {
		if _, err := r.server.Handle(seal(m)); !errors.Is(err, ErrReplay) {
			t.Errorf("%s: %v, want a replay refused", name, err)
		}
	}
	next := q
	next.Seq, next.Nonce = 11, "n3"
	if _, err := r.server.Handle(seal(next)); err != nil {
		t.Errorf("the next question: %v", err)
	}
	if n := len(r.asked); n != 2 {
		t.Errorf("Decide was asked %d times, want 2 (the fresh ones only)", n)
	}
}

// TestBadInputChangesNothing: datagrams that do not parse, do not verify,
// are not for this node, or are answers get no answer, and never reach
// Decide.
func TestBadInputChangesNothing(t *testing.T) {
	r := newRig(t, accept(time.Second))
	seal := func(k ed25519.PrivateKey, m Message) []byte {
		b, err := Seal(k, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := Message{Kind: KindAsk, From: "a", To: "b", Nonce: "n", Lease: 7, Seq: 1, Sent: time.Now(), PromiseMS: 1000}
	valid := seal(r.aKey, good)
	flipped := append([]byte(nil), valid...)
	flipped[len(flipped)-70] ^= 1 // inside the payload
	with := func(f func(*Message)) []byte { m := good; f(&m); return seal(r.aKey, m) }
	dropsAll(t, r, valid, map[string][]byte{
		"empty":                nil,
		"short":                []byte("VIPF"),
		"no magic":             append([]byte("XXXX"), valid[4:]...),
		"another version":      append(append([]byte("VIPF"), 9), valid[5:]...),
		"truncated":            valid[:len(valid)-1],
		"a byte flipped":       flipped,
		"signed by another":    seal(newKey(t), good),
		"from a node unknown":  with(func(m *Message) { m.From = "z" }),
		"for another node":     with(func(m *Message) { m.To = "c" }),
		"an answer":            with(func(m *Message) { m.Kind = KindAnswer }),
		"no nonce":             with(func(m *Message) { m.Nonce = "" }),
		"no promise":           with(func(m *Message) { m.PromiseMS = 0 }),
		"a kind unknown":       with(func(m *Message) { m.Kind = "hello" }),
		"not JSON":             append(append([]byte("VIPF\x01\x00\x03"), "{{{"...), make([]byte, 64)...),
		"a MAC, no key shared": macWith(t, []byte("0123456789abcdef0123456789abcdef"), good),
	})
}

// dropsAll checks that b's server answers none of bad, which reach no
// Decide, and then still answers valid.
func dropsAll(t *testing.T, r *rig, valid []byte, bad map[string][]byte) {
	t.Helper()
	for name, b := range bad {
		if reply, err := r.server.Handle(b); err == nil {
			t.Errorf("%s: answered %q, want dropped", name, reply)
		}
	}
	if n := len(r.asked); n != 0 {
		t.Errorf("Decide was asked %d times, want 0", n)
	}
	if _, err := r.server.Handle(valid); err != nil {
		t.Errorf("the valid question after them: %v", err)
	}
}

func macWith(t testing.TB, mac []byte, m Message) []byte {
	t.Helper()
	b, err := SealMAC(mac, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBadMACChangesNothing: version-2 datagrams that do not verify with
// the key the two share get no answer, and never reach Decide.
func TestBadMACChangesNothing(t *testing.T) {
	r := newRigOf(t, accept(time.Second), true)
	good := Message{Kind: KindAsk, From: "a", To: "b", Nonce: "n", Lease: 7, Seq: 1, Sent: time.Now(), PromiseMS: 1000}
	valid := macWith(t, r.keys["b"].MAC, good)
	flipped := append([]byte(nil), valid...)
	flipped[len(flipped)-40] ^= 1 // inside the payload
	header := append([]byte(nil), valid...)
	header[len(magic)+2]++ // the length: the datagram no longer adds up
	tagged := append([]byte(nil), valid...)
	tagged[len(tagged)-1] ^= 1
	dropsAll(t, r, valid, map[string][]byte{
		"another key":      macWith(t, sharedKey(t, "a", r.aKey, "b", newKey(t)), good),
		"a byte flipped":   flipped,
		"the length":       header,
		"the tag":          tagged,
		"truncated":        valid[:len(valid)-1],
		"a tag of zeros":   append(append([]byte(nil), valid[:len(valid)-macSize]...), make([]byte, macSize)...),
		"called version 1": append([]byte("VIPF\x01"), valid[5:]...),
	})
}

// BenchmarkRound is one question and its answer, both ways through Seal,
// Open and Handle: what each node of a fleet on failsafe spends per owner
// that asks it, and per node it asks, every renewal period.
func BenchmarkRound(b *testing.B) {
	aKey, bKey := newKey(b), newKey(b)
	for _, mac := range []bool{false, true} {
		keys := map[string]PeerKey{"a": {Sign: aKey.Public().(ed25519.PublicKey)}, "b": {Sign: bKey.Public().(ed25519.PublicKey)}}
		name := "signed"
		if mac {
			name = "mac"
			shared := sharedKey(b, "a", aKey, "b", bKey)
			for n, k := range keys {
				k.MAC = shared
				keys[n] = k
			}
		}
		keyOf := func(n string) (PeerKey, bool) { k, ok := keys[n]; return k, ok }
		b.Run(name, func(b *testing.B) {
			srv := NewServer(ServerConfig{Node: "b", Key: bKey, KeyOf: keyOf, Decide: accept(time.Second)})
			q := Message{Kind: KindAsk, From: "a", To: "b", Nonce: "0123456789abcdef0123456789abcdef", Lease: 7, Sent: time.Now(), PromiseMS: 1000}
			for b.Loop() {
				q.Seq++
				dg, err := SealFor(aKey, keys["b"], q)
				if err != nil {
					b.Fatal(err)
				}
				reply, err := srv.Handle(dg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Open(reply, keyOf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKeyringShared is a key agreed with a node: what each node of a
// fleet spends once for every other node, as it reads its record.
func BenchmarkKeyringShared(b *testing.B) {
	ra, err := NewKeyring("a", newKey(b))
	if err != nil {
		b.Fatal(err)
	}
	rb, err := NewKeyring("b", newKey(b))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		ra.Forget(func(string) bool { return false })
		if _, err := ra.Shared("b", rb.Public()); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzOpen(f *testing.F) {
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	b, _ := Seal(k, Message{Kind: KindAsk, From: "a", To: "b", Nonce: "n", PromiseMS: 1})
	f.Add(b)
	mac := []byte("0123456789abcdef0123456789abcdef")
	b2, _ := SealMAC(mac, Message{Kind: KindAnswer, From: "b", To: "a", Nonce: "n", Verdict: Accepted, PromiseMS: 1})
	f.Add(b2)
	f.Add([]byte("VIPF\x01\x00\x00"))
	f.Add([]byte("VIPF\x02\x00\x00"))
	pub := k.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Open(b, func(string) (PeerKey, bool) { return PeerKey{Sign: pub, MAC: mac}, true })
		if err == nil && m.Kind != KindAsk && m.Kind != KindAnswer {
			t.Errorf("opened a message of kind %q", m.Kind)
		}
	})
}

func TestLoadKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "failsafe.key")
	k1, err := LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v, %v: want mode 0600", st, err)
	}
	k2, err := LoadKey(path)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("loaded again: %v, same key %v", err, k1.Equal(k2))
	}
	pub, err := ParsePublicKey(PublicKey(k1))
	if err != nil || !pub.Equal(k1.Public()) {
		t.Errorf("public key round trip: %v", err)
	}
	os.WriteFile(path, []byte("not a key\n"), 0o600)
	if _, err := LoadKey(path); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("a corrupt key file: %v, want an error that says to remove it", err)
	}
	if _, err := ParsePublicKey("c2hvcnQ="); err == nil {
		t.Error("a short public key parsed")
	}
}
