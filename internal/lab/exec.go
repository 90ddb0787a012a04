package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
)

// run runs a command and returns its standard output; its error carries the
// command line and standard error.
func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// ipIn runs ip with args in the namespace netns.
func ipIn(ctx context.Context, netns string, args ...string) ([]byte, error) {
	return run(ctx, "ip", append([]string{"-n", netns}, args...)...)
}

// sysctl sets "key=value" settings inside the namespace netns.
func sysctl(ctx context.Context, netns string, settings ...string) error {
	_, err := run(ctx, "ip", append([]string{"netns", "exec", netns, "sysctl", "-q", "-w"}, settings...)...)
	return err
}

// runJSON runs a command that prints JSON (ip -j, bridge -j) and decodes it
// into v.
func runJSON(ctx context.Context, v any, name string, args ...string) error {
	out, err := run(ctx, name, args...)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("%s %s: decode output: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// listNetns returns the names of all named network namespaces.
func listNetns(ctx context.Context) (map[string]bool, error) {
	var list []struct {
		Name string `json:"name"`
	}
	if err := runJSON(ctx, &list, "ip", "-j", "netns", "list"); err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(list))
	for _, n := range list {
		names[n.Name] = true
	}
	return names, nil
}

// ipLink is one interface in the output of `ip -j addr show`.
type ipLink struct {
	IfIndex   int      `json:"ifindex"`
	IfName    string   `json:"ifname"`
	Flags     []string `json:"flags"`
	OperState string   `json:"operstate"`
	Address   string   `json:"address"`
	AddrInfo  []ipAddr `json:"addr_info"`
}

// ipAddr is one address of an ipLink. ip prints an empty object for addresses
// filtered out, so every field may be zero.
type ipAddr struct {
	Family    string `json:"family"`
	Local     string `json:"local"`
	PrefixLen int    `json:"prefixlen"`
	Scope     string `json:"scope"`
	Tentative bool   `json:"tentative"`
	DADFailed bool   `json:"dadfailed"`
}

func (a ipAddr) prefix() (netip.Prefix, bool) {
	addr, err := netip.ParseAddr(a.Local)
	if err != nil {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(addr, a.PrefixLen), true
}

// usable reports whether the address can be used as a source: present, not
// waiting for or failed in duplicate address detection.
func (a ipAddr) usable() bool {
	return !a.Tentative && !a.DADFailed
}

// ready reports, as an error wrapping errNotReady, what keeps the link from
// carrying traffic: down, no carrier, or no usable link-local address yet.
func (il ipLink) ready() error {
	if il.OperState != "UP" || !slices.Contains(il.Flags, "LOWER_UP") {
		return fmt.Errorf("operstate %s, flags %v: %w", il.OperState, il.Flags, errNotReady)
	}
	if _, ok := il.linkLocal(); !ok {
		return fmt.Errorf("no usable IPv6 link-local address: %w", errNotReady)
	}
	return nil
}

func (il ipLink) linkLocal() (netip.Addr, bool) {
	for _, a := range il.AddrInfo {
		if p, ok := a.prefix(); ok && p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() && a.usable() {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// hasAddrs reports, as an error wrapping errNotReady, which of the wanted
// addresses the link does not have in usable form.
func (il ipLink) hasAddrs(want ...netip.Prefix) error {
	for _, w := range want {
		if !w.IsValid() {
			continue
		}
		found := false
		for _, a := range il.AddrInfo {
			if p, ok := a.prefix(); ok && p == w && a.usable() {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("no usable address %s: %w", w, errNotReady)
		}
	}
	return nil
}

// bridgePort is one entry in the output of `bridge -j link show`.
type bridgePort struct {
	IfName string `json:"ifname"`
	State  string `json:"state"`
}
