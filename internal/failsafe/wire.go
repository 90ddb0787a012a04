package failsafe

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kind tells a question from an answer.
type Kind string

const (
	// KindAsk is an owner's question to a node of its failsafe set.
	KindAsk Kind = "ask"
	// KindAnswer is that node's answer.
	KindAnswer Kind = "answer"
)

// Verdict is what a node answers.
type Verdict string

const (
	// Accepted: the node does not reach the store either, and promises
	// not to take any of the owner's addresses for Promise.
	Accepted Verdict = "accepted"
	// ReachesStore: the node reaches the store, so the outage is the
	// owner's alone; it promises nothing.
	ReachesStore Verdict = "reaches-store"
	// Refused: the node will not promise (it is stopping, or the
	// question was not one it can take); Why says why.
	Refused Verdict = "refused"
)

// Message is a question or an answer. Every field is signed.
type Message struct {
	Kind Kind   `json:"kind"`
	From string `json:"from"`
	To   string `json:"to"`
	// Nonce is the question's, which its answer echoes.
	Nonce string `json:"nonce"`
	// Lease and Seq name the question: the owner's lease, and a number
	// that grows with each question under it.
	Lease int64  `json:"lease,omitempty"`
	Seq   uint64 `json:"seq,omitempty"`
	// Sent is the owner's wall clock as it asked: a question under a
	// lease the node has not seen is taken only when Sent is recent.
	Sent time.Time `json:"sent,omitzero"`
	// Promise is how long the owner asks for (in a question) or the node
	// grants (in an accepted answer), in milliseconds.
	PromiseMS int64   `json:"promise_ms,omitempty"`
	Verdict   Verdict `json:"verdict,omitempty"`
	Why       string  `json:"why,omitempty"`
}

// Promise is the promise asked for or granted.
func (m Message) Promise() time.Duration { return time.Duration(m.PromiseMS) * time.Millisecond }

// The datagram: magic, a version, the payload's length, the JSON payload,
// and the Ed25519 signature of the context string and the payload.
const (
	magic      = "VIPF"
	version    = 1
	headerLen  = len(magic) + 1 + 2
	sigContext = "vip failsafe v1\x00"
	// MaxDatagram bounds a datagram: a message is a few hundred bytes.
	MaxDatagram = 1200
)

// Seal encodes m and signs it with key.
func Seal(key ed25519.PrivateKey, m Message) ([]byte, error) {
	payload, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if headerLen+len(payload)+ed25519.SignatureSize > MaxDatagram {
		return nil, fmt.Errorf("failsafe message of %d bytes is too long", len(payload))
	}
	b := make([]byte, 0, headerLen+len(payload)+ed25519.SignatureSize)
	b = append(b, magic...)
	b = append(b, version)
	b = binary.BigEndian.AppendUint16(b, uint16(len(payload)))
	b = append(b, payload...)
	return append(b, ed25519.Sign(key, signed(payload))...), nil
}

func signed(payload []byte) []byte {
	return append([]byte(sigContext), payload...)
}

// Errors of Open, for the counts of what was dropped.
var (
	ErrMalformed = errors.New("not a failsafe message")
	ErrUnknown   = errors.New("from a node whose key is not known")
	ErrForged    = errors.New("signature does not verify")
)

// Open decodes b and verifies its signature with the sender's key, which
// keyOf returns (false: unknown). Nothing of b is trusted before that.
func Open(b []byte, keyOf func(node string) (ed25519.PublicKey, bool)) (Message, error) {
	if len(b) < headerLen+ed25519.SignatureSize || !bytes.HasPrefix(b, []byte(magic)) {
		return Message{}, fmt.Errorf("%w: %d bytes without the header", ErrMalformed, len(b))
	}
	if b[len(magic)] != version {
		return Message{}, fmt.Errorf("%w: version %d, want %d", ErrMalformed, b[len(magic)], version)
	}
	n := int(binary.BigEndian.Uint16(b[len(magic)+1:]))
	if len(b) != headerLen+n+ed25519.SignatureSize {
		return Message{}, fmt.Errorf("%w: payload of %d bytes in a datagram of %d", ErrMalformed, n, len(b))
	}
	payload, sig := b[headerLen:headerLen+n], b[headerLen+n:]
	var m Message
	if err := json.Unmarshal(payload, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if m.Kind != KindAsk && m.Kind != KindAnswer {
		return Message{}, fmt.Errorf("%w: kind %q", ErrMalformed, m.Kind)
	}
	pub, ok := keyOf(m.From)
	if !ok {
		return Message{}, fmt.Errorf("%w: %q", ErrUnknown, m.From)
	}
	if !ed25519.Verify(pub, signed(payload), sig) {
		return Message{}, fmt.Errorf("%w: claims to be from %q", ErrForged, m.From)
	}
	return m, nil
}
