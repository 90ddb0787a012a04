package failsafe

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// Target is a node of the failsafe set and where it answers.
type Target struct {
	Node string
	Addr netip.AddrPort
}

// Reply is one node's answer to a round of questions, or why there is none.
type Reply struct {
	Node    string
	Verdict Verdict
	Promise time.Duration
	Why     string
	// Err is set when there is no answer that counts: none in time, or
	// none that verified.
	Err error
	// RTT is how long the answer took.
	RTT time.Duration
}

// Asker asks the nodes of an owner's failsafe set.
type Asker struct {
	self  string
	key   ed25519.PrivateKey
	keyOf func(node string) (PeerKey, bool)
	seq   atomic.Uint64
	// listen opens the round's socket (tests: a fake).
	listen func() (net.PacketConn, error)
}

// NewAsker returns an Asker for node self, which asks each node with the
// key they share, or signed with key when they share none (keyOf), and
// verifies answers the same way. Its questions' numbers start from the
// wall clock, so that they still grow across a restart under the same
// lease.
func NewAsker(self string, key ed25519.PrivateKey, keyOf func(node string) (PeerKey, bool)) *Asker {
	a := &Asker{self: self, key: key, keyOf: keyOf, listen: func() (net.PacketConn, error) {
		return net.ListenPacket("udp", ":0")
	}}
	a.seq.Store(uint64(time.Now().UnixNano()))
	return a
}

// ErrNoAnswer is a node that did not answer in time.
var ErrNoAnswer = errors.New("no answer in time")

// Ask asks every target at once, under lease, for a promise of promise,
// and waits for their answers until timeout or ctx ends. Each target gets
// a Reply, in the order given; an answer that does not verify, or does not
// echo its question's nonce, is no answer.
//
// A node asked with the key the two share that has not answered by half
// the timeout (when ctx leaves the round that long) is asked again,
// signed: its view of this node may lack the X25519 half that the key
// needs (a record read before this node's agent was upgraded, a view
// frozen by the outage), and it drops a question it cannot verify. It
// answers the way it is asked; the first answer counts.
func (a *Asker) Ask(ctx context.Context, targets []Target, lease int64, promise, timeout time.Duration) []Reply {
	replies := make([]Reply, len(targets))
	for i, t := range targets {
		replies[i] = Reply{Node: t.Node, Err: ErrNoAnswer}
	}
	if ctx.Err() != nil {
		return replies // over before it asked anyone
	}
	conn, err := a.listen()
	if err != nil {
		for i := range replies {
			replies[i].Err = fmt.Errorf("open a socket to ask: %w", err)
		}
		return replies
	}
	defer conn.Close()
	pending := map[string]int{} // nonce: index
	waiting := 0                // targets asked and not answered
	var shared []int            // asked with the key they share
	// ask sends target i a question, signed or under their key if they
	// share one; it says whether it did the latter.
	ask := func(i int, signed bool) (bool, error) {
		t := targets[i]
		var nb [16]byte
		rand.Read(nb[:])
		nonce := hex.EncodeToString(nb[:])
		q := Message{Kind: KindAsk, From: a.self, To: t.Node, Nonce: nonce, Lease: lease, Seq: a.seq.Add(1),
			Sent: time.Now().UTC(), PromiseMS: promise.Milliseconds()}
		to, _ := a.keyOf(t.Node)
		if signed {
			to.MAC = nil
		}
		b, err := SealFor(a.key, to, q)
		if err == nil {
			_, err = conn.WriteTo(b, net.UDPAddrFromAddrPort(t.Addr))
		}
		if err == nil {
			pending[nonce] = i
		}
		return to.MAC != nil, err
	}
	start := time.Now()
	for i, t := range targets {
		mac, err := ask(i, false)
		if err != nil {
			replies[i].Err = fmt.Errorf("ask %s at %s: %w", t.Node, t.Addr, err)
			continue
		}
		waiting++
		if mac {
			shared = append(shared, i)
		}
	}
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	retry := start.Add(timeout / 2)
	if len(shared) == 0 || !retry.Before(deadline) {
		retry = time.Time{}
	}
	if retry.IsZero() {
		conn.SetReadDeadline(deadline)
	} else {
		conn.SetReadDeadline(retry)
	}
	// After the deadline is set: a ctx done already sets it to now at
	// once, and nothing overwrites it.
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, MaxDatagram+1)
	for waiting > 0 {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			if retry.IsZero() || ctx.Err() != nil || time.Now().Before(retry) {
				break
			}
			retry = time.Time{}
			conn.SetReadDeadline(deadline)
			if ctx.Err() != nil {
				break // ctx ended: the deadline it set was just overwritten
			}
			for _, i := range shared {
				if errors.Is(replies[i].Err, ErrNoAnswer) {
					ask(i, true)
				}
			}
			continue
		}
		m, err := Open(buf[:n], a.keyOf)
		if err != nil || m.Kind != KindAnswer || m.To != a.self {
			continue
		}
		i, ok := pending[m.Nonce]
		if !ok || targets[i].Node != m.From {
			continue // not this round's, or not from the node asked
		}
		delete(pending, m.Nonce)
		if !errors.Is(replies[i].Err, ErrNoAnswer) {
			continue // answered already, to its other question
		}
		waiting--
		replies[i] = Reply{Node: m.From, Verdict: m.Verdict, Why: m.Why, RTT: time.Since(start)}
		if m.Verdict == Accepted {
			replies[i].Promise = min(m.Promise(), promise)
		}
	}
	return replies
}
