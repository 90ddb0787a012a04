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
// Sockets are opened and closed, and addresses put back, outside the
// engine's memory lock (see Engine).
func (e *Engine) InterfaceChanged(c InterfaceChange) {
	if c.Master != "" {
		c.Up = false
	}
	e.op.Lock()
	defer e.op.Unlock()
	claims := e.claimsOn(c.Name)
	if len(claims) == 0 {
		return
	}
	p := e.ports[c.Name]
	switch {
	case c.Deleted:
		if p != nil {
			e.closePortOp(p, claims)
		}
		e.interfaceEvent(c, len(claims), "deleted: its claims wait for an interface of that name")
	case p != nil && (p.Index() != c.Index || (len(c.MAC) > 0 && !sameMAC(p.MAC(), c.MAC))):
		e.closePortOp(p, claims)
		e.interfaceEvent(c, len(claims), "changed (new MAC address or new interface): claims re-armed with the new MAC")
		e.reopenOp(c, claims)
	case p == nil:
		e.interfaceEvent(c, len(claims), "returned")
		e.reopenOp(c, claims)
	case p.up != c.Up && c.Up:
		e.interfaceUpOp(c, p, claims)
	case p.up != c.Up:
		e.interfaceDownOp(c, p, claims)
	}
	e.attachWaitingOp(c.Name)
}

// claimsOn returns the claims on the interface, ordered by address.
func (e *Engine) claimsOn(name string) []*claimState {
	e.mu.Lock()
	var claims []*claimState
	for _, cs := range e.claims {
		if cs.claim.Interface == name {
			claims = append(claims, cs)
		}
	}
	e.mu.Unlock()
	slices.SortFunc(claims, func(x, y *claimState) int { return x.claim.Addr.Compare(y.claim.Addr) })
	return claims
}

// interfaceEvent logs and publishes a change of an interface with n
// claims: a warning when it became a master's port, as nothing answers for
// its claims then.
func (e *Engine) interfaceEvent(c InterfaceChange, n int, msg string) {
	level := slog.LevelInfo
	if c.Master != "" {
		level = slog.LevelWarn
	}
	e.log.Log(context.Background(), level, "interface change", "interface", c.Name, "change", msg, "claims", n)
	e.publish(Event{Kind: EventInterface, Interface: c.Name, MAC: c.MAC.String(), Message: msg})
}

// interfaceUpOp resumes the claims of an interface that came up: the port
// answers again for those it had stopped answering for, addresses the
// kernel dropped go back, and the bursts re-arm. The caller holds e.op.
func (e *Engine) interfaceUpOp(c InterfaceChange, p *portRef, claims []*claimState) {
	e.mu.Lock()
	p.up = true
	var resume []*claimState
	for _, cs := range claims {
		if cs.port == p && !cs.answering {
			resume = append(resume, cs)
		}
	}
	e.mu.Unlock()
	e.interfaceEvent(c, len(claims), "up: bursts re-armed")
	if len(resume) > 0 {
		// Silenced while a port of a master (or the kernel's): the
		// port answers again for those the kernel does not have.
		if err := e.holdOp(p, resume); err != nil {
			e.log.Warn("cannot answer again for the claims on the interface", "interface", c.Name, "err", err)
		}
	}
	if added := e.reassignOp(claims); len(added) > 0 {
		// The port answered for these while they were not assigned
		// (the kernel drops IPv6 addresses with the link); now the
		// kernel answers for them again.
		e.silenceOp(p, claims, added)
	}
	e.mu.Lock()
	for _, cs := range claims {
		if cs.port == p {
			e.armWithProbe(cs)
		}
	}
	e.mu.Unlock()
}

