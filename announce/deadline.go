package announce

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipctl/vip/internal/boottime"
)

// Deadline is a guarded agent's answer deadline: a reading of
// CLOCK_BOOTTIME (package boottime) past which no frame for its claims
// leaves the host, answer, gratuitous round or probe, until the deadline
// moves again. Its owner (the fleet member) moves it on each renewal of
// the lease that the store acknowledged, to that renewal's send time plus
// the fence's delay: the last moment at which the lease is sure to be alive
// in the store.
//
// It is checked where frames leave, against a clock that runs while the
// process does not: each Link reads it immediately before every write, and
// an in-kernel responder that watches it (Watch) has the deadline in its
// maps and compares it there, so a frozen agent falls silent on time and,
// when it wakes, sends nothing that was due while it slept.
//
// There is one per agent, not one per address: one lease guards every
// claim of an agent, so each claim's deadline would be the same value, and
// a renewal would be one write per held address (10,000 map writes a
// second at 10,000 claims) instead of one per interface. An agent without a
// store has no Deadline (nil), and nothing it sends is checked.
//
// The methods of a nil *Deadline say "open" and count nothing.
type Deadline struct {
	now func() time.Duration
	// at is the deadline in nanoseconds of the clock: closedAt until
	// the first Set.
	at       atomic.Int64
	withheld atomic.Uint64

	// mu serialises Set and Watch, so that a watcher is told every
	// deadline in order and never an older one after a newer.
	mu       sync.Mutex
	watchers map[int]*deadlineWatcher
	next     int
	// retired is what watchers since stopped had withheld.
	retired uint64
}

type deadlineWatcher struct {
	set      func(at time.Duration) error
	withheld func() uint64
}

// closedAt is a deadline that has always passed: CLOCK_BOOTTIME is past 1 ns
// from boot by the time anything runs.
const closedAt = 1

// LifetimeLate is how long after an address's valid lifetime ends the
// kernel may take to remove it: its check of lifetimes runs on whole
// seconds, a quarter of a second late at most (include/net/addrconf.h,
// ADDRCONF_TIMER_FUZZ). An agent that gives the addresses it added
// lifetimes that end by the answer deadline (internal/agent) may have them
// answered this long past it; a deadline that allows no such slack (the
// failsafe's, which a promise ends) is set this much earlier.
const LifetimeLate = 250 * time.Millisecond

// ClosedAt is what At returns for a closed deadline: not a time it passed
// at, and not one to show as a time (it would read as the host's boot).
const ClosedAt = time.Duration(closedAt)

// NewDeadline returns a Deadline on now (nil means boottime.Now), closed:
// nothing may be sent until the first Set, so that an agent that restarts
// answers nothing before the store acknowledged its lease.
func NewDeadline(now func() time.Duration) *Deadline {
	if now == nil {
		now = boottime.Now
	}
	d := &Deadline{now: now, watchers: map[int]*deadlineWatcher{}}
	d.at.Store(closedAt)
	return d
}

// Set moves the deadline to at, a reading of the Deadline's clock, and
// tells every watcher before it returns. It returns the watchers' errors;
// a watcher that failed keeps its older deadline, which is earlier, so it
// stops answering sooner, never later.
func (d *Deadline) Set(at time.Duration) error {
	if d == nil {
		return nil
	}
	at = max(at, closedAt)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at.Store(int64(at))
	var errs []error
	for _, w := range d.watchers {
		errs = append(errs, w.set(at))
	}
	return errors.Join(errs...)
}

// Close ends the deadline at once: nothing is sent until the next Set. The
// fence closes it when the store says the lease is gone before its time.
func (d *Deadline) Close() error { return d.Set(closedAt) }

// At returns the deadline as a reading of its clock, and the clock now.
func (d *Deadline) At() (at, now time.Duration) {
	if d == nil {
		return 0, 0
	}
	return time.Duration(d.at.Load()), d.now()
}

// Closed reports whether the deadline was closed (Close, or never set),
// rather than passed by itself.
func (d *Deadline) Closed() bool { return d != nil && d.at.Load() == closedAt }

// Now reads the Deadline's clock.
func (d *Deadline) Now() time.Duration {
	if d == nil {
		return boottime.Now()
	}
	return d.now()
}

// Open reports whether a frame may leave now: the clock is before the
// deadline (or d is nil). It costs one clock read (vDSO), no lock.
func (d *Deadline) Open() bool {
	if d == nil {
		return true
	}
	return int64(d.now()) < d.at.Load()
}

// withhold counts n frames not sent because the deadline had passed.
func (d *Deadline) withhold(n int) {
	if d != nil && n > 0 {
		d.withheld.Add(uint64(n))
	}
}

// Withheld returns how many frames were not sent because the deadline had
// passed: those the Links held back and those the watchers report (the
// requests an in-kernel responder passed on unanswered).
func (d *Deadline) Withheld() uint64 {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.withheld.Load() + d.retired
	for _, w := range d.watchers {
		if w.withheld != nil {
			n += w.withheld()
		}
	}
	return n
}

// Watch calls set with the deadline now, and again after each Set, until
// stop is called: an in-kernel responder writes it into its maps. withheld,
// if not nil, reports the watcher's own count of frames withheld, kept in
// Withheld after stop. If the first set fails, Watch returns its error and
// watches nothing.
func (d *Deadline) Watch(set func(at time.Duration) error, withheld func() uint64) (stop func(), err error) {
	if d == nil {
		return func() {}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := set(time.Duration(d.at.Load())); err != nil {
		return nil, err
	}
	id := d.next
	d.next++
	d.watchers[id] = &deadlineWatcher{set: set, withheld: withheld}
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		w, ok := d.watchers[id]
		if !ok {
			return
		}
		if w.withheld != nil {
			d.retired += w.withheld()
		}
		delete(d.watchers, id)
	}, nil
}

// Guard has every frame the Link sends for its claims checked against d
// immediately before it leaves: answers, rounds and probes. An in-kernel
// responder is given the deadline and each change of it. Call it before the
// first Hold; a nil d guards nothing.
func (l *Link) Guard(d *Deadline) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return net.ErrClosed
	}
	if l.unwatch != nil {
		l.unwatch()
		l.unwatch = nil
	}
	l.send.dl.Store(d)
	if l.sock != nil {
		l.sock.dl.Store(d)
		return nil
	}
	stop, err := d.Watch(l.kern.SetDeadline, l.kern.Withheld)
	if err != nil {
		return fmt.Errorf("give the answer deadline to the responder on %s: %w", l.ifi.Name, err)
	}
	l.unwatch = stop
	return nil
}
