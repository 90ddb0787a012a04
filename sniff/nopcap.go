//go:build !cgo

package sniff

import "fmt"

// Open would capture on iface with libpcap; this build has none, so it
// returns ErrNoLibpcap.
func Open(iface string, opts Options) (*Capture, error) {
	return nil, fmt.Errorf("capture on %s: %w", iface, ErrNoLibpcap)
}

// OpenFile would read a capture file with libpcap; this build has none, so
// it returns ErrNoLibpcap.
func OpenFile(path string, opts Options) (*Capture, error) {
	return nil, fmt.Errorf("read capture %s: %w", path, ErrNoLibpcap)
}

// Filter would compile the capture filter with libpcap; this build has
// none, so it returns ErrNoLibpcap.
func Filter(user string) (string, error) {
	return "", fmt.Errorf("capture filter: %w", ErrNoLibpcap)
}
