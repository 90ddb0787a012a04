package bpfresp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/wire"
)

// Hook is where the program runs on the interface.
type Hook uint8

const (
	// TCX is tc ingress through tcx (Linux 6.6): it shares the hook with
	// other programs, attaching reconfigures nothing, and packet taps
	// (tcpdump) see requests and answers. The default.
	TCX Hook = iota
	// XDPGeneric is XDP in the kernel's generic (skb) mode: any driver,
	// one program per interface, and taps see neither the requests
	// answered nor the answers.
	XDPGeneric
	// XDPNative is XDP in the driver: the fastest on drivers that have
	// it, but attaching may reset the device (a link flap), one program
	// owns the hook, and taps see nothing answered.
	XDPNative
)

var hookNames = [...]string{TCX: "tcx", XDPGeneric: "xdp-generic", XDPNative: "xdp-native"}

func (h Hook) String() string {
	if int(h) < len(hookNames) {
		return hookNames[h]
	}
	return fmt.Sprintf("hook(%d)", h)
}

// ParseHook reads a hook's name, as String writes it.
func ParseHook(s string) (Hook, error) {
	for h, name := range hookNames {
		if s == name {
			return Hook(h), nil
		}
	}
	return 0, fmt.Errorf("unknown eBPF hook %q: use tcx, xdp-generic or xdp-native", s)
}

// Kind is what Responder.Kind says: the responder's kind as status shows it.
const Kind = "ebpf"

// The maps' keys and values are bpf2go's types of responder.c's structs
// (responder_bpfel.go): responderHeldKey and responderHeldValue of held,
// responderCounters of counters (one CPU's counts), responderAskerKey and
// responderAskerValue of askers. Their layout is the object's, so a change
// to a C struct reaches Go with go generate, not by hand.

// heldAnswer and heldKernel are HELD_ANSWER and HELD_KERNEL of
// responder.c.
const (
	heldAnswer = 1
	heldKernel = 2
	heldLinger = 4
)

// Families of responderHeldKey.
const (
	familyIPv4 = 4
	familyIPv6 = 6
)

// Responder answers ARP requests and neighbor solicitations for the
// addresses it holds on one interface, in the kernel: an eBPF program on
// the interface's tcx ingress or XDP hook, and maps of the held addresses
// and their counters. It implements announce.KernelResponder. Its methods
// are safe to call from several goroutines.
type Responder struct {
	ifname  string
	ifindex int
	hook    Hook
	log     *slog.Logger

	maps responderMaps
	prog *ebpf.Program // the hook's
	link link.Link
	cpus int // possible CPUs, for the per-CPU counters

	mu    sync.Mutex // serialises map updates, SetMAC and Close
	mac   wire.MAC
	addrs map[netip.Addr]bool
	// counted are the addresses whose traffic is counted but not
	// answered (Count): the kernel owns them.
	counted map[netip.Addr]bool
	// linger is how long a dropped address lingers (SetLinger), and
	// lingering the addresses that do, with their times.
	linger    time.Duration
	lingering map[netip.Addr]lingerTimes
	// expiry ends the lingers, at expiryAt (the earliest end).
	expiry   *time.Timer
	expiryAt time.Time
	closed   bool

	// dlMu guards the deadline's writes and reads against Close, apart
	// from mu: a renewal's write of the deadline must never wait behind
	// a claim of thousands of addresses.
	dlMu     sync.Mutex
	dlClosed bool
}

