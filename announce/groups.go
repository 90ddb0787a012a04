package announce

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"

	"github.com/mdlayher/ndp"
	"golang.org/x/sys/unix"
)

// groups keeps one interface's memberships of the solicited-node multicast
// groups of the IPv6 addresses held there. A node receives solicitations for
// an address on that group (RFC 4861), and joining through the IP stack also
// sends the MLD report that snooping switches need: whoever answers, the
// packet sockets or an in-kernel responder, the group must be joined. Groups
// are counted: addresses that share a group (the last 24 bits) join it once.
type groups struct {
	ifname string
	// open opens one more group socket; nil refuses IPv6 addresses.
	open func() (GroupJoiner, error)
	// multi turns all-multicast reception on and off; nil when the
	// interface's IPv6 socket cannot.
	multi AllMultiConn
	log   *slog.Logger

	mu      sync.Mutex
	closed  bool
	joiners []*joiner
	refs    map[netip.Addr]int
	at      map[netip.Addr]*joiner
	// pending groups wait for the background joiner; meanwhile the
	// interface receives all multicast.
	pending    map[netip.Addr]bool
	joining    bool
	joinFailed bool
	allMulti   bool
	wg         sync.WaitGroup
}

func newGroups(ifname string, open func() (GroupJoiner, error), multi AllMultiConn, log *slog.Logger) *groups {
	return &groups{
		ifname: ifname, open: open, multi: multi, log: log,
		refs: make(map[netip.Addr]int), at: make(map[netip.Addr]*joiner), pending: make(map[netip.Addr]bool),
	}
}

// syncJoins is the most new groups a join waits for. Each costs the kernel
// about 0.1 ms (and a report on the wire), so a larger batch turns on
// all-multicast reception at once, which lets every solicitation in, and
// joins its groups in the background.
const syncJoins = 64

// groupsPerSocket bounds the groups one ICMPv6 socket joins: the kernel
// charges each membership to the socket's option memory (net.core.optmem_max,
// 128 KiB here, room for about 2,000), so 10,000 IPv6 claims need several.
const groupsPerSocket = 1000

// joiner is one group socket and how many groups it has joined.
type joiner struct {
	GroupJoiner
	n int
}

// join joins the groups of the IPv6 addresses among addrs: all of them or,
// on error, none. Each address counts once more on its group.
func (g *groups) join(addrs []netip.Addr) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return net.ErrClosed
	}
	var newGroups int
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		if !a.Is6() {
			continue
		}
		gr, err := ndp.SolicitedNodeMulticast(a)
		if err != nil {
			return fmt.Errorf("solicited-node group of %s: %w", a, err)
		}
		if g.refs[gr] == 0 && !seen[gr] {
			seen[gr] = true
			newGroups++
		}
	}
	async := newGroups > syncJoins || len(g.pending) > 0
	if async {
		if err := g.setAllMultiLocked(true); err != nil {
			g.log.Warn("cannot receive all multicast: joining the groups before answering", "err", err)
			async = false
		}
	}
	var done []netip.Addr
	for _, a := range addrs {
		if !a.Is6() {
			continue
		}
		if err := g.joinLocked(a, async); err != nil {
			for _, j := range done {
				_ = g.leaveLocked(j)
			}
			return err
		}
		done = append(done, a)
	}
	if async && !g.joining {
		g.joining = true
		g.wg.Add(1)
		go g.joinPending()
	}
	return nil
}

func (g *groups) joinLocked(addr netip.Addr, async bool) error {
	gr, err := ndp.SolicitedNodeMulticast(addr)
	if err != nil {
		return fmt.Errorf("solicited-node group of %s: %w", addr, err)
	}
	if g.refs[gr] > 0 {
		g.refs[gr]++
		return nil
	}
	if async {
		g.refs[gr] = 1
		g.pending[gr] = true
		return nil
	}
	if err := g.joinGroupLocked(gr); err != nil {
		return err
	}
	g.refs[gr] = 1
	return nil
}

