package ifwatch_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/ifwatch"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// multicastLinkMessage sends, from a netlink socket of its own in ns, an
// empty RTM_NEWLINK to the link group: what a process with CAP_NET_ADMIN
// multicasting on rtnetlink sends, the one way a message that is not the
// kernel's reaches a subscription (issue 24's "Wrong sender portid").
func multicastLinkMessage(t *testing.T, ns netns.NsHandle) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Fatalf("back to the test's namespace: %v", err)
		}
	}()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_NEWLINK)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		t.Fatalf("multicast on the link group: %v", err)
	}
}

// TestWatchIgnoresForeignMessages: a netlink message from another sender
// than the kernel is dropped by the subscription, which reads on: it is
// said once at info, never warned about, and the next real change is
// reported.
func TestWatchIgnoresForeignMessages(t *testing.T) {
	t.Parallel()
	b := labtest.New(t, lab.HostConfig{Name: "b"}).Host("b")
	ns := namespace(t, b)
	var logs labtest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- ifwatch.Watch(ctx, ifwatch.Options{Namespace: &ns, Log: log}, rec.add) }()
	rec.waitFor(t, "eth0 listed", named("eth0", func(ifwatch.Change) bool { return true }))

	for range 3 {
		multicastLinkMessage(t, ns)
	}
	labtest.Eventually(t, waitTimeout, func() (bool, string) {
		return strings.Count(logs.String(), "not the kernel's") == 3, "the watch has not logged the three foreign messages:\n" + logs.String()
	})
	if out := logs.String(); strings.Contains(out, "level=WARN") || strings.Count(out, "level=INFO") != 1 {
		t.Errorf("foreign messages: want one info line and the rest at debug, no warning:\n%s", out)
	}
	run(t, b, "ip", "link", "set", "eth0", "down")
	rec.waitFor(t, "eth0 down after the foreign messages", named("eth0", func(c ifwatch.Change) bool { return !c.Up }))
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Watch: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Error("Watch still running after its context was cancelled")
	}
}
