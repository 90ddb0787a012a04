package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The promises this node made as a failsafe peer, and the takes through the
// store that wait for them (FailsafeConfig).

// mayTake waits until this node may take an address through the store:
// no promise of its own in force (keepPromises), and no lapsed owner's
// failsafe set that leaves it out (guardNow). The context it returns
// carries the guard that the take's transaction compares. From its call
// until done, this node promises nothing, so that no promise made
// meanwhile goes unseen.
func (m *Member) mayTake(ctx context.Context, wait bool) (_ context.Context, done func(), err error) {
	done = func() {}
	if m.fs != nil {
		m.fs.mu.Lock()
		m.fs.taking++
		m.fs.mu.Unlock()
		done = func() {
			m.fs.mu.Lock()
			m.fs.taking--
			m.fs.mu.Unlock()
		}
	}
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	if err := m.keepPromises(ctx, lease); err != nil {
		done()
		return nil, nil, err
	}
	gctx, err := m.guardNow(ctx, wait)
	if err != nil {
		done()
		return nil, nil, err
	}
	return gctx, done, nil
}

// guardNow returns ctx with the guard a take carries: the last one a read
// of the failsafe sets gave, while none of the takes that carried it
// failed on it, else one read now (readGuard). An old guard is as safe as
// a new one: the take's transaction compares everything the guard rests on
// (no set written since its read, each live owner it names still under
// the record read), and fails with ErrFailsafeChanged once any of it
// changed; guarded then reads again. So a fleet whose sets stay as they
// are reads them once, not once a take: at a thousand owners, each set
// naming every other node, a read is megabytes.
func (m *Member) guardNow(ctx context.Context, wait bool) (context.Context, error) {
	m.mu.Lock()
	g, ok := m.guard, m.guardValid
	m.mu.Unlock()
	if ok {
		g.Wait = wait
		return WithGuard(ctx, g), nil
	}
	return m.readGuard(ctx, wait, 0)
}

// sharedRead reads the failsafe sets (failsafeBlocks), one read at a time,
// and keeps the guard it gives, or drops the one kept when a set holds
// this node's takes; it returns a guard kept already instead when that is
// newer than after, as another take's read just gave it.
func (m *Member) sharedRead(ctx context.Context, after int64) (string, Guard, error) {
	m.guardRead.Lock()
	defer m.guardRead.Unlock()
	m.mu.Lock()
	g, ok := m.guard, m.guardValid
	m.mu.Unlock()
	if ok && g.Rev > after {
		return "", g, nil
	}
	why, g, err := m.failsafeBlocks(ctx)
	switch {
	case err != nil:
	case why == "":
		m.keepGuard(g)
	default:
		m.dropGuard()
	}
	return why, g, err
}

// keepGuard keeps g, read when no set held this node's takes, for the
// takes to come, unless a later read's is kept already.
func (m *Member) keepGuard(g Guard) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.guardValid || g.Rev >= m.guard.Rev {
		m.guard, m.guardValid = g, true
	}
}

// dropGuard forgets the guard kept: a read found a set that holds this
// node's takes.
func (m *Member) dropGuard() {
	m.mu.Lock()
	m.guardValid = false
	m.mu.Unlock()
}

// readGuard reads the failsafe sets until none holds this node's takes,
// and returns ctx with the guard the read gives, which it keeps. A guard
// kept already that is newer than after (the revision of the guard a take
// failed on; 0: none) serves instead: takes that fail together read once
// (sharedRead). A set that holds them is read again after a sixteenth of a
// renewal period, then twice as long each time up to one; without wait,
// it refuses at once.
func (m *Member) readGuard(ctx context.Context, wait bool, after int64) (context.Context, error) {
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	said := false
	// A set that blocks is read again soon, then less often: one often
	// blocks only for a moment (a node that wrote it as it joined again
	// under a new lease, and writes it again at once), and one of a
	// dead owner may block for long, read by every node that waits.
	pause := m.timing.Renew / 16
	for {
		why, g, err := m.sharedRead(ctx, after)
		switch {
		case err != nil:
			return nil, err
		case why == "":
			g.Wait = wait
			return WithGuard(ctx, g), nil
		case !wait:
			return nil, errors.New(why)
		}
		if err := m.leaseGoneSince(lease); err != nil {
			return nil, err
		}
		if !said {
			m.log.Warn("failsafe: waits to take anything", "why", why)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", why, ctx.Err())
		case <-m.clock.After(pause):
		}
		pause = min(2*pause, m.timing.Renew)
	}
}

// promisedUntil is when the last promise in force that this node (or an
// earlier agent of it) made ends, and to whom; zero when none is.
func (m *Member) promisedUntil() (time.Time, string) {
	if m.fs == nil {
		var until time.Time
		var owner string
		for o, t := range m.kept {
			if t.After(until) {
				until, owner = t, o
			}
		}
		return until, owner
	}
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	until, owner := m.fs.holdUntil, "an earlier agent's owners"
	for o, t := range m.fs.promised {
		if t.After(until) {
			until, owner = t, o
		}
	}
	return until, owner
}

