package announce

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// TestSendRoundWithoutEngineLock: the single sender never waits for the
// engine's lock, which a claim of many addresses holds for tens of
// milliseconds; it still sends nothing for a claim released meanwhile.
func TestSendRoundWithoutEngineLock(t *testing.T) {
	e, ctx := runRealEngine(t, nil)
	addr := netip.MustParseAddr("192.0.2.10")
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	if _, err := e.Claim(cctx, []Request{{Addr: addr, Interface: "eth0"}}, ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	send := func(k Key) int {
		t.Helper()
		e.mu.Lock() // as a long claim would
		defer e.mu.Unlock()
		sent := make(chan int, 1)
		go func() {
			n, _ := e.SendRound(ctx, k)
			sent <- n
		}()
		select {
		case n := <-sent:
			return n
		case <-time.After(5 * time.Second):
			t.Fatal("SendRound waited for the engine's lock")
			return 0
		}
	}
	if n := send(Key{Ifindex: 2, Addr: addr}); n != DefaultFrameKinds.PerRound(true) {
		t.Errorf("round for a held claim: %d frames, want %d", n, DefaultFrameKinds.PerRound(true))
	}
	if n := send(Key{Ifindex: 3, Addr: addr}); n != 0 {
		t.Errorf("round for the claim on another interface: %d frames, want none", n)
	}
	if _, _, err := e.Release(cctx, []netip.Addr{addr}); err != nil {
		t.Fatal(err)
	}
	if n := send(Key{Ifindex: 2, Addr: addr}); n != 0 {
		t.Errorf("round for a released claim: %d frames, want none", n)
	}
}
