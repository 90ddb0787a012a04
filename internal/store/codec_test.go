package store

import (
	"errors"
	"net/netip"
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