// keepPromises waits until no promise this node made (or an earlier agent
// of it made) is in force: a take through the store before then could take
// an address whose owner answers on failsafe on the strength of that
// promise. It looks again after each wait: a promise may have been made
// meanwhile (mayTake stops them while it runs).
//
// A take under a lease the store said is gone gives up (leaseGoneSince):
// it could not commit, and while it waits it holds up the member's joining
// again (leaseOps), which the owner it promised may be waiting for too,
// its own take held up by a promise to this node (releaseRejoined).
func (m *Member) keepPromises(ctx context.Context, lease LeaseID) error {
	said := ""
	for {
		if err := m.leaseGoneSince(lease); err != nil {
			return err
		}
		m.releaseRejoined(ctx)
		until, owner := m.promisedUntil()
		wait := m.clock.Until(until)
		if wait <= 0 {
			return nil
		}
		if said != owner {
			m.log.Info("failsafe: takes nothing until its promise ends", "owner", owner, "for", wait.Round(time.Millisecond))
			said = owner
		}
		if m.fs != nil {
			// The owner may be back under a new lease before then.
			wait = min(wait, m.timing.Renew/4)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.clock.After(wait):
		}
	}
}

// leaseGoneSince says, as an error, that the store said lease is gone (or
// the member joined again under another since): a take under it waits for
// nothing more.
func (m *Member) leaseGoneSince(lease LeaseID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if lease != 0 && (lease != m.lease || lease == m.goneLease) {
		return fmt.Errorf("%w: a take under it waits no more (the member joins again)", ErrLeaseGone)
	}
	return nil
}

// releaseRejoined ends the promises in force to owners whose agent is back
// in the store under a lease other than the one it asked under, the same
// process of the same boot: that agent fenced when the store said its
// lease was gone (it registers again only after its fence closed the
// answer deadline), and answers since only for what it took again through
// the store. No promise holds it up: without this, after etcd woke from a
// freeze and expired every lease at once, owners that had promised one
// another each waited out its promise before taking its own addresses
// back, every address dark for up to half a TTL. A restarted agent (another
// process) is not released: its dead predecessor's program may answer on
// failsafe until the promises end.
func (m *Member) releaseRejoined(ctx context.Context) {
	fs := m.fs
	if fs == nil {
		return
	}
	now := m.clock.Now()
	fs.mu.Lock()
	holds := false
	for _, until := range fs.promised {
		holds = holds || until.After(now)
	}
	fs.mu.Unlock()
	if !holds {
		return
	}
	// The records as the store has them now, not as the peers were last
	// read: the watch that reads them again may be broken as the store
	// wakes (a leader being elected), and both owners wait, each for the
	// other's record, while the read that would show it waits for a
	// TTL. Read once a poll (keepPromises), only while a promise holds.
	rctx, cancel := context.WithTimeout(ctx, m.timing.Renew/4)
	nodes, _, err := m.l.Nodes(rctx)
	cancel()
	if err != nil {
		m.log.Debug("failsafe: read the nodes to see whether a promised owner is back", "err", err)
		return
	}
	current, _ := m.peersOf(nodes, false)
	now = m.clock.Now()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	released := false
	for o, until := range fs.promised {
		to, ok := fs.promisedTo[o]
		p, live := current[o]
		// A record read since the promise (created later than the one
		// known then: the peers read before may be older than the
		// lease the owner asked under), of the same process, under
		// another lease.
		if !until.After(now) || !ok || !live || to.pid == 0 || to.lease == 0 || p.lease == 0 ||
			p.rev <= to.rev || p.lease == to.lease || p.pid != to.pid || p.boot != to.boot {
			continue
		}
		delete(fs.promised, o)
		delete(fs.promisedTo, o)
		released = true
		m.log.Info("failsafe: released from a promise: its owner's agent is back in the store under a new lease, and answers only for what it takes through it", "owner", o, "was_until", until)
	}
	if released {
		if err := savePromises(fs.cfg.Promises, fs.promised, now); err != nil {
			m.log.Warn("failsafe: keep the promises on disk after a release: the file keeps the released one until it ends", "err", err)
		}
	}
}

// loadPromises reads the promises kept in path (none when there is no
// file, or no path).
func loadPromises(path string) (map[string]time.Time, error) {
	kept := map[string]time.Time{}
	if path == "" {
		return kept, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return kept, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &kept); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return kept, nil
}

// savePromises writes the promises still in force at now to path, whole
// or not at all (a new file renamed over the old). It does not sync: a
// promise must outlive the agent's process (kill -9, a crash), which the
// page cache does, not the host's, whose restart takes longer than any
// promise lasts; an fsync for every answer took over the round's timeout
// on a loaded machine.
func savePromises(path string, promised map[string]time.Time, now time.Time) error {
	if path == "" {
		return nil
	}
	live := map[string]time.Time{}
	for o, until := range promised {
		if until.After(now) {
			live[o] = until.UTC()
		}
	}
	b, err := json.Marshal(live)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".promises-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return err
}
