package agent

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// fullClaim is a claim with every field of api.Claim, api.Claimer and
// api.ClaimTraffic set.
func fullClaim() api.Claim {
	at := time.Date(2026, 12, 7, 5, 6, 7, 891011121, time.UTC)
	return api.Claim{
		Addr: "2001:db8::10", Interface: "eth0", MAC: "02:00:00:00:00:02", State: api.StateAnnouncing,
		ClaimedAt: at, RefreshedAt: at.Add(time.Second), WindowEnd: at.Add(5 * time.Second),
		WindowRemaining: api.Duration(3200 * time.Millisecond), Answered: 12, GratuitousFrames: 4, Assigned: true,
		Window: api.Duration(5 * time.Second), Interval: api.Duration(1100 * time.Millisecond), Frames: "arp-request,arp-reply,na",
		RefreshEvery: api.Duration(30 * time.Second), OnConflict: "defend", Group: "web", Note: "standby for b",
		Claimers: []api.Claimer{
			{MAC: "02:00:00:00:00:0b", Node: "b", Kind: "reply", FirstSeen: at, LastSeen: at.Add(time.Minute), Count: 3},
			{MAC: "02:00:00:00:00:0c", Kind: "advertisement", FirstSeen: at.In(time.FixedZone("", 3600)), LastSeen: at, Count: 1},
		},
		Responder: "ebpf (tcx)",
		Traffic:   &api.ClaimTraffic{Packets: 7, Bytes: 700, PacketsPerSecond: 9.9, BytesPerSecond: 1.5e21},
	}
}

// TestAppendClaimJSONCoversEveryField holds appendClaimJSON to encoding/json
// for a claim with every field set, each left zero in turn, and for the
// values it leaves to encoding/json; and fails when a field is added to the
// types it writes by hand, which it would leave out.
func TestAppendClaimJSONCoversEveryField(t *testing.T) {
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[api.Claim]():        21,
		reflect.TypeFor[api.Claimer]():      6,
		reflect.TypeFor[api.ClaimTraffic](): 4,
	} {
		if typ.NumField() != n {
			t.Errorf("%v has %d fields, appendClaimJSON writes %d: write the new ones there", typ, typ.NumField(), n)
		}
	}
	check := func(name string, c api.Claim, wantOK bool) {
		t.Helper()
		want, err := json.Marshal(&c)
		if err != nil && wantOK {
			t.Fatal(err)
		}
		got, ok := appendClaimJSON([]byte("x"), &c)
		switch {
		case ok != wantOK:
			t.Errorf("%s: wrote it %v, want %v", name, ok, wantOK)
		case !ok && string(got) != "x":
			t.Errorf("%s: left %q behind, want b as it was", name, got)
		case ok && string(got) != "x"+string(want):
			t.Errorf("%s:\ngot  %s\nwant %s", name, got[1:], want)
		}
	}
	check("every field", fullClaim(), true)
	full := reflect.ValueOf(fullClaim())
	for i := range full.NumField() {
		c := fullClaim()
		reflect.ValueOf(&c).Elem().Field(i).SetZero()
		check("without "+full.Type().Field(i).Name, c, true)
	}
	c := fullClaim()
	c.Traffic.BytesPerSecond, c.Traffic.PacketsPerSecond = 1e-7, -0.5
	check("small and negative rates", c, true)
	c = fullClaim()
	c.Note = "lost to b <at 05:06>"
	check("a note encoding/json escapes", c, false)
	c = fullClaim()
	c.Note = "défendu"
	check("a note beyond ASCII", c, false)
	c = fullClaim()
	c.Traffic.PacketsPerSecond = math.NaN()
	check("a rate JSON has no number for", c, false)
	c = fullClaim()
	c.ClaimedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	check("a year RFC 3339 cannot write", c, false)
}
