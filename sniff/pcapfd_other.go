//go:build cgo && !linux

package sniff

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/google/gopacket/pcap"
)

// pollReader is Linux's; elsewhere captures read through gopacket.
type pollReader struct{}

func newPollReader(*pcap.Handle) (*pollReader, error) {
	return nil, errors.New("reading through the poller is only done on Linux")
}

func (*pollReader) next() ([]byte, time.Time, error) { return nil, time.Time{}, nil }
func (*pollReader) wait(*atomic.Bool) error          { return nil }
func (*pollReader) interrupt()                       {}
func (*pollReader) close()                           {}
