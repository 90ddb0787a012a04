package failsafe

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
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
	// Version is the datagram's (Open): a question's answer goes in the
	// same.
	Version int `json:"-"`
}

// Promise is the promise asked for or granted.
func (m Message) Promise() time.Duration { return time.Duration(m.PromiseMS) * time.Millisecond }

// The datagram: magic, a version, the payload's length, the JSON payload,
// and then, in version 1, the Ed25519 signature of the context string and
// the payload; in version 2, the HMAC-SHA256 of the context string, the
// header and the payload, with the key the two nodes share (Keyring).
const (
	magic         = "VIPF"
	VersionSigned = 1
	VersionMAC    = 2
	headerLen     = len(magic) + 1 + 2
	sigContext    = "vip failsafe v1\x00"
	macContext    = "vip failsafe v2\x00"
	macSize       = sha256.Size
	// MaxDatagram bounds a datagram: a message is a few hundred bytes.
	MaxDatagram = 1200
)

// PeerKey is what this node knows of another's keys, from its record.
type PeerKey struct {
	// Sign is its Ed25519 public key: it verifies its version-1
	// messages.
	Sign ed25519.PublicKey
	// MAC is the key the two share (Keyring.Shared), for version-2
	// messages both ways: nil when its record has no X25519 key (an
	// older vip), and the two sign.
	MAC []byte
}

// Seal encodes m and signs it with key: version 1.
func Seal(key ed25519.PrivateKey, m Message) ([]byte, error) {
	b, err := header(m, VersionSigned, ed25519.SignatureSize)
	if err != nil {
		return nil, err
	}
	return append(b, ed25519.Sign(key, signed(b[headerLen:]))...), nil
}

// SealMAC encodes m and authenticates it with mac, the key this node
// shares with m.To: version 2.
func SealMAC(mac []byte, m Message) ([]byte, error) {
	b, err := header(m, VersionMAC, macSize)
	if err != nil {
		return nil, err
	}
	return append(b, tag(mac, b)...), nil
}

// SealFor seals m for a node of key to: with the key they share if there
// is one, else signed with this node's key.
func SealFor(key ed25519.PrivateKey, to PeerKey, m Message) ([]byte, error) {
	if to.MAC != nil {
		return SealMAC(to.MAC, m)
	}
	return Seal(key, m)
}

// header returns the datagram's header and payload, with room for a
// trailer of trailer bytes.
func header(m Message, version byte, trailer int) ([]byte, error) {
	payload, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if headerLen+len(payload)+trailer > MaxDatagram {
		return nil, fmt.Errorf("failsafe message of %d bytes is too long", len(payload))
	}
	b := make([]byte, 0, headerLen+len(payload)+trailer)
	b = append(b, magic...)
	b = append(b, version)
	b = binary.BigEndian.AppendUint16(b, uint16(len(payload)))
	return append(b, payload...), nil
}

func signed(payload []byte) []byte {
	return append([]byte(sigContext), payload...)
}

// tag is the version-2 MAC of the header and payload b.
func tag(mac, b []byte) []byte {
	h := hmac.New(sha256.New, mac)
	h.Write([]byte(macContext))
	h.Write(b)
	return h.Sum(nil)
}

// Errors of Open, for the counts of what was dropped.
var (
	ErrMalformed = errors.New("not a failsafe message")
	ErrUnknown   = errors.New("from a node whose key is not known")
	ErrForged    = errors.New("signature or MAC does not verify")
)

// Open decodes b and verifies it with what keyOf returns of its sender
// (false: unknown): the signature with its public key (version 1), or the
// MAC with the key the two share (version 2). Nothing of b is trusted
// before that.
func Open(b []byte, keyOf func(node string) (PeerKey, bool)) (Message, error) {
	m, _, err := open(b, keyOf)
	return m, err
}

// open is Open, and returns the sender's keys it verified with.
func open(b []byte, keyOf func(node string) (PeerKey, bool)) (Message, PeerKey, error) {
	if len(b) < headerLen || !bytes.HasPrefix(b, []byte(magic)) {
		return Message{}, PeerKey{}, fmt.Errorf("%w: %d bytes without the header", ErrMalformed, len(b))
	}
	version := int(b[len(magic)])
	trailer := 0
	switch version {
	case VersionSigned:
		trailer = ed25519.SignatureSize
	case VersionMAC:
		trailer = macSize
	default:
		return Message{}, PeerKey{}, fmt.Errorf("%w: version %d, want %d or %d", ErrMalformed, version, VersionSigned, VersionMAC)
	}
	n := int(binary.BigEndian.Uint16(b[len(magic)+1:]))
	if len(b) != headerLen+n+trailer {
		return Message{}, PeerKey{}, fmt.Errorf("%w: payload of %d bytes in a datagram of %d", ErrMalformed, n, len(b))
	}
	payload, sum := b[headerLen:headerLen+n], b[headerLen+n:]
	var m Message
	if err := json.Unmarshal(payload, &m); err != nil {
		return Message{}, PeerKey{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if m.Kind != KindAsk && m.Kind != KindAnswer {
		return Message{}, PeerKey{}, fmt.Errorf("%w: kind %q", ErrMalformed, m.Kind)
	}
	m.Version = version
	k, ok := keyOf(m.From)
	switch {
	case !ok:
		return Message{}, PeerKey{}, fmt.Errorf("%w: %q", ErrUnknown, m.From)
	case version == VersionSigned && k.Sign == nil:
		return Message{}, PeerKey{}, fmt.Errorf("%w: no public key of %q", ErrUnknown, m.From)
	case version == VersionSigned && !ed25519.Verify(k.Sign, signed(payload), sum):
		return Message{}, PeerKey{}, fmt.Errorf("%w: claims to be from %q", ErrForged, m.From)
	case version == VersionMAC && k.MAC == nil:
		return Message{}, PeerKey{}, fmt.Errorf("%w: no key shared with %q", ErrUnknown, m.From)
	case version == VersionMAC && !hmac.Equal(tag(k.MAC, b[:headerLen+n]), sum):
		return Message{}, PeerKey{}, fmt.Errorf("%w: claims to be from %q", ErrForged, m.From)
	}
	return m, k, nil
}
