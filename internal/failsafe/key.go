package failsafe

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LoadKey reads the agent's private key from path, or creates one there
// (mode 0600) if there is none: the key outlives restarts, so the public
// half in the store stays the agent's.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("failsafe key %s is not a key vip wrote: remove it and a new one is made", path)
		}
		return ed25519.NewKeyFromSeed(seed), nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read the failsafe key: %w", err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make a failsafe key: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".failsafe-key-*")
	if err != nil {
		return nil, fmt.Errorf("write the failsafe key: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.WriteString(base64.StdEncoding.EncodeToString(key.Seed()) + "\n")
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return nil, fmt.Errorf("write the failsafe key: %w", err)
	}
	return key, nil
}

// PublicKey is the text of key's public half, as a node record carries it.
func PublicKey(key ed25519.PrivateKey) string {
	return base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
}

// ParsePublicKey reads a public key as PublicKey writes it.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("failsafe public key %q is not a base64 Ed25519 key", s)
	}
	return ed25519.PublicKey(b), nil
}
