package fleet_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/fleet"
)

// TestFakeAdoptWaitsForKeptPromises starts an agent whose predecessor
// promised an owner on failsafe, a, to take none of its addresses for 3 s
// more (the promise kept on disk). Re-adopting the predecessor's claim of
// an address whose key is free is a take through the store: it waits for
// the promise to end, since the address may be one a answers for on that
// promise. Meanwhile the status says to whom this node promised, until
// when. Without the wait, the key is this node's at once.
func TestFakeAdoptWaitsForKeptPromises(t *testing.T) {
	f := newFakeFleet(t)
	until := f.epoch.Add(3 * time.Second)
	path := filepath.Join(t.TempDir(), "promises")
	raw, err := json.Marshal(map[string]time.Time{"a": until})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b, eng := f.joinConfig("b", func(c *fleet.Config) { c.Promises = path })
	if p := b.Info().Promised; p == nil || p.Owner != "a" || !p.Until.Equal(until) {
		t.Errorf("b's status says it promised %+v, want a until %s", p, until)
	}

	addr := netip.MustParseAddr("192.0.2.10")
	adopted := make(chan error, 1)
	go func() {
		_, err := b.Adopt(context.Background(), []announce.Claim{{Addr: addr, Interface: "eth0"}})
		adopted <- err
	}()
	never(t, func() bool { return f.owner(addr) == "b" }, "b took the key at once while its promise to a was in force")
	f.advanceTo(2500 * time.Millisecond)
	never(t, func() bool { return f.owner(addr) == "b" }, "b took the key 2.5 s in, while its promise to a was in force until 3 s")
	f.advanceTo(3500 * time.Millisecond)
	eventually(t, func() bool { return f.owner(addr) == "b" && eng.holds(addr) }, "b did not adopt the claim once its promise ended")
	if err := <-adopted; err != nil {
		t.Fatalf("adopt after the promise ended: %v", err)
	}
	if p := b.Info().Promised; p != nil {
		t.Errorf("b's status says it promised %+v after the promise ended", p)
	}
}
