package failsafe

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPort is the UDP port agents answer failsafe questions on.
const DefaultPort = 7370

// Decide is a node's answer to a question it verified: what it says, and
// for how long it promises (Accepted only); why, in words, otherwise.
type Decide func(q Message) (v Verdict, promise time.Duration, why string)

// Server answers the failsafe questions of the fleet's owners.
type Server struct {
	conn   net.PacketConn
	self   string
	key    ed25519.PrivateKey
	keyOf  func(node string) (PeerKey, bool)
	decide Decide
	now    func() time.Time
	// fresh is how far a question under a lease not seen before may be
	// from this node's wall clock: an older one is a replay.
	fresh time.Duration
	log   *slog.Logger

	mu   sync.Mutex
	last map[string]asked
	// dropped counts the datagrams dropped, answered those answered.
	dropped, answered atomic.Uint64
}

// asked is the last question taken from an owner.
type asked struct {
	lease int64
	seq   uint64
}

// ServerConfig configures a Server.
type ServerConfig struct {
	Conn net.PacketConn
	// Node is this node's name; Key its private key.
	Node string
	Key  ed25519.PrivateKey
	// KeyOf returns what this node knows of another's keys, as its
	// record has them.
	KeyOf  func(node string) (PeerKey, bool)
	Decide Decide
	// Fresh bounds the age of a question under a lease not seen before
	// (default one minute); Now is the wall clock (default time.Now).
	Fresh time.Duration
	Now   func() time.Time
	Log   *slog.Logger
}

// NewServer returns a Server on cfg.Conn; Serve runs it.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Fresh == 0 {
		cfg.Fresh = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{conn: cfg.Conn, self: cfg.Node, key: cfg.Key, keyOf: cfg.KeyOf, decide: cfg.Decide,
		now: cfg.Now, fresh: cfg.Fresh, log: cfg.Log, last: map[string]asked{}}
}

// Serve answers until ctx ends (it closes the connection then).
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer stop()
	buf := make([]byte, MaxDatagram+1)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			s.log.Debug("failsafe: read", "err", err)
			continue
		}
		reply, err := s.Handle(buf[:n])
		if err != nil {
			s.dropped.Add(1)
			s.log.Debug("failsafe: dropped a datagram", "from", from.String(), "err", err)
			continue
		}
		if _, err := s.conn.WriteTo(reply, from); err != nil {
			s.log.Debug("failsafe: answer", "to", from.String(), "err", err)
			continue
		}
		s.answered.Add(1)
	}
}

// Handle takes one datagram and returns the answer to send back, sealed as
// the question was, or why none is sent: nothing that does not verify
// reaches Decide.
func (s *Server) Handle(b []byte) ([]byte, error) {
	q, k, err := open(b, s.keyOf)
	if err != nil {
		return nil, err
	}
	switch {
	case q.Kind != KindAsk:
		return nil, fmt.Errorf("%w: an answer where a question was expected", ErrMalformed)
	case q.To != s.self:
		return nil, fmt.Errorf("a question for %q, not for this node (%q)", q.To, s.self)
	case q.From == s.self:
		return nil, fmt.Errorf("a question from this node itself")
	case q.Nonce == "" || q.PromiseMS <= 0:
		return nil, fmt.Errorf("%w: a question without a nonce or a promise", ErrMalformed)
	}
	if err := s.take(q); err != nil {
		return nil, err
	}
	v, promise, why := s.decide(q)
	a := Message{Kind: KindAnswer, From: s.self, To: q.From, Nonce: q.Nonce, Verdict: v, Why: why}
	if v == Accepted {
		a.PromiseMS = promise.Milliseconds()
	}
	if q.Version == VersionMAC {
		// Answered as asked: with the key the question verified with.
		return SealMAC(k.MAC, a)
	}
	return Seal(s.key, a)
}

// ErrReplay is a question seen before, or too old to be new.
var ErrReplay = errors.New("a question replayed")

// take checks that q is newer than the owner's last question, and notes it.
func (s *Server) take(q Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.last[q.From]
	switch {
	case ok && q.Lease == last.lease && q.Seq <= last.seq:
		return fmt.Errorf("%w: %q's question %d under lease %x, after %d", ErrReplay, q.From, q.Seq, q.Lease, last.seq)
	case (!ok || q.Lease != last.lease) && absDuration(s.now().Sub(q.Sent)) > s.fresh:
		return fmt.Errorf("%w: %q's question under a new lease %x was sent at %s, over %s from now", ErrReplay, q.From, q.Lease, q.Sent.Format(time.RFC3339), s.fresh)
	}
	s.last[q.From] = asked{lease: q.Lease, seq: q.Seq}
	return nil
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// Dropped counts the datagrams dropped (malformed, unknown, forged,
// replayed, not for this node); Answered those answered.
func (s *Server) Dropped() uint64  { return s.dropped.Load() }
func (s *Server) Answered() uint64 { return s.answered.Load() }
