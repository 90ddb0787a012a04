package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRecordFormat holds the records' wire format: what Encode writes,
// that a record from before formats existed still reads, and that one from
// a newer vip is refused with a sentence that names the fix.
func TestRecordFormat(t *testing.T) {
	n := Node{Node: "a", LeaseTTL: Duration(6 * time.Second)}
	b, err := Encode(n)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"format":1`) || !strings.Contains(s, `"lease_ttl":"6s"`) {
		t.Errorf("Encode wrote %s: want format 1 and the TTL as text", s)
	}
	got, err := Decode[Node]("/vip/nodes/a", b)
	if err != nil || got.Node != "a" || got.LeaseTTL != n.LeaseTTL || got.Format != Format {
		t.Errorf("Decode(Encode) = %+v, %v", got, err)
	}

	old := `{"addr":"192.0.2.10","node":"b","interface":"eth0","since":"2026-01-02T03:04:05Z"}`
	c, err := Decode[Claim]("/vip/claims/192.0.2.10", []byte(old))
	if err != nil || c.Node != "b" || c.Addr != netip.MustParseAddr("192.0.2.10") {
		t.Errorf("a record without a format: %+v, %v; want it read as format 1", c, err)
	}

	newer := `{"format":2,"addr":"192.0.2.10","node":"b"}`
	_, err = Decode[Claim]("/vip/claims/192.0.2.10", []byte(newer))
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Format != 2 || !strings.Contains(err.Error(), "upgrade vip") {
		t.Errorf("a record of format 2: err %v, want a FormatError that says to upgrade", err)
	}

	if m, err := Decode[Move]("/vip/moves/x", []byte(`{"traffic_window":"soon"}`)); err == nil {
		t.Errorf("a move with a bad duration decoded: %+v", m)
	}
}

// TestCordonActive: a cordon with no end holds until lifted; one with an
// end holds until then, whatever its key does after.
func TestCordonActive(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	forever := Cordon{Node: "b", Since: now.Add(-time.Hour)}
	timed := Cordon{Node: "b", Reason: "kernel upgrade", By: "ops@c", Since: now.Add(-time.Minute), Until: now.Add(30 * time.Minute)}
	if !forever.Active(now.Add(1000*time.Hour)) || !timed.Active(now) || timed.Active(timed.Until) {
		t.Errorf("Active: forever %v, timed now %v, timed at its end %v; want true, true, false",
			forever.Active(now.Add(1000*time.Hour)), timed.Active(now), timed.Active(timed.Until))
	}
	got := timed.Describe(now)
	for _, want := range []string{"node b is cordoned since", `reason "kernel upgrade"`, "by ops@c", "30m0s left"} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe: %q, want it to say %q", got, want)
		}
	}
	if got := forever.Describe(now); !strings.Contains(got, "until uncordoned") {
		t.Errorf("Describe of a cordon with no end: %q", got)
	}
	b, err := Encode(timed)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode[Cordon]("/vip/cordons/b", b)
	if err != nil || back.Reason != timed.Reason || !back.Until.Equal(timed.Until) || back.Format != Format {
		t.Errorf("the cordon does not round-trip: %+v, %v", back, err)
	}
}

// TestChangeFailsafeDescribe: an owner's failsafe is a node-wide change
// that says from when to when it answered on failsafe, for how many
// addresses, and on whose promises.
func TestChangeFailsafeDescribe(t *testing.T) {
	since := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	c := Change{Kind: ChangeFailsafe, Node: "a", Since: since, Time: since.Add(20 * time.Second),
		Message: "the store unreachable, it answered on the promises of b, c for 20s"}
	c.SetAddrs([]netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")})
	want := fmt.Sprintf("node a answered on failsafe from %s to %s (2 addresses): the store unreachable, it answered on the promises of b, c for 20s",
		since.Local().Format("15:04:05.000"), since.Add(20*time.Second).Local().Format("15:04:05.000"))
	if got := c.Describe(); got != want {
		t.Errorf("Describe: %q, want %q", got, want)
	}
	if !c.Kind.nodeWide() || !c.Concerns(netip.MustParseAddr("2001:db8::10")) {
		t.Errorf("a failsafe is node-wide (%v) and concerns its addresses (%v)", c.Kind.nodeWide(), c.Concerns(netip.MustParseAddr("2001:db8::10")))
	}
}

// TestFailsafeSetLapsed: a set is lapsed when its owner has no record, or
// one under another lease; it holds the live nodes it leaves out.
func TestFailsafeSetLapsed(t *testing.T) {
	s := FailsafeSet{Node: "a", Lease: 7, Nodes: []string{"b"}}
	for _, tc := range []struct {
		nodes  []Node
		lapsed bool
		out    []string
	}{
		{[]Node{{Node: "a", Lease: 7}, {Node: "b", Lease: 8}, {Node: "c", Lease: 9}}, false, []string{"c"}},
		{[]Node{{Node: "a", Lease: 10}, {Node: "c", Lease: 9}}, true, []string{"c"}},
		{[]Node{{Node: "d", Lease: 11}, {Node: "b", Lease: 8}, {Node: "c", Lease: 9}}, true, []string{"c", "d"}},
		{nil, true, nil},
	} {
		if got := s.Lapsed(tc.nodes); got != tc.lapsed {
			t.Errorf("Lapsed among %+v: %v, want %v", tc.nodes, got, tc.lapsed)
		}
		if got := s.Outside(tc.nodes); !slices.Equal(got, tc.out) {
			t.Errorf("Outside among %+v: %v, want %v", tc.nodes, got, tc.out)
		}
	}
}

// TestHistoryChangeSaysRevision: vip history --json says each change's
// revision as revision, like the response's own, and as rev, its
// deprecated old name, for one release.
func TestHistoryChangeSaysRevision(t *testing.T) {
	b, err := json.Marshal(Change{Rev: 42, Kind: ChangeClaim, Node: "a"}.API())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["revision"] != float64(42) || got["rev"] != float64(42) {
		t.Errorf("history change JSON %s: want revision and rev 42", b)
	}
}