// Open loads the responder and attaches it to interface ifname (index
// ifindex, in the calling thread's network namespace) on hook, answering
// from mac. It first removes whatever vip program an earlier process left
// on the interface, so that exactly one answers. An error that says the
// machine cannot run it wraps ErrUnavailable.
func Open(ifname string, ifindex int, mac net.HardwareAddr, hook Hook, log *slog.Logger) (*Responder, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if int(hook) >= len(hookNames) {
		return nil, fmt.Errorf("open the eBPF responder on %s: unknown hook %d", ifname, hook)
	}
	me, ok := wire.MACOf(mac)
	if !ok {
		return nil, unavailable(nil, "interface %s has no Ethernet address: the eBPF responder answers only on Ethernet", ifname)
	}
	liftMemlock()
	if err := cleanup(ifname, ifindex, log); err != nil {
		return nil, err
	}
	r, err := loadDetached(ifname, ifindex, me, hook, log)
	if err != nil {
		return nil, err
	}
	if r.link, err = attach(r.prog, ifindex, hook); err != nil {
		r.free()
		return nil, classify(err, ifname, hook, "attach the eBPF responder")
	}
	log.Debug("eBPF responder attached", "interface", ifname, "hook", hook.String())
	return r, nil
}

// loadDetached loads the program and its maps without attaching them:
// Open attaches, tests run the program on frames of their own.
func loadDetached(ifname string, ifindex int, me wire.MAC, hook Hook, log *slog.Logger) (*Responder, error) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("count the CPUs for the eBPF responder on %s: %w", ifname, err)
	}
	maps, prog, err := load(hook)
	if err != nil {
		return nil, classify(err, ifname, hook, "load the eBPF responder")
	}
	return &Responder{
		ifname: ifname, ifindex: ifindex, hook: hook, log: log, cpus: cpus,
		maps: maps, prog: prog,
		mac: me, addrs: map[netip.Addr]bool{}, counted: map[netip.Addr]bool{},
		lingering: map[netip.Addr]lingerTimes{},
	}, nil
}

// tcxObjects and xdpObjects are bpf2go's responderObjects with one hook's
// program: its loader loads only what the struct names, so the other
// hook's program is neither verified nor loaded.
type tcxObjects struct {
	responderMaps
	Prog *ebpf.Program `ebpf:"vip_tc"`
}

type xdpObjects struct {
	responderMaps
	Prog *ebpf.Program `ebpf:"vip_xdp"`
}

// load loads the maps and the one program hook runs.
func load(hook Hook) (responderMaps, *ebpf.Program, error) {
	if hook == TCX {
		var objs tcxObjects
		err := loadResponderObjects(&objs, nil)
		return objs.responderMaps, objs.Prog, err
	}
	var objs xdpObjects
	err := loadResponderObjects(&objs, nil)
	return objs.responderMaps, objs.Prog, err
}

// free closes the program and the maps.
func (r *Responder) free() {
	r.prog.Close()
	r.maps.Close()
}

func attach(prog *ebpf.Program, ifindex int, hook Hook) (link.Link, error) {
	switch hook {
	case TCX:
		return link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXIngress})
	case XDPNative:
		return link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPDriverMode})
	default:
		return link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPGenericMode})
	}
}

// Hook returns the hook the program runs on, as ParseHook reads it.
func (r *Responder) Hook() string { return r.hook.String() }

// Kind returns "ebpf", the responder's kind as status shows it.
func (r *Responder) Kind() string { return Kind }

func (r *Responder) key(a netip.Addr) responderHeldKey {
	k := responderHeldKey{Ifindex: uint32(r.ifindex), Family: familyIPv6, Addr: a.As16()}
	if a.Is4() {
		k.Family = familyIPv4
	}
	return k
}

// Hold starts answering for addrs, all or none. An address already held
// keeps its counters, and so does one counted (Count) until now. The maps
// are written in batches: a claim of 10,000 addresses is a few system
// calls, not 20,000.
func (r *Responder) Hold(addrs ...netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return net.ErrClosed
	}
	var fresh []netip.Addr
	seen := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		if !a.IsValid() {
			return fmt.Errorf("hold an invalid address on %s: give an IPv4 or IPv6 address", r.ifname)
		}
		if r.addrs[a] || seen[a] {
			continue
		}
		seen[a] = true
		fresh = append(fresh, a)
	}
	if len(fresh) == 0 {
		return nil
	}
	r.makeRoomLocked(len(fresh))
	if err := r.putLocked(fresh); err != nil {
		what := fresh[0].String()
		if len(fresh) > 1 {
			what = fmt.Sprintf("%d addresses", len(fresh))
		}
		return fmt.Errorf("hold %s on %s: %w", what, r.ifname, err)
	}
	for _, a := range fresh {
		r.addrs[a] = true
		delete(r.counted, a)
	}
	r.endLingerLocked(fresh)
	return nil
}

