package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/announce/bpfresp"
)

// ResponderMode says what answers who-has requests for the held addresses.
type ResponderMode string

const (
	// ResponderAuto answers in the kernel (eBPF) where the kernel and the
	// privileges allow, and on packet sockets elsewhere. The default.
	ResponderAuto ResponderMode = "auto"
	// ResponderEBPF answers in the kernel, or claims nothing.
	ResponderEBPF ResponderMode = "ebpf"
	// ResponderSocket answers on packet sockets, in vip.
	ResponderSocket ResponderMode = "socket"
)

// responderModes are the modes --responder takes.
var responderModes = []ResponderMode{ResponderAuto, ResponderEBPF, ResponderSocket}

// ParseResponderMode reads --responder.
func ParseResponderMode(s string) (ResponderMode, error) {
	if m := ResponderMode(s); slices.Contains(responderModes, m) {
		return m, nil
	}
	return "", fmt.Errorf("unknown responder %q: use auto, ebpf or socket", s)
}

// ResponderConfig says how the engine's ports answer: the mode and, for
// eBPF, the hook. The zero value is auto on tcx.
type ResponderConfig struct {
	Mode ResponderMode
	Hook bpfresp.Hook
	// Deadline, when set, is a guarded agent's answer deadline: every
	// port checks it where its frames leave (announce.Link.Guard).
	Deadline *announce.Deadline
	// Linger is how long the in-kernel responder counts the traffic of
	// an address after releasing it (bpfresp.Responder.SetLinger); zero
	// counts nothing after.
	Linger time.Duration
}

// Configure sets cfg's Open to open ports that answer as rc says, and its
// Kernel to the interfaces' own addresses (which the engine keeps silent
// for). cfg.Log logs the fallbacks. It returns the book of what the ports
// count after their releases.
func (rc ResponderConfig) Configure(cfg *announce.EngineConfig) *lingerBook {
	o := newPortOpener(rc, cfg.Log)
	cfg.Open = o.open
	cfg.Kernel = announce.InterfaceAddrs
	return o.lingers
}

// portOpener opens a port per interface as its ResponderConfig says. It
// remembers the interfaces whose fallback it logged, so that an interface
// that flaps says why once, not at every reopening.
type portOpener struct {
	rc  ResponderConfig
	log *slog.Logger
	// openBPF and openLink are bpfresp.Open and announce.OpenLinkAnswering
	// (announce.OpenLink for a nil responder); tests replace them.
	openBPF  func(ifi *net.Interface, hook bpfresp.Hook, log *slog.Logger) (announce.KernelResponder, error)
	openLink func(ifi *net.Interface, resp announce.KernelResponder, log *slog.Logger) (announce.Port, error)

	// lingers knows which ports count after a release.
	lingers *lingerBook

	mu     sync.Mutex
	logged map[string]bool
}

func newPortOpener(rc ResponderConfig, log *slog.Logger) *portOpener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if rc.Mode == "" {
		rc.Mode = ResponderAuto
	}
	return &portOpener{
		rc: rc, log: log, logged: map[string]bool{}, lingers: newLingerBook(rc.Linger),
		openBPF: func(ifi *net.Interface, hook bpfresp.Hook, log *slog.Logger) (announce.KernelResponder, error) {
			return bpfresp.Open(ifi.Name, ifi.Index, ifi.HardwareAddr, hook, log)
		},
		openLink: func(ifi *net.Interface, resp announce.KernelResponder, log *slog.Logger) (announce.Port, error) {
			if resp == nil {
				return announce.OpenLink(ifi, log)
			}
			return announce.OpenLinkAnswering(ifi, resp, log)
		},
	}
}

func (o *portOpener) open(name string) (announce.Port, error) {
	p, err := o.openPort(name)
	if err != nil || o.rc.Deadline == nil {
		return p, err
	}
	// The deadline goes to the port before it holds anything, so that its
	// first answer is already checked against it.
	if err := p.Guard(o.rc.Deadline); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

func (o *portOpener) openPort(name string) (announce.Port, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	if o.rc.Mode == ResponderSocket {
		return o.openSockets(ifi)
	}
	resp, err := o.openParkedOrBPF(ifi)
	switch {
	case err != nil && o.rc.Mode == ResponderEBPF:
		return nil, err
	case err != nil:
		o.fallback(name, err)
		return o.openSockets(ifi)
	}
	o.lingers.opened(name, resp, o.log)
	p, err := o.openLink(ifi, o.lingers.wrap(name, resp), o.log)
	if err != nil {
		_ = resp.Close()
		return nil, err
	}
	o.mu.Lock()
	delete(o.logged, name) // a later refusal is news again
	o.mu.Unlock()
	if o.rc.Hook != bpfresp.TCX {
		o.log.Info("the eBPF responder runs on XDP: packet taps on the interface (tcpdump) see neither the requests it answers nor its answers; vip's who-has table counts them from what the program remembers of its askers, and competing claimers' own frames still pass and are seen; use --responder-hook tcx for taps that see everything",
			"interface", name, "hook", o.rc.Hook.String())
	}
	return p, nil
}

// openParkedOrBPF returns the in-kernel responder still open on ifi for
// its lingering addresses, or opens one.
func (o *portOpener) openParkedOrBPF(ifi *net.Interface) (announce.KernelResponder, error) {
	if resp := o.lingers.takeParked(ifi); resp != nil {
		return resp, nil
	}
	return o.openBPF(ifi, o.rc.Hook, o.log)
}

// openSockets opens a port that answers on packet sockets.
func (o *portOpener) openSockets(ifi *net.Interface) (announce.Port, error) {
	p, err := o.openLink(ifi, nil, o.log)
	if err == nil {
		o.lingers.opened(ifi.Name, nil, o.log)
	}
	return p, err
}

// fallback logs, once per interface, why the sockets answer there: a
// sentence that names the fix for a machine that cannot run the eBPF
// responder, a warning for a fault.
func (o *portOpener) fallback(name string, err error) {
	o.mu.Lock()
	seen := o.logged[name]
	o.logged[name] = true
	o.mu.Unlock()
	if seen {
		return
	}
	if errors.Is(err, bpfresp.ErrUnavailable) {
		o.log.Info("the eBPF responder is unavailable: answering on packet sockets", "interface", name, "reason", err.Error())
		return
	}
	o.log.Warn("the eBPF responder failed: answering on packet sockets", "interface", name, "err", err)
}
