//go:build !linux

package sniff

import "fmt"

// Open would capture on iface on a Linux packet socket; other systems have
// none, so it fails.
func Open(iface string, opts Options) (*Capture, error) {
	return nil, fmt.Errorf("capture on %s: live capture needs Linux packet sockets", iface)
}
