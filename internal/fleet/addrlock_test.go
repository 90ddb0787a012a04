package fleet

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// TestAddrLocks: operations on different addresses go at once; one on an
// address locked waits until it is unlocked, or gives up with its context;
// an operation locks all its addresses or none.
func TestAddrLocks(t *testing.T) {
	var l addrLocks
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	ctx := context.Background()
	unlockA, err := l.lock(ctx, []netip.Addr{a, a})
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := l.lock(ctx, []netip.Addr{b})
	if err != nil {
		t.Fatal("an operation on another address waited:", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.lock(short, []netip.Addr{c, a}); err == nil {
		t.Fatal("locked an address another operation holds")
	}
	// c was not taken by the attempt that gave up.
	unlockC, err := l.lock(ctx, []netip.Addr{c})
	if err != nil {
		t.Fatal(err)
	}
	unlockC()
	got := make(chan error, 1)
	go func() {
		unlock, err := l.lock(ctx, []netip.Addr{a, b})
		if err == nil {
			unlock()
		}
		got <- err
	}()
	unlockA()
	unlockA() // twice is once
	select {
	case err := <-got:
		t.Fatalf("locked a and b while b was held (err %v)", err)
	case <-time.After(20 * time.Millisecond):
	}
	unlockB()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after both addresses were unlocked")
	}
}
