package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/vipctl/vip/announce"
)

// vipAddrs knows which addresses on this host's interfaces are vip's, not
// the host's own: those it added for claims with --assign. The node's
// registration leaves them out, or every move of them away from here would
// be refused as a move of the host's own address. They are the addresses
// of the claims the engine holds with Assign, and besides:
//   - those the engine's Assigner is adding or has added and not removed:
//     a claim's address is on its interface before the claim is held, and
//     after its release until it is removed, and a registration read
//     meanwhile must not take it for the host's;
//   - an earlier agent's, recorded in the state file with Assign, until the
//     engine holds them (adopted) or for good if it never does (another
//     node took them meanwhile, and the address stays where it was).
//
// It also keeps the answer deadline on the addresses vip added: each has a
// valid lifetime that ends by the deadline, lengthened as the deadline
// moves (see keepLifetimes), so that the kernel removes them on time by
// itself when this agent is killed or frozen.
type vipAddrs struct {
	mu       sync.Mutex
	assigned map[netip.Addr]string // the interface, for the lifetimes
	recorded map[netip.Addr]bool
	// inherited are the addresses an earlier agent added, by interface:
	// an Add that finds one there takes it over (see vipAssigner.Add).
	inherited map[netip.Addr]string

	// netMu serialises the changes of one address on the interfaces, so
	// that a lifetime's extension (which puts back an address the kernel
	// removed) never follows its removal.
	netMu    sync.Mutex
	deadline *announce.Deadline
	log      *slog.Logger
	// ends is when the lifetime each address was last given ends, on
	// the deadline's clock (zero: none, or taken off by extend).
	ends map[netip.Addr]time.Duration
}

// newVIPAddrs starts with the claims recorded in the state file at start.
// deadline is the agent's answer deadline, which the lifetimes of the
// addresses it adds follow.
func newVIPAddrs(recorded []announce.Claim, deadline *announce.Deadline, log *slog.Logger) *vipAddrs {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v := &vipAddrs{assigned: map[netip.Addr]string{}, recorded: map[netip.Addr]bool{}, inherited: map[netip.Addr]string{},
		deadline: deadline, log: log, ends: map[netip.Addr]time.Duration{}}
	for _, c := range recorded {
		if c.Options.Assign {
			v.recorded[c.Addr] = true
		}
		if c.AddedAddress {
			v.inherited[c.Addr] = c.Interface
		}
	}
	return v
}

// lifetimeAssigner is an Assigner that adds addresses with a valid
// lifetime and lengthens it (assign.Netlink).
type lifetimeAssigner interface {
	announce.Assigner
	AddFor(ifname string, a netip.Addr, life time.Duration) (bool, error)
	Extend(ifname string, a netip.Addr, life time.Duration) error
}

// assigner returns as, with each address it adds counted as vip's from
// before it is on the interface until it is removed again, and given a
// lifetime that ends by the answer deadline.
func (v *vipAddrs) assigner(as lifetimeAssigner) announce.Assigner { return vipAssigner{as, v} }

// adopted stops counting the recorded addresses the engine holds: its
// status says from now on.
func (v *vipAddrs) adopted(held []netip.Addr) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, a := range held {
		delete(v.recorded, a)
	}
}

