package announce

import (
	"context"
	"errors"
	"time"
)

// SendRound sends one gratuitous round for k through its interface's Port;
// the Scheduler calls it.
func (e *Engine) SendRound(_ context.Context, k Key) (int, error) {
	e.sendMu.RLock()
	t, ok := e.sendTo[k.Addr]
	e.sendMu.RUnlock()
	if !ok || t.port.Index() != k.Ifindex {
		return 0, nil // released, waiting or moved while the round was due
	}
	if k.Probe {
		return t.port.Probe(k.Addr)
	}
	return t.port.Announce(k.Addr, t.frames)
}

// sendTarget is where and what SendRound sends for a claim.
type sendTarget struct {
	port   *portRef
	frames FrameKinds
}

// syncSendLocked brings the claim's sendTarget up to date after its port
// or its options changed.
func (e *Engine) syncSendLocked(cs *claimState) {
	e.sendMu.Lock()
	defer e.sendMu.Unlock()
	if cur, ok := e.claims[cs.claim.Addr]; !ok || cur != cs || cs.port == nil {
		delete(e.sendTo, cs.claim.Addr)
		return
	}
	e.sendTo[cs.claim.Addr] = sendTarget{port: cs.port, frames: e.frames(cs)}
}

func (e *Engine) onBurst(ev BurstEvent) {
	if ev.Key.Probe {
		if ev.Kind == BurstRound {
			e.totals.probeFrames.Add(uint64(ev.Frames))
			if ev.Err != nil && !errors.Is(ev.Err, errPastDeadline) {
				e.log.Warn("probe failed", "addr", ev.Key.Addr, "err", ev.Err)
			}
		}
		return
	}
	switch ev.Kind {
	case BurstStart:
		e.log.Info("burst start", "addr", ev.Key.Addr, "window_end", ev.WindowEnd.Format(time.RFC3339Nano))
		e.publish(Event{Time: ev.At, Kind: EventBurstStart, Addr: ev.Key.Addr})
	case BurstExtended:
		e.log.Debug("burst extended", "addr", ev.Key.Addr, "window_end", ev.WindowEnd.Format(time.RFC3339Nano))
	case BurstRound:
		e.totals.gratuitousFrames.Add(uint64(ev.Frames))
		e.sentMu.Lock()
		e.sent[ev.Key.Addr] += uint64(ev.Frames)
		e.sentMu.Unlock()
		switch {
		case errors.Is(ev.Err, errPastDeadline):
			// The fence follows at once; the deadline's event counts them.
			e.log.Debug("gratuitous round withheld past the answer deadline", "addr", ev.Key.Addr, "round", ev.Round)
		case ev.Err != nil:
			e.log.Warn("gratuitous round failed", "addr", ev.Key.Addr, "round", ev.Round, "frames", ev.Frames, "err", ev.Err)
		default:
			e.log.Debug("gratuitous round", "addr", ev.Key.Addr, "round", ev.Round, "frames", ev.Frames, "late", ev.Late)
		}
	case BurstEnd:
		e.log.Info("burst end", "addr", ev.Key.Addr, "rounds", ev.Round, "frames", ev.Frames, "cancelled", ev.Cancelled)
		e.publish(Event{Time: ev.At, Kind: EventBurstEnd, Addr: ev.Key.Addr, Rounds: ev.Round, Frames: ev.Frames})
	}
}
