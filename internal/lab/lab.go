package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"time"
)

// BridgeName is the name of the bridge in every lab's switch namespace.
const BridgeName = "br0"

// readyTimeout bounds the wait for links to come up when Up's context has no
// deadline, and bounds Down and Clean, which take no context.
const readyTimeout = 10 * time.Second

// pollInterval is how often Up checks whether the links are ready. Links
// usually are by the first check; the interval only matters on a busy machine.
const pollInterval = 10 * time.Millisecond

// Names of namespaces, hosts and links are kept to lowercase letters and
// digits: no "-", so "<prefix>-<host>" splits one way only and Clean cannot
// mistake another lab's namespace for one of its own.
var validName = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// switchName is the name part of the switch namespace; no host may take it.
const switchName = "sw"

// maxIfName is the longest interface name the kernel accepts (IFNAMSIZ - 1).
const maxIfName = 15

// HostConfig describes one host of a lab.
type HostConfig struct {
	// Name names the host, e.g. "a" or "client": lowercase letters and
	// digits, starting with a letter, not "sw".
	Name string
	// IPv4 is the address of eth0, e.g. 192.0.2.1/24; the zero value gives
	// eth0 no IPv4 address at all.
	IPv4 netip.Prefix
	// IPv6 is the global address of eth0, e.g. 2001:db8::1/64, added without
	// duplicate address detection; the zero value gives eth0 only its
	// link-local address.
	IPv6 netip.Prefix
	// Links is the number of interfaces joining the host to the bridge, named
	// eth0, eth1, …; zero means one.
	Links int
}

// Config describes a lab.
type Config struct {
	// Prefix starts the name of every namespace of the lab: lowercase letters
	// and digits, starting with a letter. It must not be in use by another
	// lab. Keep it short; it shows in every `ip netns` command.
	Prefix string
	// Hosts are the hosts on the segment, each with a unique name.
	Hosts []HostConfig
}

// Lab is a running lab: a bridge in a switch namespace and hosts joined to it.
type Lab struct {
	// Prefix is the Config.Prefix the lab was made with.
	Prefix string
	// Switch is the name of the namespace that holds the bridge.
	Switch string
	// Bridge is the name of the bridge inside Switch.
	Bridge string
	// Hosts are the hosts in the order of Config.Hosts.
	Hosts []*Host

	// netns lists the namespaces this lab created, in creation order, so that
	// Down removes exactly those and never another lab's.
	netns []string
}

// Host is one host of a lab: a namespace with links to the bridge.
type Host struct {
	// Name is the HostConfig.Name.
	Name string
	// Netns is the name of the host's namespace.
	Netns string
	// IPv4 and IPv6 are the addresses of eth0 from the HostConfig; either may
	// be the zero value.
	IPv4, IPv6 netip.Prefix
	// Links are the host's interfaces to the bridge: eth0, eth1, ….
	Links []Link
}

// Link is one interface of a host and the bridge port at its other end.
type Link struct {
	// Name is the interface name inside the host, e.g. "eth0".
	Name string
	// MAC is the interface's hardware address.
	MAC net.HardwareAddr
	// Index is the interface index inside the host's namespace.
	Index int
	// LinkLocal is the interface's IPv6 link-local address.
	LinkLocal netip.Addr
	// BridgePort is the name of the bridge port in the switch namespace.
	BridgePort string
}

// NetnsName returns the name of the namespace that a lab with the given prefix
// gives to the host or switch called name.
func NetnsName(prefix, name string) string {
	return prefix + "-" + name
}

// Up builds the lab described by cfg and waits until every link is up and has
// its IPv6 link-local address. If anything fails, Up removes whatever it had
// built before returning the error. The wait for links ends at ctx's deadline,
// or after ten seconds if ctx has none.
func Up(ctx context.Context, cfg Config) (*Lab, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := &Lab{
		Prefix: cfg.Prefix,
		Switch: NetnsName(cfg.Prefix, switchName),
		Bridge: BridgeName,
	}
	if err := l.build(ctx, cfg); err != nil {
		if derr := l.Down(); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, fmt.Errorf("lab %s up: %w", cfg.Prefix, err)
	}
	return l, nil
}

