package announce

import (
	"container/heap"
	"time"

	"github.com/jonboulle/clockwork"
)

// probeBatch bounds the probes armed in one hold of the engine's lock, so
// that a status or a claim waits for at most that many.
const probeBatch = 256

// probeQueue holds every claim's next probe, earliest first, behind a
// single timer. A timer per claim made 10,000 claims made together wake
// 10,000 goroutines at the same instant, every ProbeEvery, each to queue
// for the engine's lock; status and claims waited behind them.
type probeQueue struct {
	due   dueHeap[*claimState]
	timer clockwork.Timer
	// timerAt is when timer fires; gen tells its callback from those of
	// timers stopped too late.
	timerAt time.Time
	gen     uint64
}

// probeLocked (re)starts the claim's probing: a probe after delay, through
// the single sender, then one every ProbeEvery while the claim is held.
func (e *Engine) probeLocked(cs *claimState, delay time.Duration) {
	e.unprobeLocked(cs)
	if e.probeEvery(cs) == 0 {
		return
	}
	cs.probeAt = e.clock.Now().Add(delay)
	heap.Push(&e.probes.due, cs)
	e.wakeProbesLocked()
}

// unprobeLocked stops the claim's probing, and the timer with the last.
func (e *Engine) unprobeLocked(cs *claimState) {
	if cs.probeIndex >= 0 {
		heap.Remove(&e.probes.due, cs.probeIndex)
		if len(e.probes.due) == 0 {
			e.wakeProbesLocked()
		}
	}
}

// wakeProbesLocked sets the timer for the earliest probe, unless it is
// set for then or sooner already.
func (e *Engine) wakeProbesLocked() {
	q := &e.probes
	if len(q.due) == 0 {
		if q.timer != nil {
			q.timer.Stop()
			q.timer = nil
		}
		return
	}
	at := q.due[0].probeAt
	if q.timer != nil {
		if !at.Before(q.timerAt) {
			return
		}
		q.timer.Stop()
	}
	q.gen++
	gen := q.gen
	q.timer, q.timerAt = e.clock.AfterFunc(at.Sub(e.clock.Now()), func() { e.probeDue(gen) }), at
}

// probeDue arms the probes that are due, at most probeBatch of them, and
// sets the timer for the next ones: for now, if more are due, so that
// whoever else waits for the lock gets it in between.
func (e *Engine) probeDue(gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if gen == e.probes.gen {
		e.probes.timer = nil // it fired
	}
	now := e.clock.Now()
	for q, n := &e.probes.due, 0; len(*q) > 0 && !(*q)[0].probeAt.After(now) && n < probeBatch; n++ {
		cs := (*q)[0]
		if cur, ok := e.claims[cs.claim.Addr]; !ok || cur != cs {
			heap.Pop(q)
			continue
		}
		if cs.live() {
			e.sched.Arm(cs.probeKey(), Burst{Cost: 1})
		}
		cs.probeAt = now.Add(e.probeEvery(cs))
		heap.Fix(q, 0)
	}
	e.wakeProbesLocked()
}

// dueTime and setHeapIndex put claims in the engine's dueHeap of probes.
func (c *claimState) dueTime() time.Time { return c.probeAt }
func (c *claimState) setHeapIndex(i int) { c.probeIndex = i }