// putLocked adds the counters of addrs (but for those counted already),
// then addrs themselves, so that the program never finds a held address
// without its counters. On failure it takes out what it added.
func (r *Responder) putLocked(addrs []netip.Addr) error {
	var ckeys []responderHeldKey
	keys := make([]responderHeldKey, len(addrs))
	vals := make([]responderHeldValue, len(addrs))
	for i, a := range addrs {
		keys[i] = r.key(a)
		vals[i] = responderHeldValue{Mac: r.mac, Flags: heldAnswer}
		if !r.counted[a] {
			ckeys = append(ckeys, keys[i])
		}
	}
	n, err := r.zeroCounters(ckeys)
	if err != nil {
		_, _ = batchDelete(r.maps.Counters, ckeys[:n])
		return err
	}
	if n, err := batchUpdate(r.maps.Held, keys, vals, 1); err != nil {
		_, _ = batchDelete(r.maps.Held, keys[:n])
		_, _ = batchDelete(r.maps.Counters, ckeys)
		return err
	}
	return nil
}

// LetGo stops answering for addrs. Letting go of an address not held is a no-op.
func (r *Responder) LetGo(addrs ...netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	return r.dropLocked(addrs)
}

func (r *Responder) dropLocked(addrs []netip.Addr) error {
	var responderHeldKeys, counterKeys, kernelKeys []responderHeldKey
	var heldAddrs []netip.Addr
	var uncounted []netip.Addr
	gone := map[netip.Addr]bool{}
	for _, a := range addrs {
		switch {
		case r.counted[a]:
			// Counted only: no answer to stop, only its mark as the
			// kernel's and its counters.
			counterKeys = append(counterKeys, r.key(a))
			kernelKeys = append(kernelKeys, r.key(a))
			uncounted = append(uncounted, a)
		case r.addrs[a] && !gone[a]:
			responderHeldKeys = append(responderHeldKeys, r.key(a))
			heldAddrs = append(heldAddrs, a)
			gone[a] = true
		}
	}
	if r.linger > 0 {
		return r.lingerLocked(heldAddrs, uncounted, gone)
	}
	var errs []error
	// The held entries first, so that the program stops answering before
	// the counters go; those it went past are no longer held, whatever
	// became of the rest.
	n, err := batchDelete(r.maps.Held, responderHeldKeys)
	if err != nil {
		errs = append(errs, fmt.Errorf("drop %d addresses on %s: %w", len(responderHeldKeys)-n, r.ifname, err))
		for _, a := range heldAddrs[n:] {
			delete(gone, a)
		}
	}
	for _, a := range heldAddrs[:n] {
		delete(r.addrs, a)
	}
	if _, err := batchDelete(r.maps.Held, kernelKeys); err != nil {
		errs = append(errs, fmt.Errorf("stop counting %d addresses on %s: %w", len(kernelKeys), r.ifname, err))
	}
	counterKeys = append(counterKeys, responderHeldKeys[:n]...)
	if _, err := batchDelete(r.maps.Counters, counterKeys); err != nil {
		errs = append(errs, fmt.Errorf("drop the counters of %d addresses on %s: %w", len(counterKeys), r.ifname, err))
	}
	for _, a := range uncounted {
		delete(r.counted, a)
	}
	if err := r.forgetAskersLocked(gone); err != nil {
		r.log.Warn("the askers of released addresses stay remembered", "err", err)
	}
	return errors.Join(errs...)
}