// of returns vip's addresses, with those of the claims in st held with
// Assign. The engine's status is read for it on each change of the host's
// interfaces, rare enough that its cost (a few system calls per port for
// the in-kernel responder's counters) does not count.
func (v *vipAddrs) of(st []announce.Status) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, s := range st {
		if s.Claim.Options.Assign {
			out[s.Claim.Addr] = true
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for a := range v.assigned {
		out[a] = true
	}
	for a := range v.recorded {
		out[a] = true
	}
	return out
}

// kernelLate is how long after an address's lifetime ends the kernel may
// take to remove it (announce.LifetimeLate).
const kernelLate = announce.LifetimeLate

// lifetimeFor is the valid lifetime to give an address when the answer
// deadline is left away: whole seconds (the kernel's unit) that end by the
// deadline, and by kernelLate before it when a second is left after that.
// With less than a second to the deadline there is none (false): the
// address keeps the lifetime it has, which ends earlier.
//
// A lifetime that ends by the deadline is removed by the kernel at most
// kernelLate past it, well before the lease can expire in the store: the
// deadline is the lease's TTL less a margin of at least 0.8 s
// (fleet.TimingFor) after the send time of the renewal it counts from.
func lifetimeFor(left time.Duration) (time.Duration, bool) {
	secs := (left - kernelLate) / time.Second
	if secs < 1 && left >= time.Second {
		secs = 1
	}
	if secs < 1 {
		return 0, false
	}
	return secs * time.Second, true
}

// lifetime is the lifetime to give an address now (lifetimeFor), and
// the deadline and the clock it was read at.
func (v *vipAddrs) lifetime() (life time.Duration, ok bool, at, now time.Duration) {
	at, now = v.deadline.At()
	life, ok = lifetimeFor(at - now)
	return life, ok, at, now
}

// errDeadlineNear refuses to add an address when the answer deadline is
// closed, or less than a second away (the kernel's shortest lifetime) and
// no renewal moved it within lifetimeWait: the lease is not being renewed,
// and the agent is about to fall silent.
var errDeadlineNear = errors.New("this agent's answer deadline is less than a second away and no renewal of its lease moved it (the store does not answer in time): claim again once the store answers")

// lifetimeWait is how long an addition waits for a renewal to move the
// answer deadline a second or more away. Between two acknowledged
// renewals the deadline left falls under a second at the default TTL (2 s:
// 1.17 s after an acknowledgement, 0.83 s just before the next, a third of
// a second later), so an addition made then waits for the next; a healthy
// lease gives one within a renewal period and a round trip.
const lifetimeWait = time.Second

// awaitLifetime waits until the deadline allows a lifetime, for at most
// wait, and says whether it does; a closed deadline (no lease, or fenced)
// allows none at once.
func (v *vipAddrs) awaitLifetime(wait time.Duration) bool {
	if _, ok, _, _ := v.lifetime(); ok || v.deadline.Closed() {
		return ok
	}
	moved := make(chan struct{}, 1)
	stop, err := v.deadline.Watch(func(time.Duration) error {
		select {
		case moved <- struct{}{}:
		default:
		}
		return nil
	}, nil)
	if err != nil {
		return false
	}
	defer stop()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if _, ok, _, _ := v.lifetime(); ok || v.deadline.Closed() {
			return ok
		}
		select {
		case <-moved:
		case <-timer.C:
			return false
		}
	}
}

// keepLifetimes lengthens the lifetimes of the addresses vip added each
// time the answer deadline moves, until ctx is done; stop waits for it.
//
// The lifetime is the deadline's second enforcer, chosen because it
// outlives the agent and covers both responders: the in-kernel responder
// withholds the kernel's answers for an assigned address past the deadline
// only while its program is attached, which is only while the agent lives
// (nothing is pinned), and the socket responder cannot withhold them at
// all. Only the kernel's own removal of the address silences it once the
// agent is killed: its ARP and NDP answers, and any service listening on
// it, which then accepts nothing more. A pinned program would be exact to
// the nanosecond but would outlive the agent for good if nothing removed
// it, and cover the in-kernel responder only.
func (v *vipAddrs) keepLifetimes(ctx context.Context, as lifetimeAssigner) (stop func(), err error) {
	kick := make(chan struct{}, 1)
	unwatch, err := v.deadline.Watch(func(time.Duration) error {
		select {
		case kick <- struct{}{}:
		default:
		}
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				v.extendAll(as)
			}
		}
	}()
	return func() { unwatch(); cancel(); <-done }, nil
}

// extendAll gives every address vip added the lifetime the deadline allows
// now; past it, none is lengthened and the kernel removes them on time.
func (v *vipAddrs) extendAll(as lifetimeAssigner) {
	v.mu.Lock()
	addrs := make(map[netip.Addr]string, len(v.assigned))
	for a, ifname := range v.assigned {
		addrs[a] = ifname
	}
	v.mu.Unlock()
	var failed []error
	for a, ifname := range addrs {
		if err := v.extend(as, a, ifname); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		v.log.Warn("lengthen the lifetimes of the addresses vip added: those that failed end at their earlier deadline",
			"failed", len(failed), "err", errors.Join(failed...))
	}
}

