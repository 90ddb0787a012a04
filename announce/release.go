package announce

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vipctl/vip/internal/batchio"
)

// Release stops answering for each address at once, ends its window and
// removes the address from its interface if vip added it. It returns the
// released addresses and those that were not held.
//
// The book is where a release takes effect: the claims are forgotten there
// first, and when that fails (ctx done, the state file cannot be written)
// nothing is released, as a claim that cannot be recorded is not made.
// Releasing anyway would leave the book holding claims that nothing answers
// for, which the next agent would re-adopt, and which any later write of the
// book would keep.
func (e *Engine) Release(ctx context.Context, addrs []netip.Addr) (released, notHeld []netip.Addr, err error) {
	return e.release(ctx, addrs, releaseHow{})
}

// Suspend stops claims at once, when they may no longer be this host's:
// the fleet's fence calls it when the store has lost the agent's
// lease or no renewal reached the store in time. It stops answering and
// sending for each address, removes the address from its interface if vip
// added it, and publishes a suspend event (kind "revoke" on the wire this release)
// that says why. It writes nothing
// to the book, so that no slow or unreachable book (a store out of reach is
// what fences) can delay it; the fence keeps the claims, to take them up
// again when it lifts. It returns the suspended addresses and those not held.
func (e *Engine) Suspend(addrs []netip.Addr, why string) (suspended, notHeld []netip.Addr, err error) {
	return e.release(context.Background(), addrs, releaseHow{suspend: why})
}

// Leave stops claims for a restart of the agent: as Suspend, but an address
// vip added stays on its interface, for a service that binds it, and for
// the next agent to take over (the caller sees to it that the kernel
// removes it by itself when no agent does: the guarded agent's addresses
// have lifetimes that end by its answer deadline). The events say why.
func (e *Engine) Leave(addrs []netip.Addr, why string) (left, notHeld []netip.Addr, err error) {
	return e.release(context.Background(), addrs, releaseHow{suspend: why, keepAddresses: true})
}

// releaseHow says how a release treats the book.
type releaseHow struct {
	// keepAddresses leaves the addresses vip added on their interfaces
	// (Leave).
	keepAddresses bool
	// force releases even when the book cannot forget the claims (the
	// engine stopping), and reports that.
	force bool
	// suspend, when set, is why the claims are suspended (Suspend): the
	// book is not written, and the events say so.
	suspend string
}