// SetMAC answers from mac from now on, for every held address: the
// interface's address changed.
func (r *Responder) SetMAC(mac net.HardwareAddr) error {
	me, ok := wire.MACOf(mac)
	if !ok {
		return fmt.Errorf("answer from %v on %s: give a 6-byte Ethernet address", mac, r.ifname)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return net.ErrClosed
	}
	r.mac = me
	var errs []error
	for a := range r.addrs {
		if err := r.maps.Held.Update(r.key(a), responderHeldValue{Mac: me, Flags: heldAnswer}, ebpf.UpdateExist); err != nil {
			errs = append(errs, fmt.Errorf("answer for %s from %s on %s: %w", a, mac, r.ifname, err))
		}
	}
	for a := range r.counted {
		if err := r.maps.Held.Update(r.key(a), responderHeldValue{Mac: me, Flags: heldKernel}, ebpf.UpdateExist); err != nil {
			errs = append(errs, fmt.Errorf("count for %s from %s on %s: %w", a, mac, r.ifname, err))
		}
	}
	for a := range r.lingering {
		if err := r.maps.Held.Update(r.key(a), responderHeldValue{Mac: me, Flags: heldLinger}, ebpf.UpdateExist); err != nil {
			errs = append(errs, fmt.Errorf("count what is sent to %s for %s on %s: %w", mac, a, r.ifname, err))
		}
	}
	return errors.Join(errs...)
}

// sum returns a's counters added over the CPUs, zero when a is not held.
func (r *Responder) sum(a netip.Addr) responderCounters {
	var per []responderCounters
	var c responderCounters
	if err := r.maps.Counters.Lookup(r.key(a), &per); err != nil {
		return c
	}
	for _, p := range per {
		c.Answered += p.Answered
		c.Packets += p.Packets
		c.Bytes += p.Bytes
	}
	return c
}

// Answered returns how many requests for addr were answered while held.
func (r *Responder) Answered(addr netip.Addr) uint64 { return r.sum(addr).Answered }

// Traffic returns how many packets, and bytes of frames, arrived with addr
// as their IPv4 or IPv6 destination while it was held: all traffic in on
// the tcx hook, what the hook saw on XDP.
func (r *Responder) Traffic(addr netip.Addr) (packets, bytes uint64) {
	c := r.sum(addr)
	return c.Packets, c.Bytes
}

// Count counts the traffic arriving for addrs without answering for them:
// addresses the kernel owns, which it answers itself. The program counts
// every packet for an address with counters, and answers only those in
// its held map. LetGo stops the counting. A held address is counted
// already; counting one twice is a no-op.
func (r *Responder) Count(addrs ...netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return net.ErrClosed
	}
	var fresh []netip.Addr
	var keys []responderHeldKey
	seen := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		if !a.IsValid() || r.addrs[a] || r.counted[a] || seen[a] {
			continue
		}
		seen[a] = true
		fresh = append(fresh, a)
		keys = append(keys, r.key(a))
	}
	r.makeRoomLocked(len(fresh))
	n, err := r.zeroCounters(keys)
	if err != nil {
		_, _ = batchDelete(r.maps.Counters, keys[:n])
		return fmt.Errorf("count the traffic of %d addresses on %s: %w", len(fresh), r.ifname, err)
	}
	// Marked as the kernel's, so that past the deadline the program
	// drops their requests and the kernel falls silent too.
	vals := make([]responderHeldValue, len(keys))
	for i := range vals {
		vals[i] = responderHeldValue{Mac: r.mac, Flags: heldKernel}
	}
	if n, err := batchUpdate(r.maps.Held, keys, vals, 1); err != nil {
		_, _ = batchDelete(r.maps.Held, keys[:n])
		_, _ = batchDelete(r.maps.Counters, keys)
		return fmt.Errorf("count the traffic of %d addresses on %s: %w", len(fresh), r.ifname, err)
	}
	for _, a := range fresh {
		r.counted[a] = true
	}
	r.endLingerLocked(fresh)
	return nil
}

