package announce

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
)

// InterfaceChanged tells the engine that an interface changed. Claims on an
// interface that goes down or away wait; when it comes back up, or changes
// MAC address, their bursts re-arm so the segment learns where they are.
func (e *Engine) InterfaceChanged(c InterfaceChange) {
	if c.Port != "" {
		c.Up = false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var claims []*claimState
	for _, cs := range e.claims {
		if cs.claim.Interface == c.Name {
			claims = append(claims, cs)
		}
	}
	if len(claims) == 0 {
		return
	}
	slices.SortFunc(claims, func(x, y *claimState) int { return x.claim.Addr.Compare(y.claim.Addr) })
	p := e.ports[c.Name]
	level := slog.LevelInfo
	if c.Port != "" {
		level = slog.LevelWarn // nothing answers for these claims now
	}
	event := func(msg string) {
		e.log.Log(context.Background(), level, "interface change", "interface", c.Name, "change", msg, "claims", len(claims))
		e.publish(Event{Kind: EventInterface, Interface: c.Name, MAC: c.MAC.String(), Message: msg})
	}
	switch {
	case c.Deleted:
		if p != nil {
			e.closePortLocked(p, claims)
		}
		event("deleted: its claims wait for an interface of that name")
	case p != nil && (p.Index() != c.Index || (len(c.MAC) > 0 && !sameMAC(p.MAC(), c.MAC))):
		e.closePortLocked(p, claims)
		event("changed (new MAC address or new interface): claims re-armed with the new MAC")
		e.reopenLocked(c, claims)
	case p == nil:
		event("returned")
		e.reopenLocked(c, claims)
	case p.up != c.Up:
		p.up = c.Up
		if c.Up {
			event("up: bursts re-armed")
			if added := e.reassignLocked(claims); len(added) > 0 {
				// The port answered for these while they were not
				// assigned (the kernel drops IPv6 addresses with the
				// link); now the kernel answers for them again.
				e.silenceLocked(p, claims, added)
			}
			for _, cs := range claims {
				if cs.port == p {
					e.armWithProbe(cs)
				}
			}
		} else {
			msg := "down: claims wait for it"
			if c.Port != "" {
				msg = "became " + c.Port + ", which receives its frames: its claims wait until it leaves it (claim on the master instead)"
			}
			event(msg)
			for _, cs := range claims {
				if cs.port == p {
					e.sched.Cancel(cs.key())
					e.sched.Cancel(cs.probeKey())
				}
			}
		}
	}
	e.attachWaitingLocked(c.Name)
}

// attachWaitingLocked puts claims that wait on an interface (adopted while
// it could not be opened) on its port once the port is open.
func (e *Engine) attachWaitingLocked(name string) {
	p := e.ports[name]
	if p == nil {
		return
	}
	var waiting []*claimState
	for _, cs := range e.claims {
		if cs.claim.Interface == name && cs.port == nil {
			waiting = append(waiting, cs)
		}
	}
	if len(waiting) == 0 {
		return
	}
	if err := e.holdLocked(p, waiting); err != nil {
		e.log.Warn("cannot answer for waiting claims", "interface", name, "err", err)
		return
	}
	p.refs += len(waiting)
	for _, cs := range waiting {
		cs.port = p
		e.syncSendLocked(cs)
		if p.up {
			e.armWithProbe(cs)
		}
	}
}

// closePortLocked ends the bursts of claims on p and closes it; the claims
// keep their answer counts and wait.
func (e *Engine) closePortLocked(p *portRef, claims []*claimState) {
	for _, cs := range claims {
		if cs.port != p {
			continue
		}
		e.sched.Cancel(cs.key())
		e.sched.Cancel(cs.probeKey())
		e.answeredBefore[cs.claim.Addr] += p.Answered(cs.claim.Addr)
		cs.port, cs.answering = nil, false
		e.syncSendLocked(cs)
	}
	if err := p.Close(); err != nil {
		e.log.Warn("close interface", "interface", p.Name(), "err", err)
	}
	delete(e.ports, p.Name())
}

// reopenLocked opens the interface again for waiting claims and, if it is
// up, re-arms their bursts.
func (e *Engine) reopenLocked(c InterfaceChange, claims []*claimState) {
	p, err := e.cfg.Open(c.Name)
	if err != nil {
		e.log.Warn("interface is back but cannot be opened: its claims keep waiting", "interface", c.Name, "err", err)
		return
	}
	// The addresses go back first, so that they count as the kernel's,
	// which answers for them: one answer per request.
	if c.Up {
		e.reassignLocked(claims)
	}
	if err := e.holdLocked(p, claims); err != nil {
		_ = p.Close()
		e.log.Warn("interface is back but vip cannot answer on it: its claims keep waiting", "interface", c.Name, "err", err)
		return
	}
	ref := &portRef{Port: p, refs: len(claims), up: c.Up}
	e.ports[c.Name] = ref
	for _, cs := range claims {
		cs.port = ref
		e.syncSendLocked(cs)
		if c.Up {
			e.armWithProbe(cs)
		}
	}
}

// reassignLocked puts back the addresses of assigned claims: the kernel
// drops IPv6 addresses when a link goes down, and every address when its
// interface is deleted. It returns the addresses it added.
func (e *Engine) reassignLocked(claims []*claimState) (added []netip.Addr) {
	if e.cfg.Assigner == nil {
		return nil
	}
	var changed []Claim
	for _, cs := range claims {
		if !cs.claim.Options.Assign {
			continue
		}
		ok, err := e.cfg.Assigner.Add(cs.claim.Interface, cs.claim.Addr)
		if err != nil {
			e.log.Warn("cannot add the address back to its interface", "addr", cs.claim.Addr, "interface", cs.claim.Interface, "err", err)
			continue
		}
		if ok && !cs.claim.AddedAddress {
			cs.claim.AddedAddress = true
			changed = append(changed, cs.claim)
		}
		if ok {
			e.log.Info("added the address back to its interface", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
			added = append(added, cs.claim.Addr)
		}
	}
	if len(changed) > 0 {
		if err := e.cfg.Book.Put(context.Background(), changed...); err != nil {
			e.log.Warn("record re-added addresses", "err", err)
		}
	}
	return added
}
