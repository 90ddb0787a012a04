package announce

import (
	"context"
	"net"
	"net/netip"
	"slices"
)

// The kernel answers ARP requests and neighbor solicitations for the
// addresses assigned to an interface (with --assign, or put there by the
// operator). A port that answered for those too would double every answer,
// so the engine decides, claim by claim, who answers: the port, or the
// kernel, with the port silent. vip announces both alike.

// holdOp has p answer for the claims, all or none, except those whose
// address the kernel has on the interface. The caller holds e.op.
func (e *Engine) holdOp(p Port, claims []*claimState) error {
	kernel := e.kernel(p.Name())
	addrs := make([]netip.Addr, 0, len(claims))
	var counted []netip.Addr
	level := claimLogLevel(len(claims))
	for _, cs := range claims {
		if kernel[cs.claim.Addr] {
			e.log.Log(context.Background(), level, "address is assigned to the interface: the kernel answers for it, vip only announces it",
				"addr", cs.claim.Addr, "interface", p.Name())
			counted = append(counted, cs.claim.Addr)
			continue
		}
		addrs = append(addrs, cs.claim.Addr)
	}
	if err := p.Hold(addrs...); err != nil {
		return err
	}
	e.countOp(p, counted)
	e.mu.Lock()
	for _, cs := range claims {
		cs.answering = !kernel[cs.claim.Addr]
	}
	e.mu.Unlock()
	return nil
}

// silenceOp has p stop answering for the claims among claims whose address
// is in addrs (the kernel has them again); their answers so far stay
// counted. The caller holds e.op.
func (e *Engine) silenceOp(p *portRef, claims []*claimState, addrs []netip.Addr) {
	var drop []netip.Addr
	e.mu.Lock()
	for _, cs := range claims {
		if cs.port == p && cs.answering && slices.Contains(addrs, cs.claim.Addr) {
			e.answeredBefore[cs.claim.Addr] += p.Answered(cs.claim.Addr)
			cs.answering = false
			drop = append(drop, cs.claim.Addr)
		}
	}
	e.mu.Unlock()
	if err := p.LetGo(drop...); err != nil {
		e.log.Warn("cannot stop answering for addresses the kernel answers for again", "interface", p.Name(), "err", err)
	}
	e.countOp(p, drop)
}

// countOp has p count the traffic for addresses the kernel answers for,
// where its responder counts traffic; a failure costs only the counts.
func (e *Engine) countOp(p Port, addrs []netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	if err := p.Count(addrs...); err != nil {
		e.log.Warn("cannot count the traffic for addresses the kernel answers for", "interface", p.Name(), "err", err)
	}
}

// kernel returns the addresses the kernel has on the interface.
func (e *Engine) kernel(ifname string) map[netip.Addr]bool {
	if e.cfg.Kernel == nil {
		return nil
	}
	return e.cfg.Kernel(ifname)
}

// InterfaceAddrs returns the addresses configured on the named interface:
// EngineConfig.Kernel for a caller that sets its own Open.
func InterfaceAddrs(ifname string) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return out
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return out
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out[ip.Unmap()] = true
			}
		}
	}
	return out
}