// interfaceDownOp parks the claims of an interface that went down, or
// became a master's port: their bursts and probes stop, and they wait.
// The caller holds e.op.
func (e *Engine) interfaceDownOp(c InterfaceChange, p *portRef, claims []*claimState) {
	msg := "down: claims wait for it"
	if c.Master != "" {
		msg = "became " + c.Master + ", which receives its frames: its claims wait until it leaves it (claim on the master instead)"
	}
	e.interfaceEvent(c, len(claims), msg)
	if c.Master != "" {
		// An in-kernel responder on tc ingress or XDP sees the frames
		// before the master takes them, and would go on answering:
		// nothing answers for these claims now.
		held := make([]netip.Addr, len(claims))
		for i, cs := range claims {
			held[i] = cs.claim.Addr
		}
		e.silenceOp(p, claims, held)
	}
	e.mu.Lock()
	p.up = false
	for _, cs := range claims {
		if cs.port == p {
			e.sched.Cancel(cs.key())
			e.sched.Cancel(cs.probeKey())
		}
	}
	e.mu.Unlock()
}

// attachWaitingOp puts claims that wait on an interface (adopted while it
// could not be opened) on its port once the port is open. The caller holds
// e.op.
func (e *Engine) attachWaitingOp(name string) {
	p := e.ports[name]
	if p == nil {
		return
	}
	var waiting []*claimState
	e.mu.Lock()
	for _, cs := range e.claims {
		if cs.claim.Interface == name && cs.port == nil {
			waiting = append(waiting, cs)
		}
	}
	e.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	if err := e.holdOp(p, waiting); err != nil {
		e.log.Warn("cannot answer for waiting claims", "interface", name, "err", err)
		return
	}
	p.refs += len(waiting)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, cs := range waiting {
		cs.port = p
		e.syncSendLocked(cs)
		if p.up {
			e.armWithProbe(cs)
		}
	}
}

// closePortOp ends the bursts of claims on p and closes it; the claims keep
// their answer counts and wait. The caller holds e.op.
func (e *Engine) closePortOp(p *portRef, claims []*claimState) {
	e.mu.Lock()
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
	e.mu.Unlock()
	delete(e.ports, p.Name())
	if err := p.Close(); err != nil {
		e.log.Warn("close interface", "interface", p.Name(), "err", err)
	}
}

// reopenOp opens the interface again for waiting claims and, if it is up,
// re-arms their bursts. The caller holds e.op.
func (e *Engine) reopenOp(c InterfaceChange, claims []*claimState) {
	p, err := e.cfg.Open(c.Name)
	if err != nil {
		e.log.Warn("interface is back but cannot be opened: its claims keep waiting", "interface", c.Name, "err", err)
		return
	}
	// The addresses go back first, so that they count as the kernel's,
	// which answers for them: one answer per request.
	if c.Up {
		e.reassignOp(claims)
	}
	if err := e.holdOp(p, claims); err != nil {
		_ = p.Close()
		e.log.Warn("interface is back but vip cannot answer on it: its claims keep waiting", "interface", c.Name, "err", err)
		return
	}
	ref := &portRef{Port: p, refs: len(claims), up: c.Up}
	e.ports[c.Name] = ref
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, cs := range claims {
		cs.port = ref
		e.syncSendLocked(cs)
		if c.Up {
			e.armWithProbe(cs)
		}
	}
}

// reassignOp puts back the addresses of assigned claims: the kernel drops
// IPv6 addresses when a link goes down, and every address when its
// interface is deleted. It returns the addresses it added. The caller holds
// e.op.
func (e *Engine) reassignOp(claims []*claimState) (added []netip.Addr) {
	if e.cfg.Assigner == nil {
		return nil
	}
	var changed []*claimState
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
			changed = append(changed, cs)
		}
		if ok {
			e.log.Info("added the address back to its interface", "addr", cs.claim.Addr, "interface", cs.claim.Interface)
			added = append(added, cs.claim.Addr)
		}
	}
	if len(changed) == 0 {
		return added
	}
	records := make([]Claim, len(changed))
	e.mu.Lock()
	for i, cs := range changed {
		cs.claim.AddedAddress = true
		records[i] = cs.claim
	}
	e.mu.Unlock()
	if err := e.cfg.Book.Put(context.Background(), records...); err != nil {
		e.log.Warn("record re-added addresses", "err", err)
	}
	return added
}