// extend lengthens a's lifetime, if vip still has it on ifname. With less
// than a second to a deadline moved earlier than the lifetime a gave
// last ends (the store back after the failsafe lengthened it, and slow),
// no lifetime short enough exists: a is taken off the interface, as the
// kernel would have at the deadline, and put back by the next extension
// the deadline allows. A closed deadline takes none off: a fence removes
// the addresses itself, and a stop for a restart leaves them.
func (v *vipAddrs) extend(as lifetimeAssigner, a netip.Addr, ifname string) error {
	v.netMu.Lock()
	defer v.netMu.Unlock()
	v.mu.Lock()
	still, end := v.assigned[a] == ifname, v.ends[a]
	v.mu.Unlock()
	life, ok, at, now := v.lifetime()
	switch {
	case !still:
		return nil
	case ok:
		if err := as.Extend(ifname, a, life); err != nil {
			return err
		}
		v.setEnd(a, now+life)
		return nil
	case at == announce.ClosedAt || end == 0 || end <= at+kernelLate:
		return nil
	}
	if err := as.Remove(ifname, a); err != nil {
		return fmt.Errorf("take %s off %s, its lifetime past the answer deadline: %w", a, ifname, err)
	}
	v.setEnd(a, 0)
	v.log.Warn("took an added address off its interface: its lifetime outlasted the answer deadline, moved earlier with less than a second left; it is put back once the deadline allows a lifetime", "addr", a, "interface", ifname)
	return nil
}

// setEnd records when a's lifetime ends (zero: it has none).
func (v *vipAddrs) setEnd(a netip.Addr, end time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ends[a] = end
}

// vipAssigner is an Assigner whose additions a vipAddrs counts and gives
// lifetimes.
type vipAssigner struct {
	as lifetimeAssigner
	v  *vipAddrs
}

// Add adds a with a lifetime that ends by the answer deadline. An address
// already there that an earlier agent of this host added (recorded in the
// state file) is taken over: it is vip's, its lifetime now this agent's to
// lengthen.
func (a vipAssigner) Add(ifname string, addr netip.Addr) (bool, error) {
	// Waited for before the lock: the lifetimes of the others are
	// lengthened meanwhile.
	a.v.awaitLifetime(lifetimeWait)
	a.v.netMu.Lock()
	defer a.v.netMu.Unlock()
	life, ok, _, now := a.v.lifetime()
	if !ok {
		return false, fmt.Errorf("add %s to %s: %w", addr, ifname, errDeadlineNear)
	}
	a.v.mu.Lock()
	_, had := a.v.assigned[addr]
	a.v.assigned[addr] = ifname
	inherited := a.v.inherited[addr] == ifname
	a.v.mu.Unlock()
	added, err := a.as.AddFor(ifname, addr, life)
	if err == nil && !added && inherited {
		if err = a.as.Extend(ifname, addr, life); err == nil {
			added = true
			a.v.log.Info("took over an address the earlier agent added", "addr", addr, "interface", ifname)
		}
	}
	a.v.mu.Lock()
	defer a.v.mu.Unlock()
	if added {
		delete(a.v.inherited, addr)
		a.v.ends[addr] = now + life
	} else if !had {
		// Not added (there already, or it failed): not vip's by this.
		delete(a.v.assigned, addr)
	}
	return added, err
}

func (a vipAssigner) Remove(ifname string, addr netip.Addr) error {
	a.v.netMu.Lock()
	defer a.v.netMu.Unlock()
	err := a.as.Remove(ifname, addr)
	if err == nil {
		a.v.mu.Lock()
		delete(a.v.assigned, addr)
		delete(a.v.inherited, addr)
		delete(a.v.ends, addr)
		a.v.mu.Unlock()
	}
	return err
}
