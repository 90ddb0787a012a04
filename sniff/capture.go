package sniff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
)

// ErrNoLibpcap is wrapped by the errors of Open and Filter given a user's
// expression in a build without cgo, which has no libpcap to compile
// expressions with. A live capture without one needs no libpcap.
var ErrNoLibpcap = errors.New("this vip was built without cgo")

// ErrLibpcapMissing is wrapped by the errors of Filter given a user's
// expression where libpcap cannot be loaded: vip opens it only to compile
// an expression, so a host without it runs every other command.
var ErrLibpcapMissing = errors.New("libpcap is not installed")

// DefaultSnapLen is the number of bytes kept of each frame unless Options
// say otherwise: enough for any neighbor discovery message with its options
// and extension headers; longer ones are counted as undecodable.
const DefaultSnapLen = 2048

// Options configure Open. The zero value is usable.
type Options struct {
	// Filter is a libpcap expression (pcap-filter(7)) ANDed with
	// BaseFilter, e.g. "ether host 00:00:5e:00:53:01". Empty adds nothing.
	// libpcap compiles it, so a build without cgo refuses one.
	Filter string
	// SnapLen is how many bytes of each frame to capture; zero means
	// DefaultSnapLen.
	SnapLen int
	// Promiscuous puts the interface in promiscuous mode, so that the
	// capture also sees solicitations to groups this host did not join
	// and unicast between other hosts. Without it a capture sees
	// broadcast ARP, its own traffic and the groups joined (vip joins
	// those of the addresses it holds).
	Promiscuous bool
	// BufferSize is the socket's receive buffer in bytes (SO_RCVBUF; the
	// kernel counts each frame's overhead against twice this); zero means
	// 2 MiB, libpcap's default.
	BufferSize int
	// AfterIngress reads the ARP and IPv6 frames the host's stack
	// receives, after tc ingress, on two packet sockets bound to those
	// protocols, instead of tapping every frame of the interface before
	// tc on one: a frame an in-kernel responder answers at tc ingress
	// then never reaches the capture, and no frame of another protocol
	// runs its filter. Each frame a tap sees costs the sender's path a
	// clone check and a filter run (a tenth to a third of a microsecond
	// on a lab veth, as much as the in-kernel responder's whole lead over
	// the kernel's ARP). What it loses: frames a tc program drops or
	// redirects, frames an upper interface takes (a VLAN's, a macvlan's,
	// a bridge port's), and frames for other hosts, which in promiscuous
	// mode a tap would see. Those last two are left out on purpose (see
	// wire.OwnFramesOnly): on a VLAN's parent they include the VLAN's frames,
	// their tag already taken off.
	AfterIngress bool
}

// Source yields captured Ethernet frames. Open makes one on a packet
// socket; tests and other capture mechanisms (AF_XDP, a ring buffer fed by
// an in-kernel responder) provide their own.
type Source interface {
	// ReadFrame returns the next frame and its capture time. The frame is
	// valid until the next call. It returns an error wrapping
	// os.ErrDeadlineExceeded when no frame came within a short wait (a
	// tenth of a second or so), so that the reader can look at its
	// context, and io.EOF when no frame will come again.
	ReadFrame() (frame []byte, ts time.Time, err error)
	// Dropped returns how many frames the kernel dropped for this source
	// since it opened, for lack of buffer space.
	Dropped() (uint64, error)
	// Close releases the source. A ReadFrame running at the time returns
	// soon after, with io.EOF.
	Close() error
}

// Observer receives each decoded observation from a Capture. Table and
// Detector are Observers.
type Observer interface {
	Observe(Observation)
}

// Stats are a capture's counters.
type Stats struct {
	// Received counts the frames read, whether they decoded or not.
	Received uint64 `json:"received"`
	// Dropped counts the frames the kernel dropped because the capture
	// did not read fast enough.
	Dropped uint64 `json:"dropped"`
	// Ignored counts frames that are not neighbour traffic (ErrNotNeighbor),
	// which a user's filter or a file may let through.
	Ignored uint64 `json:"ignored"`
	// Undecodable counts truncated, malformed and invalid neighbour
	// frames.
	Undecodable uint64 `json:"undecodable"`
	// OutOfScope counts neighbour frames about addresses outside the
	// scope Narrow set that the kernel could not drop (see Narrow).
	OutOfScope uint64 `json:"out_of_scope"`
}

// Capture reads frames from a Source, decodes them and hands the
// observations to its observers. Stats and Close may be called from any
// goroutine, also while Run runs.
type Capture struct {
	src     Source
	name    string
	running atomic.Bool
	scope   atomic.Pointer[scopeSet] // nil: all neighbour traffic

	received, dropped, ignored, undecodable, outOfScope atomic.Uint64
}

