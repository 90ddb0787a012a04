package commands

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// BenchmarkPrintStatus10k measures the plain table of 10,000 claims, once
// the status is decoded.
func BenchmarkPrintStatus10k(b *testing.B) {
	st := statusFixture
	st.Claims = make([]api.Claim, 10000)
	at := time.Date(2026, 11, 30, 1, 0, 0, 123456789, time.UTC)
	for i := range st.Claims {
		st.Claims[i] = api.Claim{Addr: fmt.Sprintf("2001:db8:1::%x", i), Interface: "eth0", MAC: "02:00:00:00:00:02", State: "announcing",
			ClaimedAt: at, RefreshedAt: at, WindowEnd: at.Add(5 * time.Second), WindowRemaining: api.Duration(3200 * time.Millisecond),
			GratuitousFrames: 4, Window: api.Duration(5 * time.Second), Interval: api.Duration(1100 * time.Millisecond), Frames: "arp-request,arp-reply,na", OnConflict: "defend"}
	}
	d := &deps{io: IO{Out: io.Discard}}
	now := at.Add(2 * time.Second)
	b.ReportAllocs()
	for b.Loop() {
		if err := printStatus(d, st, now); err != nil {
			b.Fatal(err)
		}
	}
}
