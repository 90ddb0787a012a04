package commands

// The fleet demo's client side: what it asks and sends, the capture its
// proofs are read from, and how a proof names who answered.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/sniff"
)

// watchFromClient starts the client's side: a capture the witness reads,
// a request for each address every nightAsk, and a datagram to each
// every nightAsk, the traffic of a client whose neighbour cache follows
// the owner (what drain's proof of quiet counts). It returns how to stop
// them.
func (n *night) watchFromClient() (func(), error) {
	ns := filepath.Join("/run/netns", lab.NetnsName(n.e.prefix, "client"))
	var (
		capt  *sniff.Capture
		conns []net.Conn
	)
	closeConns := func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	client := labHosts[slices.IndexFunc(labHosts, func(h lab.HostConfig) bool { return h.Name == "client" })]
	err := lab.InNetns(ns, func() error {
		var err error
		if capt, err = sniff.Open("eth0", sniff.Options{}); err != nil {
			return err
		}
		for _, a := range nightAddrs {
			c, err := net.Dial("udp", netip.AddrPortFrom(a, 9).String())
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	if err != nil {
		if capt != nil {
			_ = capt.Close()
		}
		closeConns()
		return nil, fmt.Errorf("watch from the lab's client: %w", err)
	}
	asker, err := lab.OpenAsker(ns, "eth0", client.IPv4.Addr(), client.IPv6.Addr())
	if err != nil {
		_ = capt.Close()
		closeConns()
		return nil, err
	}
	n.capt = capt
	ctx, cancel := context.WithCancel(n.ctx)
	done := make(chan struct{}, 3)
	// A capture or an asker that stops before the night ends leaves the
	// witness deaf: every proof after it fails.
	stopped := func(what string, err error) {
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("it ended")
		}
		n.mu.Lock()
		if n.deaf == nil {
			n.deaf = fmt.Errorf("the client's %s stopped: %w", what, err)
		}
		n.mu.Unlock()
	}
	go func() { stopped("capture", capt.Run(ctx, n.witness)); done <- struct{}{} }()
	go func() { stopped("requests", asker.Run(ctx, nightAsk, nightAddrs...)); done <- struct{}{} }()
	go func() {
		t := time.NewTicker(nightAsk)
		defer t.Stop()
		for {
			for _, c := range conns {
				_, _ = c.Write([]byte("vip lab demo\n")) // refused while nobody answers: sent again
			}
			select {
			case <-ctx.Done():
				done <- struct{}{}
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		_ = capt.Close()
		for range 3 {
			<-done
		}
		_ = asker.Close()
		closeConns()
	}, nil
}

// listening says whether the client's side heard everything so far: its
// capture and its requests running, and no frame dropped by the kernel
// (a dropped answer from an old owner would pass for its silence).
func (n *night) listening() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.deaf != nil {
		return n.deaf
	}
	if d := n.capt.Stats().Dropped; d > 0 {
		return fmt.Errorf("the client's capture lost %d frames for want of buffer", d)
	}
	return nil
}

// macCounts says who answered: each MAC with its node's name and count.
func macCounts(count map[string]int, macs map[string]string) string {
	var parts []string
	for mac, c := range count {
		who := mac
		for node, m := range macs {
			if m == mac {
				who = node + " (" + mac + ")"
			}
		}
		parts = append(parts, fmt.Sprintf("%s %d times", who, c))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "nobody"
	}
	return strings.Join(parts, ", ")
}

// othersThan returns the MACs of count other than mac.
func othersThan(count map[string]int, mac string) []string {
	var out []string
	for m := range count {
		if m != mac {
			out = append(out, m)
		}
	}
	return out
}