func (cfg Config) validate() error {
	if !validName.MatchString(cfg.Prefix) {
		return fmt.Errorf("lab prefix %q: want lowercase letters and digits, starting with a letter", cfg.Prefix)
	}
	if len(cfg.Hosts) == 0 {
		return fmt.Errorf("lab %s: no hosts", cfg.Prefix)
	}
	seen := make(map[string]bool)
	for _, hc := range cfg.Hosts {
		switch {
		case !validName.MatchString(hc.Name):
			return fmt.Errorf("lab %s: host name %q: want lowercase letters and digits, starting with a letter", cfg.Prefix, hc.Name)
		case hc.Name == switchName:
			return fmt.Errorf("lab %s: host name %q is taken by the switch", cfg.Prefix, hc.Name)
		case seen[hc.Name]:
			return fmt.Errorf("lab %s: two hosts named %q", cfg.Prefix, hc.Name)
		case hc.Links < 0:
			return fmt.Errorf("lab %s: host %s: negative link count %d", cfg.Prefix, hc.Name, hc.Links)
		case hc.IPv4.IsValid() && !hc.IPv4.Addr().Is4():
			return fmt.Errorf("lab %s: host %s: IPv4 address %s is not IPv4", cfg.Prefix, hc.Name, hc.IPv4)
		case hc.IPv6.IsValid() && !hc.IPv6.Addr().Is6():
			return fmt.Errorf("lab %s: host %s: IPv6 address %s is not IPv6", cfg.Prefix, hc.Name, hc.IPv6)
		}
		seen[hc.Name] = true
		if port := portName(hc.Name, linkCount(hc)-1); len(port) > maxIfName {
			return fmt.Errorf("lab %s: host name %q is too long: bridge port %q exceeds %d characters", cfg.Prefix, hc.Name, port, maxIfName)
		}
	}
	return nil
}

func linkCount(hc HostConfig) int {
	if hc.Links == 0 {
		return 1
	}
	return hc.Links
}

func portName(host string, i int) string {
	return fmt.Sprintf("%s-eth%d", host, i)
}

// Sysctls for a host namespace, set before its links exist so that they take
// the defaults, and again per link afterwards. Without them every link-up
// sends DAD probes and router solicitations into the tests' captures.
var hostSysctls = []string{
	"net.ipv6.conf.all.accept_dad=0",
	"net.ipv6.conf.default.accept_dad=0",
	"net.ipv6.conf.default.router_solicitations=0",
}

func linkSysctls(ifname string) []string {
	return []string{
		"net.ipv6.conf." + ifname + ".accept_dad=0",
		"net.ipv6.conf." + ifname + ".router_solicitations=0",
	}
}

// Sysctls for the switch namespace: a real switch has no IPv6 on its ports,
// and with it the bridge and every port would send MLD reports of their own.
// The bridge still snoops MLD; snooping is layer 2 and needs no address.
var switchSysctls = []string{
	"net.ipv6.conf.all.disable_ipv6=1",
	"net.ipv6.conf.default.disable_ipv6=1",
}

func (l *Lab) build(ctx context.Context, cfg Config) error {
	if err := l.addNetns(ctx, l.Switch, switchSysctls); err != nil {
		return err
	}
	if _, err := ipIn(ctx, l.Switch, "link", "add", l.Bridge, "up", "type", "bridge", "stp_state", "0", "forward_delay", "0"); err != nil {
		return err
	}
	for _, hc := range cfg.Hosts {
		h, err := l.addHost(ctx, hc)
		if err != nil {
			return fmt.Errorf("host %s: %w", hc.Name, err)
		}
		l.Hosts = append(l.Hosts, h)
	}
	return l.waitReady(ctx)
}

// addNetns creates a namespace, records it for Down, brings up its loopback
// and applies sysctls.
func (l *Lab) addNetns(ctx context.Context, name string, sysctls []string) error {
	if _, err := run(ctx, "ip", "netns", "add", name); err != nil {
		return err
	}
	l.netns = append(l.netns, name)
	if _, err := ipIn(ctx, name, "link", "set", "lo", "up"); err != nil {
		return err
	}
	return sysctl(ctx, name, sysctls...)
}

