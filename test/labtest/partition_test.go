package labtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// probePort is the TCP port every host of the partition lab listens on.
const probePort = 7000

// probeTimeout bounds one probe (a TCP connect, a ping) across the lab.
const probeTimeout = time.Second

// partitionLab builds hosts a, b, client and store, each listening on
// probePort.
func partitionLab(t *testing.T) *lab.Lab {
	t.Helper()
	labtest.RequireTool(t, "ping")
	var hosts []lab.HostConfig
	for i, name := range []string{"a", "b", "client", "store"} {
		hosts = append(hosts, lab.HostConfig{Name: name, IPv4: netip.MustParsePrefix(fmt.Sprintf("192.0.2.%d/24", i+1))})
	}
	l := labtest.New(t, hosts...)
	for _, h := range l.Hosts {
		listen(t, h)
	}
	return l
}

// listen accepts and closes connections on probePort inside h until the test
// ends.
func listen(t *testing.T, h *lab.Host) {
	t.Helper()
	var ln net.Listener
	err := labtest.Do(h, func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(h.IPv4.Addr(), probePort).String())
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s: %v", h.Name, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
}

// reach connects from one host to the other's listener and pings it, and
// returns why either failed.
func reach(from, to *lab.Host) error {
	var errs []error
	tcpCtx, tcpCancel := context.WithTimeout(context.Background(), probeTimeout)
	c, err := labtest.DialIn(from)(tcpCtx, netip.AddrPortFrom(to.IPv4.Addr(), probePort).String())
	tcpCancel()
	if err != nil {
		errs = append(errs, fmt.Errorf("tcp: %w", err))
	} else {
		c.Close()
	}
	// ping's own time, not what the TCP probe left of a shared one: on a
	// loaded machine starting ping in the namespace took the rest, and a
	// ping answered in 19 µs was reported as no answer.
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout+5*time.Second)
	defer cancel()
	wait := strconv.Itoa(int(probeTimeout / time.Second))
	if _, err := from.Run(ctx, "ping", "-n", "-c", "1", "-W", wait, to.IPv4.Addr().String()); err != nil {
		errs = append(errs, fmt.Errorf("ping: %w", err))
	}
	return errors.Join(errs...)
}

func TestIsolateCutsOffOnlyTheIsolatedHosts(t *testing.T) {
	l := partitionLab(t)
	a, b, client, store := l.Host("a"), l.Host("b"), l.Host("client"), l.Host("store")
	tests := []struct {
		from, to *lab.Host
		want     bool // whether from reaches to while a and the store are cut off
	}{
		{a, store, false},
		{store, a, false},
		{a, b, true},
		{a, client, true},
		{b, a, true},
		{store, b, true},
		{store, client, true},
		{client, store, true},
	}
	for _, tt := range tests {
		labtest.Eventually(t, 10*time.Second, func() (bool, string) {
			err := reach(tt.from, tt.to)
			return err == nil, fmt.Sprintf("before the cut, %s does not reach %s: %v", tt.from.Name, tt.to.Name, err)
		})
	}

	p := labtest.Isolate(t, l, a, store)
	for _, tt := range tests {
		t.Run(tt.from.Name+"-"+tt.to.Name, func(t *testing.T) {
			err := reach(tt.from, tt.to)
			if got := err == nil; got != tt.want {
				t.Errorf("with a and the store isolated, %s reaches %s: got %v (%v), want %v", tt.from.Name, tt.to.Name, got, err, tt.want)
			}
		})
	}

	p.Heal(t)
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		err := reach(a, store)
		return err == nil, fmt.Sprintf("after the heal, a does not reach the store: %v", err)
	})
}
