package failsafe

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
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
	c := &memConn{net: n, addr: addr, in: make(chan datagram, 64), done: make(chan struct{})}
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
}

func (c *memConn) ReadFrom(b []byte) (int, net.Addr, error) {
	c.mu.Lock()
	d := c.deadline
	c.mu.Unlock()
	var timeout <-chan time.Time
	if !d.IsZero() {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case dg := <-c.in:
		return copy(b, dg.b), net.UDPAddrFromAddrPort(dg.from), nil
	case <-c.done:
		return 0, nil, net.ErrClosed
	case <-timeout:
		return 0, nil, os.ErrDeadlineExceeded
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
	c.mu.Unlock()
	return nil
}
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// rig is an owner a and a node b on a memNet: b's server decides with
// decide, a asks through it.
type rig struct {
	net    *memNet
	keys   map[string]ed25519.PublicKey
	aKey   ed25519.PrivateKey
	bKey   ed25519.PrivateKey
	asker  *Asker
	server *Server
	bAddr  netip.AddrPort
	asked  chan Message
}

func newRig(t *testing.T, decide Decide) *rig {
	t.Helper()
	r := &rig{net: newMemNet(), aKey: newKey(t), bKey: newKey(t), asked: make(chan Message, 16)}
	r.keys = map[string]ed25519.PublicKey{"a": r.aKey.Public().(ed25519.PublicKey), "b": r.bKey.Public().(ed25519.PublicKey)}
	keyOf := func(n string) (ed25519.PublicKey, bool) { k, ok := r.keys[n]; return k, ok }
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
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.decide)
			got := r.asker.Ask(context.Background(), []Target{{"b", r.bAddr}}, 7, 3*time.Second, 2*time.Second)
			if len(got) != 1 || got[0].Err != nil {
				t.Fatalf("replies %+v, want one answer", got)
			}
			if got[0].Verdict != tc.want || got[0].Promise != tc.wantPromise {
				t.Errorf("got %s for %v, want %s for %v", got[0].Verdict, got[0].Promise, tc.want, tc.wantPromise)
			}
			q := <-r.asked
			if q.From != "a" || q.To != "b" || q.Lease != 7 || q.Promise() != 3*time.Second {
				t.Errorf("b was asked %+v", q)
			}
		})
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
	r.server.conn.Close()
	attacker := r.net.listen(r.bAddr)
	defer attacker.Close()
	go func() {
		buf := make([]byte, MaxDatagram)
		for {
			_, from, err := attacker.ReadFrom(buf)
			if err != nil {
				return
			}
			attacker.WriteTo(old, from)
		}
	}()
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
	for name, b := range map[string][]byte{
		"empty":               nil,
		"short":               []byte("VIPF"),
		"no magic":            append([]byte("XXXX"), valid[4:]...),
		"another version":     append(append([]byte("VIPF"), 9), valid[5:]...),
		"truncated":           valid[:len(valid)-1],
		"a byte flipped":      flipped,
		"signed by another":   seal(newKey(t), good),
		"from a node unknown": with(func(m *Message) { m.From = "z" }),
		"for another node":    with(func(m *Message) { m.To = "c" }),
		"an answer":           with(func(m *Message) { m.Kind = KindAnswer }),
		"no nonce":            with(func(m *Message) { m.Nonce = "" }),
		"no promise":          with(func(m *Message) { m.PromiseMS = 0 }),
		"a kind unknown":      with(func(m *Message) { m.Kind = "hello" }),
		"not JSON":            append(append([]byte("VIPF\x01\x00\x03"), "{{{"...), make([]byte, 64)...),
	} {
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

func FuzzOpen(f *testing.F) {
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	b, _ := Seal(k, Message{Kind: KindAsk, From: "a", To: "b", Nonce: "n", PromiseMS: 1})
	f.Add(b)
	f.Add([]byte("VIPF\x01\x00\x00"))
	pub := k.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Open(b, func(string) (ed25519.PublicKey, bool) { return pub, true })
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