func (l *Lab) addHost(ctx context.Context, hc HostConfig) (*Host, error) {
	h := &Host{
		Name:  hc.Name,
		Netns: NetnsName(l.Prefix, hc.Name),
		IPv4:  hc.IPv4,
		IPv6:  hc.IPv6,
	}
	if err := l.addNetns(ctx, h.Netns, hostSysctls); err != nil {
		return nil, err
	}
	for i := range linkCount(hc) {
		link := Link{Name: fmt.Sprintf("eth%d", i), BridgePort: portName(hc.Name, i)}
		// The host end is created in the host namespace directly; no
		// interface ever appears in the caller's namespace.
		if _, err := ipIn(ctx, l.Switch, "link", "add", link.BridgePort, "master", l.Bridge, "up",
			"type", "veth", "peer", "name", link.Name, "netns", h.Netns); err != nil {
			return nil, err
		}
		if err := sysctl(ctx, h.Netns, linkSysctls(link.Name)...); err != nil {
			return nil, err
		}
		if _, err := ipIn(ctx, h.Netns, "link", "set", link.Name, "up"); err != nil {
			return nil, err
		}
		h.Links = append(h.Links, link)
	}
	if hc.IPv4.IsValid() {
		if _, err := ipIn(ctx, h.Netns, "addr", "add", hc.IPv4.String(), "dev", "eth0"); err != nil {
			return nil, err
		}
	}
	if hc.IPv6.IsValid() {
		if _, err := ipIn(ctx, h.Netns, "addr", "add", hc.IPv6.String(), "dev", "eth0", "nodad"); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// errNotReady marks a check that may pass if tried again later.
var errNotReady = errors.New("not ready")

// waitReady polls until every host link is up with its addresses and every
// bridge port forwards, and fills in the links' MACs, indexes and link-local
// addresses.
func (l *Lab) waitReady(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, readyTimeout)
		defer cancel()
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := l.checkReady(ctx)
		if err == nil || !errors.Is(err, errNotReady) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for links: %w (%w)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func (l *Lab) checkReady(ctx context.Context) error {
	var ports []bridgePort
	if err := runJSON(ctx, &ports, "bridge", "-n", l.Switch, "-j", "link", "show"); err != nil {
		return err
	}
	state := make(map[string]string, len(ports))
	for _, p := range ports {
		state[p.IfName] = p.State
	}
	for _, h := range l.Hosts {
		var links []ipLink
		if err := runJSON(ctx, &links, "ip", "-n", h.Netns, "-j", "addr", "show"); err != nil {
			return err
		}
		byName := make(map[string]ipLink, len(links))
		for _, il := range links {
			byName[il.IfName] = il
		}
		for i := range h.Links {
			link := &h.Links[i]
			if s := state[link.BridgePort]; s != "forwarding" {
				return fmt.Errorf("bridge port %s is in state %q: %w", link.BridgePort, s, errNotReady)
			}
			il, ok := byName[link.Name]
			if !ok {
				return fmt.Errorf("host %s has no %s", h.Name, link.Name)
			}
			if err := il.ready(); err != nil {
				return fmt.Errorf("host %s %s: %w", h.Name, link.Name, err)
			}
			if i == 0 {
				if err := il.hasAddrs(h.IPv4, h.IPv6); err != nil {
					return fmt.Errorf("host %s %s: %w", h.Name, link.Name, err)
				}
			}
			mac, err := net.ParseMAC(il.Address)
			if err != nil {
				return fmt.Errorf("host %s %s: %w", h.Name, link.Name, err)
			}
			link.MAC = mac
			link.Index = il.IfIndex
			link.LinkLocal, _ = il.linkLocal()
		}
	}
	return nil
}

// Host returns the host called name, or nil if the lab has none.
func (l *Lab) Host(name string) *Host {
	for _, h := range l.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Down removes every namespace the lab created, and with them its links. It
// leaves processes started inside the lab running: their owners stop them.
// Down may be called more than once.
func (l *Lab) Down() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	existing, err := listNetns(ctx)
	if err != nil {
		return fmt.Errorf("lab %s down: %w", l.Prefix, err)
	}
	var errs []error
	// Hosts first: removing a host namespace removes its veth pairs, so the
	// bridge is never left with half a link to a host that still exists.
	for i := len(l.netns) - 1; i >= 0; i-- {
		name := l.netns[i]
		if !existing[name] {
			continue
		}
		if _, err := run(ctx, "ip", "netns", "delete", name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab %s down: %w", l.Prefix, err)
	}
	return nil
}

// Clean removes every namespace named like those of a lab with the given
// prefix: "<prefix>-<name>". It is for the leftovers of a run that crashed
// before calling Down; namespaces of labs with other prefixes are left alone.
func Clean(prefix string) error {
	if !validName.MatchString(prefix) {
		return fmt.Errorf("clean lab %q: want lowercase letters and digits, starting with a letter", prefix)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	existing, err := listNetns(ctx)
	if err != nil {
		return fmt.Errorf("clean lab %s: %w", prefix, err)
	}
	var errs []error
	for name := range existing {
		rest, ok := strings.CutPrefix(name, prefix+"-")
		if !ok || !validName.MatchString(rest) {
			continue
		}
		if _, err := run(ctx, "ip", "netns", "delete", name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean lab %s: %w", prefix, err)
	}
	return nil
}
