package failsafe

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Keyring is this node's half of the keys it shares with each other node
// (version 2 of the datagram): an X25519 key derived from its failsafe key,
// whose public half its record carries beside the Ed25519 one, and, by
// node, the key agreed with that node's public half, made once. A
// signature costs the signer about 30 µs and the verifier 60; a MAC with a
// shared key about 1 µs each way. At a thousand nodes all on failsafe, each
// node answers and asks a thousand others every renewal period: signed,
// half a core or more on every node.
type Keyring struct {
	self string
	priv *ecdh.PrivateKey
	pub  string

	mu    sync.Mutex
	pairs map[string]pairKey
}

// pairKey is the key shared with a node, and the public half it was agreed
// with.
type pairKey struct {
	pub string
	mac []byte
}

// dhInfo and pairInfo name what the keys derived are for.
const (
	dhInfo   = "vip failsafe v2 x25519"
	pairInfo = "vip failsafe v2 pair"
)

// NewKeyring returns node self's keyring, its X25519 key derived from key.
func NewKeyring(self string, key ed25519.PrivateKey) (*Keyring, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("a failsafe key of %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	seed, err := hkdf.Key(sha256.New, key.Seed(), nil, dhInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the failsafe's X25519 key: %w", err)
	}
	priv, err := ecdh.X25519().NewPrivateKey(seed)
	if err != nil {
		return nil, fmt.Errorf("derive the failsafe's X25519 key: %w", err)
	}
	return &Keyring{self: self, priv: priv, pub: base64.StdEncoding.EncodeToString(priv.PublicKey().Bytes()),
		pairs: map[string]pairKey{}}, nil
}

// Public is the text of the X25519 key's public half, as a node record
// carries it.
func (r *Keyring) Public() string { return r.pub }

// Shared returns the key this node shares with node, whose record carries
// pub (Public's text): the same on both sides, bound to both names and both
// public halves. It is agreed once for a node's key, and kept.
func (r *Keyring) Shared(node, pub string) ([]byte, error) {
	if node == r.self {
		return nil, errors.New("no key is shared with this node itself")
	}
	r.mu.Lock()
	p, ok := r.pairs[node]
	r.mu.Unlock()
	if ok && p.pub == pub {
		return p.mac, nil
	}
	b, err := base64.StdEncoding.DecodeString(pub)
	if err != nil {
		return nil, fmt.Errorf("failsafe X25519 key %q is not base64", pub)
	}
	theirs, err := ecdh.X25519().NewPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("failsafe X25519 key %q: %w", pub, err)
	}
	secret, err := r.priv.ECDH(theirs)
	if err != nil {
		return nil, fmt.Errorf("agree a key with %s: %w", node, err)
	}
	mac, err := hkdf.Key(sha256.New, secret, nil, string(pairContext(r.self, r.priv.PublicKey().Bytes(), node, b)), 32)
	if err != nil {
		return nil, fmt.Errorf("agree a key with %s: %w", node, err)
	}
	r.mu.Lock()
	r.pairs[node] = pairKey{pub: pub, mac: mac}
	r.mu.Unlock()
	return mac, nil
}

// Forget drops the keys shared with nodes keep says are gone.
func (r *Keyring) Forget(keep func(node string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for n := range r.pairs {
		if !keep(n) {
			delete(r.pairs, n)
		}
	}
}

// pairContext is what the shared key is derived for: both nodes' names and
// public halves, in the order of the names, so that both sides derive the
// same key and it serves no other pair.
func pairContext(a string, aPub []byte, b string, bPub []byte) []byte {
	if b < a {
		a, aPub, b, bPub = b, bPub, a, aPub
	}
	out := []byte(pairInfo)
	for _, part := range [][]byte{[]byte(a), aPub, []byte(b), bPub} {
		out = binary.BigEndian.AppendUint16(out, uint16(len(part)))
		out = append(out, part...)
	}
	return out
}
