//go:build cgo

package sniff

import "errors"

// PollReaderErr says why a live capture reads through gopacket, waiting in
// C, instead of through the Go runtime's poller; nil when it uses the
// poller.
func PollReaderErr(c *Capture) error {
	s, ok := c.src.(*pcapSource)
	if !ok {
		return errors.New("not a libpcap capture")
	}
	if s.poll == nil {
		return s.pollErr
	}
	return nil
}