// joinGroupLocked joins gr on a socket with room for it.
func (g *groups) joinGroupLocked(gr netip.Addr) error {
	var j *joiner
	for _, c := range g.joiners {
		if c.n < groupsPerSocket {
			j = c
			break
		}
	}
	if j == nil {
		if g.open == nil {
			return fmt.Errorf("join %s on %s: this link cannot join IPv6 multicast groups", gr, g.ifname)
		}
		gj, err := g.open()
		if err != nil {
			return err
		}
		j = &joiner{GroupJoiner: gj}
		g.joiners = append(g.joiners, j)
	}
	if err := j.JoinGroup(gr); err != nil {
		return fmt.Errorf("join %s on %s: %w", gr, g.ifname, err)
	}
	j.n++
	g.at[gr] = j
	return nil
}

// joinPending joins the pending groups one at a time, letting join and
// leave in between, then turns all-multicast reception off again unless a
// join failed.
func (g *groups) joinPending() {
	defer g.wg.Done()
	// Background work: thousands of joins are seconds of system time, and
	// all-multicast reception covers the groups meanwhile. At the lowest
	// priority they yield the CPU to the answers and the gratuitous sender.
	// The thread is never unlocked, so it ends with this goroutine instead
	// of going back to the runtime at that priority.
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
	for {
		g.mu.Lock()
		if g.closed {
			g.joining = false
			g.mu.Unlock()
			return
		}
		var gr netip.Addr
		for p := range g.pending {
			gr = p
			break
		}
		if !gr.IsValid() {
			if !g.joinFailed {
				if err := g.setAllMultiLocked(false); err != nil {
					g.log.Warn("cannot turn all-multicast reception off", "err", err)
				}
			}
			g.joining = false
			g.mu.Unlock()
			return
		}
		delete(g.pending, gr)
		if err := g.joinGroupLocked(gr); err != nil {
			// All-multicast reception stays on, so the group's
			// solicitations still arrive.
			g.joinFailed = true
			g.log.Warn("joining a solicited-node group failed: receiving all multicast instead", "group", gr, "err", err)
		}
		g.mu.Unlock()
	}
}

// AllMultiConn is a FrameConn that can make its interface receive every
// multicast frame.
type AllMultiConn interface {
	SetAllMulti(on bool) error
}

func (g *groups) setAllMultiLocked(on bool) error {
	if g.allMulti == on {
		return nil
	}
	if g.multi == nil {
		return errors.New("the IPv6 socket cannot receive all multicast")
	}
	if err := g.multi.SetAllMulti(on); err != nil {
		return err
	}
	g.allMulti = on
	return nil
}

// leave counts each IPv6 address among addrs once less on its group, and
// leaves the groups no address needs any more.
func (g *groups) leave(addrs []netip.Addr) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for _, a := range addrs {
		if a.Is6() {
			errs = append(errs, g.leaveLocked(a))
		}
	}
	return errors.Join(errs...)
}

func (g *groups) leaveLocked(addr netip.Addr) error {
	gr, err := ndp.SolicitedNodeMulticast(addr)
	if err != nil {
		return fmt.Errorf("solicited-node group of %s: %w", addr, err)
	}
	switch g.refs[gr] {
	case 0:
		return nil
	case 1:
		delete(g.refs, gr)
		if g.pending[gr] {
			delete(g.pending, gr) // never joined
			return nil
		}
		j := g.at[gr]
		delete(g.at, gr)
		if j == nil {
			return nil // its join failed
		}
		j.n--
		if err := j.LeaveGroup(gr); err != nil {
			return fmt.Errorf("leave %s on %s: %w", gr, g.ifname, err)
		}
	default:
		g.refs[gr]--
	}
	return nil
}

// counts returns the groups and how many held addresses share each.
func (g *groups) counts() map[netip.Addr]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[netip.Addr]int, len(g.refs))
	for gr, n := range g.refs {
		out[gr] = n
	}
	return out
}

// close leaves every group (closing a socket leaves its groups) and waits
// for the background joiner.
func (g *groups) close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	var errs []error
	for _, j := range g.joiners {
		errs = append(errs, j.Close())
	}
	g.joiners = nil
	g.refs = map[netip.Addr]int{}
	g.at = map[netip.Addr]*joiner{}
	g.pending = map[netip.Addr]bool{}
	g.mu.Unlock()
	g.wg.Wait()
	return errors.Join(errs...)
}