// SetDeadline has the program answer only while CLOCK_BOOTTIME (package
// boottime) is before at: past it, every request passes on unanswered
// until the next SetDeadline, whether or not this process still runs. Zero
// answers without a deadline (an unguarded agent), as loaded.
func (r *Responder) SetDeadline(at time.Duration) error {
	r.dlMu.Lock()
	defer r.dlMu.Unlock()
	if r.dlClosed {
		return net.ErrClosed
	}
	if err := r.maps.Deadline.Update(uint32(0), uint64(max(at, 0)), ebpf.UpdateExist); err != nil {
		return fmt.Errorf("write the answer deadline on %s: %w", r.ifname, err)
	}
	return nil
}

// Withheld returns how many requests the program left unanswered because
// the deadline (SetDeadline) had passed; zero once closed.
func (r *Responder) Withheld() uint64 {
	r.dlMu.Lock()
	defer r.dlMu.Unlock()
	if r.dlClosed {
		return 0
	}
	var per []uint64
	if err := r.maps.Withheld.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// Close detaches the program and frees it and its maps. Closing twice is
// a no-op.
func (r *Responder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.dlMu.Lock()
	r.dlClosed = true
	r.dlMu.Unlock()
	r.addrs, r.counted = map[netip.Addr]bool{}, map[netip.Addr]bool{}
	r.lingering = map[netip.Addr]lingerTimes{}
	if r.expiry != nil {
		r.expiry.Stop()
	}
	var err error
	if r.link != nil {
		err = r.link.Close()
	}
	r.free()
	if err != nil {
		return fmt.Errorf("detach the eBPF responder from %s: %w", r.ifname, err)
	}
	return nil
}

// snapshotBatch is how many addresses one system call of Snapshot reads.
const snapshotBatch = 1024

// Snapshot calls fn with the counts of every address held or counted (not
// the lingering ones: see Lingering), read
// from the per-CPU map in batches of snapshotBatch: a status of 10,000
// claims costs ten system calls, not 10,000. A kernel without batch
// lookups is read address by address.
func (r *Responder) Snapshot(fn func(a netip.Addr, answered, packets, bytes uint64)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return net.ErrClosed
	}
	keys := make([]responderHeldKey, snapshotBatch)
	vals := make([]responderCounters, snapshotBatch*r.cpus)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := r.maps.Counters.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			var c responderCounters
			for _, p := range vals[i*r.cpus : (i+1)*r.cpus] {
				c.Answered += p.Answered
				c.Packets += p.Packets
				c.Bytes += p.Bytes
			}
			if a := keys[i].addr(); !r.isLingering(a) {
				fn(a, c.Answered, c.Packets, c.Bytes)
			}
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			return r.snapshotEach(fn)
		case err != nil:
			return fmt.Errorf("read the counters on %s: %w", r.ifname, err)
		}
	}
}

// snapshotEach is Snapshot one address at a time.
func (r *Responder) snapshotEach(fn func(a netip.Addr, answered, packets, bytes uint64)) error {
	for a := range r.addrs {
		c := r.sum(a)
		fn(a, c.Answered, c.Packets, c.Bytes)
	}
	for a := range r.counted {
		c := r.sum(a)
		fn(a, c.Answered, c.Packets, c.Bytes)
	}
	return nil
}

// addr is the address a key names.
func (k responderHeldKey) addr() netip.Addr {
	a := netip.AddrFrom16(k.Addr)
	if k.Family == familyIPv4 {
		return a.Unmap()
	}
	return a
}

// liftMemlock lifts RLIMIT_MEMLOCK, which Linux before 5.11 charges BPF
// maps and programs to (later ones charge the memory cgroup, and the limit
// does not matter). The program needs 5.18, so this counts only on an
// older kernel with the helpers it uses backported. A process that may not
// lift it goes on: the load then fails with EPERM, which classify reports
// as missing capabilities.
//
// Not cilium/ebpf's rlimit package, which does the same: its init probes
// the kernel with a BPF map in every process that links it, before main,
// 0.4 to 1.7 ms of every vip command's start (GODEBUG=inittrace=1),
// `vip claim` included, which never loads a program.
func liftMemlock() {
	inf := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	_ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &inf)
}