func (e *Engine) release(ctx context.Context, addrs []netip.Addr, how releaseHow) (released, notHeld []netip.Addr, err error) {
	e.op.Lock()
	defer e.op.Unlock()
	var gone []*claimState
	// An address named twice is released once: releasing its claim twice
	// would drop its port's reference twice and close the port under the
	// claims still on it.
	seen := make(map[netip.Addr]bool, len(addrs))
	e.mu.Lock()
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		cs, ok := e.claims[a]
		if !ok {
			notHeld = append(notHeld, a)
			continue
		}
		gone = append(gone, cs)
		released = append(released, a)
	}
	e.mu.Unlock()
	if len(gone) == 0 {
		return nil, notHeld, nil
	}
	var errs []error
	if how.suspend == "" {
		if err := e.cfg.Book.Delete(ctx, released...); err != nil {
			if !how.force {
				return nil, notHeld, fmt.Errorf("release: forget the claims: %w (nothing was released)", err)
			}
			errs = append(errs, fmt.Errorf("forget the released claims: %w", err))
		}
	}
	answered, byPort := e.forgetLocked(gone)
	// An address vip added goes from the interface before its port
	// drops it: the in-kernel responder withholds the kernel's answers
	// for it past the answer deadline only while it holds it, and the
	// kernel would answer a request that came between the two (a fenced
	// owner's kernel answered one 15 ms after it woke).
	for _, cs := range gone {
		c := cs.claim
		if c.AddedAddress && !how.keepAddresses {
			if err := e.cfg.Assigner.Remove(c.Interface, c.Addr); err != nil {
				errs = append(errs, fmt.Errorf("release %s: remove it from %s: %w", c.Addr, c.Interface, err))
			}
		}
	}
	for p, as := range byPort {
		if err := p.LetGo(as...); err != nil {
			errs = append(errs, fmt.Errorf("release on %s: %w", p.Name(), err))
		}
	}
	var closing []func() error
	for i, cs := range gone {
		a := cs.claim.Addr
		did := fmt.Sprintf("answered %d requests, sent %d gratuitous frames", answered[i].answers, answered[i].frames)
		if how.suspend != "" {
			e.log.Warn("suspend", "addr", a, "interface", cs.claim.Interface, "why", how.suspend, "answered", answered[i].answers, "gratuitous_frames", answered[i].frames)
			e.publish(Event{Kind: EventSuspend, Addr: a, Interface: cs.claim.Interface, Message: how.suspend + ": " + did})
		} else {
			e.log.Info("release", "addr", a, "interface", cs.claim.Interface, "answered", answered[i].answers, "gratuitous_frames", answered[i].frames)
			e.publish(Event{Kind: EventRelease, Addr: a, Interface: cs.claim.Interface, Message: did})
		}
		if p := e.unrefLater(cs.port); p != nil {
			closing = append(closing, p.closer())
		}
	}
	// The ports that held their last claim close together, as the
	// sockets of one do (Link.Close): an agent stopping on several
	// interfaces waits for the kernel's grace periods once, not once an
	// interface.
	errs = append(errs, batchio.CloseAll(closing...))
	return released, notHeld, errors.Join(errs...)
}

// counts are what a claim did while held.
type counts struct{ answers, frames uint64 }

// forgetLocked takes the claims out of the engine's memory at once, under
// its lock: from then on status, the sender and the probes know nothing of
// them. It returns what each did, and the addresses each port must stop
// answering for, which the caller drops outside the lock.
func (e *Engine) forgetLocked(gone []*claimState) ([]counts, map[*portRef][]netip.Addr) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]counts, len(gone))
	byPort := map[*portRef][]netip.Addr{}
	for i, cs := range gone {
		a := cs.claim.Addr
		// A port forgets what it answered for an address once it drops
		// it: count the answers first.
		out[i].answers = e.answeredLocked(cs)
		if cs.port != nil {
			e.sched.Cancel(cs.key())
			e.sched.Cancel(cs.probeKey())
			// Dropped whether it answers or only counts the traffic
			// while the kernel answers.
			byPort[cs.port] = append(byPort[cs.port], a)
			cs.answering = false
		}
		if cs.refresh != nil {
			cs.refresh.Stop()
		}
		e.unprobeLocked(cs)
		e.totals.answeredReleased += out[i].answers
		delete(e.claims, a)
		e.byAddr = nil
		e.syncSendLocked(cs)
		delete(e.answeredBefore, a)
		e.sentMu.Lock()
		out[i].frames = e.sent[a]
		delete(e.sent, a)
		e.sentMu.Unlock()
	}
	return out, byPort
}

// unrefLater drops a claim's reference to its port and, with the last,
// takes the port out of the engine and returns it, for the caller to
// close. The caller holds e.op.
func (e *Engine) unrefLater(p *portRef) *portRef {
	if p == nil {
		return nil
	}
	if p.refs--; p.refs > 0 {
		return nil
	}
	delete(e.ports, p.Name())
	return p
}

// closer returns the close of a port that held its last claim.
func (p *portRef) closer() func() error {
	return func() error {
		if err := p.Close(); err != nil {
			return fmt.Errorf("close %s: %w", p.Name(), err)
		}
		return nil
	}
}

func (e *Engine) answeredLocked(cs *claimState) uint64 {
	n := e.answeredBefore[cs.claim.Addr]
	if cs.port != nil && cs.answering {
		n += cs.port.Answered(cs.claim.Addr)
	}
	return n
}