// An interruptible Source can wait for frames without a deadline: after
// interrupt, the ReadFrame waiting, and every later one, returns an error
// wrapping os.ErrDeadlineExceeded at once, until resume. Run interrupts it
// when its context is done, so an idle capture wakes no one.
type interruptible interface {
	interrupt()
	resume()
}

// A scoper is a Source that can narrow what the kernel hands it to the
// frames about some addresses (see scopeProgram); all widens it again.
type scoper interface {
	scope(sc Scope, all bool) error
}

// Narrow narrows the capture to the frames about addrs: ARP whose sender or
// target protocol address is one of them, neighbor solicitations and
// advertisements whose target or IPv6 source is. Run hands observers only
// those. A live capture on an interface also drops the others in the
// kernel, so that a flood of requests for other addresses costs the process
// nothing; beyond MaxScopeAddrs addresses, or on a source that cannot
// filter, the kernel keeps handing over all neighbour traffic and Narrow
// says so in its error, but the capture is narrowed all the same. An empty
// addrs lets nothing through; Widen widens the capture again.
func (c *Capture) Narrow(addrs []netip.Addr) error {
	return c.NarrowTo(Scope{Addrs: addrs})
}

// NarrowTo narrows the capture to the frames about sc's addresses: all the
// frames about Addrs, as Narrow does, and only the frames that claim
// Claims (see Scope).
func (c *Capture) NarrowTo(sc Scope) error {
	c.scope.Store(newScopeSet(sc))
	if s, ok := c.src.(scoper); ok {
		if err := s.scope(sc, false); err != nil {
			return fmt.Errorf("capture on %s: %w; it takes all neighbour traffic from the kernel", c.name, err)
		}
	}
	return nil
}

// Widen widens the capture to all neighbour traffic, as it is when
// opened.
func (c *Capture) Widen() error {
	if sc, ok := c.src.(scoper); ok {
		if err := sc.scope(Scope{}, true); err != nil {
			return fmt.Errorf("capture on %s: %w", c.name, err)
		}
	}
	c.scope.Store(nil)
	return nil
}

// NewCapture returns a Capture reading from src. name says what src is
// (an interface, a file) in errors.
func NewCapture(name string, src Source) *Capture {
	return &Capture{src: src, name: name}
}

// Run reads, decodes and observes frames until ctx is done, the source ends
// or Close is called, and then returns nil; or until reading fails, and then
// returns why. Each observation goes to every observer in turn, on Run's
// goroutine. Only one Run may run at a time.
func (c *Capture) Run(ctx context.Context, observers ...Observer) error {
	if !c.running.CompareAndSwap(false, true) {
		return fmt.Errorf("capture on %s is already running", c.name)
	}
	defer c.running.Store(false)
	defer c.refreshDropped()
	c.refreshDropped()
	if in, ok := c.src.(interruptible); ok {
		in.resume()
		stop := context.AfterFunc(ctx, in.interrupt)
		defer stop()
	}
	done := ctx.Done()
	for {
		select {
		case <-done:
			return nil
		default:
		}
		frame, ts, err := c.src.ReadFrame()
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue
		case errors.Is(err, io.EOF):
			return nil
		default:
			return fmt.Errorf("capture on %s: %w", c.name, err)
		}
		c.received.Add(1)
		o, err := Decode(frame, ts)
		if err != nil {
			if errors.Is(err, ErrNotNeighbor) {
				c.ignored.Add(1)
			} else {
				c.undecodable.Add(1)
			}
			continue
		}
		if sc := c.scope.Load(); sc != nil && !sc.about(&o) {
			c.outOfScope.Add(1)
			continue
		}
		for _, ob := range observers {
			ob.Observe(o)
		}
	}
}

func (c *Capture) refreshDropped() {
	// A source that cannot say (a file) keeps the count at zero.
	if n, err := c.src.Dropped(); err == nil {
		c.dropped.Store(n)
	}
}

// Stats returns the capture's counters, with the kernel's drop count as of
// now.
func (c *Capture) Stats() Stats {
	c.refreshDropped()
	return Stats{
		Received:    c.received.Load(),
		Dropped:     c.dropped.Load(),
		Ignored:     c.ignored.Load(),
		Undecodable: c.undecodable.Load(),
		OutOfScope:  c.outOfScope.Load(),
	}
}

// Close stops the capture and releases its source. A Run in progress
// returns nil once its current read ends; a live capture's read ends at
// once.
func (c *Capture) Close() error {
	return c.src.Close()
}
