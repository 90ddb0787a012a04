package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
)

// stdJSON is what encoding/json writes for v: compact like the agent's
// answers, or indented like vip's --json output.
func stdJSON(v any, indent bool) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if indent {
		enc.SetIndent("", "  ")
	}
	err := enc.Encode(v)
	return b.Bytes(), err
}

// variedStatus sets every field somewhere, with the values that take
// encoding/json's less travelled paths: escapes, invalid UTF-8, zones other
// than UTC, zero and non-zero optional fields, empty and nil lists.
func variedStatus() api.StatusResponse {
	paris := time.FixedZone("CET", 3600)
	odd := time.FixedZone("", -(9*3600 + 30*60 + 15))
	at := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	return api.StatusResponse{
		Agent: api.Agent{PID: 4242, Version: "dev (commit <unknown>, go1.26 & more)", Started: at.Add(123456789).In(paris),
			Socket: "/run/vip/vip \"x\".sock", StateFile: "/run/vip/v\\ip.state", Autostarted: true},
		Claims: []api.Claim{
			{Addr: "192.0.2.10", Interface: "eth0", MAC: "02:00:00:00:00:02", State: "announcing",
				ClaimedAt: at, RefreshedAt: at.Add(time.Minute), WindowEnd: at.Add(time.Minute + 5*time.Second),
				WindowRemaining: api.Duration(3200 * time.Millisecond), Answered: 12, GratuitousFrames: 6,
				Window: api.Duration(5 * time.Second), Interval: api.Duration(1100 * time.Millisecond), Frames: "arp-request,arp-reply,na", OnConflict: "defend"},
			{Addr: "2001:db8::10", Interface: "bond0.100", MAC: "02:00:00:00:00:02", State: "conflict",
				ClaimedAt: at.In(odd), RefreshedAt: at.Add(1),
				Answered: 1<<64 - 1, GratuitousFrames: 5, Assigned: true, Window: api.Duration(time.Nanosecond), Interval: api.Duration(1500 * time.Microsecond),
				Frames: "na", RefreshEvery: api.Duration(90 * time.Minute), OnConflict: "warn",
				Claimers: []api.Claimer{
					{MAC: "02:00:00:00:ee:01", Kind: "advertisement", FirstSeen: at, LastSeen: at.Add(61 * time.Second), Count: 4},
					{MAC: "02:00:00:00:ee:02", Kind: "reply", FirstSeen: at.In(paris), LastSeen: at.Add(999999999), Count: 0},
				}},
			{Addr: "198.51.100.7", Interface: "eth\t1\u2028\u2029\x00\x1f\x7f<>&é\xff\xfe", State: "waiting",
				ClaimedAt: at, RefreshedAt: at, WindowRemaining: api.Duration(-time.Second), Window: api.Duration(0), Interval: api.Duration(-1)},
			{},
		},
		Captures: []api.CaptureStat{
			{Interface: "eth0", Received: 1234, Undecodable: 2, Scope: "held"},
			{Interface: "eth1", Dropped: 7, Error: "capture eth1: permission denied\n\r\b\f"},
		},
	}
}

func TestAppendStatusIsEncodingJSON(t *testing.T) {
	varied := variedStatus()
	tests := []struct {
		name string
		st   api.StatusResponse
	}{
		{"varied", varied},
		{"no claims", api.StatusResponse{Agent: varied.Agent, Claims: []api.Claim{}}},
		{"nil claims", api.StatusResponse{Agent: varied.Agent}},
		{"empty captures", api.StatusResponse{Agent: varied.Agent, Claims: varied.Claims[:1], Captures: []api.CaptureStat{}}},
		{"zero", api.StatusResponse{}},
	}
	for _, tt := range tests {
		for _, indent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/indent=%v", tt.name, indent), func(t *testing.T) {
				want, err := stdJSON(tt.st, indent)
				if err != nil {
					t.Fatal(err)
				}
				got, err := api.AppendStatus([]byte("prefix"), &tt.st, indent)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, append([]byte("prefix"), want...)) {
					t.Errorf("got:\n%s\nwant (encoding/json):\nprefix%s", got, want)
				}
			})
		}
	}
}

// TestEngineStatusIsEncodingJSON holds the agent's way of writing a status,
// converting each claim as it goes, to encoding/json's output for the
// StatusResponse that ClaimsFromStatus makes of the same claims.
func TestEngineStatusIsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	now := at.Add(time.Minute + time.Second)
	defaults := announce.EngineConfig{Burst: announce.SchedulerConfig{Window: 5 * time.Second, Interval: 1100 * time.Millisecond}, Frames: announce.DefaultFrames}
	claims := []announce.Status{
		{Claim: announce.Claim{Addr: netip.MustParseAddr("192.0.2.10"), Interface: "eth0", ClaimedAt: at, RefreshedAt: at.Add(time.Minute)},
			MAC: "02:00:00:00:00:02", State: announce.StateAnnouncing, WindowEnd: at.Add(time.Minute + 5*time.Second), Answered: 3, GratuitousFrames: 6},
		{Claim: announce.Claim{Addr: netip.MustParseAddr("2001:db8::10"), Interface: "eth0", ClaimedAt: at, RefreshedAt: at, AddedAddress: true,
			Options: announce.ClaimOptions{Window: time.Second, Interval: 100 * time.Millisecond, Frames: announce.FrameNA, RefreshEvery: time.Minute, OnConflict: announce.PolicyWarn}},
			MAC: "02:00:00:00:00:02", State: announce.StateConflict, WindowEnd: at, // a window that has ended
			Claimers: []announce.Claimer{{MAC: net.HardwareAddr{2, 0, 0, 0, 0xee, 1}, Kind: "advertisement", FirstSeen: at, LastSeen: now, Count: 4}}},
		{Claim: announce.Claim{Addr: netip.MustParseAddr("fe80::1%eth<1>"), Interface: "eth<1>", ClaimedAt: at.In(time.FixedZone("", 3600)), RefreshedAt: at},
			State: announce.StateWaiting},
		{Claim: announce.Claim{Addr: netip.MustParseAddr("::ffff:198.51.100.7"), Interface: "eth1", ClaimedAt: at, RefreshedAt: at,
			Options: announce.ClaimOptions{Frames: announce.DefaultFrames, OnConflict: announce.PolicyYield}}, State: announce.StateHolding},
		{}, // the zero address
	}
	agent := variedStatus().Agent
	captures := variedStatus().Captures
	for _, tt := range []struct {
		name   string
		claims []announce.Status
	}{{"varied", claims}, {"no claims", nil}} {
		for _, indent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/indent=%v", tt.name, indent), func(t *testing.T) {
				want, err := stdJSON(api.StatusResponse{Agent: agent, Claims: api.ClaimsFromStatus(tt.claims, now, defaults), Captures: captures}, indent)
				if err != nil {
					t.Fatal(err)
				}
				st := api.EngineStatus{Agent: agent, Claims: tt.claims, Now: now, Defaults: defaults, Captures: captures}
				got, err := st.AppendJSON(nil, indent)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("got:\n%s\nwant (encoding/json):\n%s", got, want)
				}
			})
		}
	}
}

// TestVariedStatusSetsEveryField keeps the comparison above complete: a
// field added to the status without AppendStatus knowing of it fails
// here until variedStatus sets it, and then fails the comparison.
func TestVariedStatusSetsEveryField(t *testing.T) {
	st := variedStatus()
	seen := map[string]bool{}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[time.Time]() {
				break
			}
			for i := range v.NumField() {
				f := v.Type().Field(i)
				p := path + "." + f.Name
				if !v.Field(i).IsZero() {
					seen[p] = true
				} else if _, ok := seen[p]; !ok {
					seen[p] = false
				}
				walk(p, v.Field(i))
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(path, v.Index(i))
			}
		}
	}
	walk("StatusResponse", reflect.ValueOf(st))
	for p, set := range seen {
		if !set {
			t.Errorf("%s is zero everywhere in variedStatus: set it, so the comparison with encoding/json covers it", p)
		}
	}
}

func TestAppendStatusFailsLikeEncodingJSON(t *testing.T) {
	tests := []struct {
		name string
		at   time.Time
	}{
		{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"year -1", time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"offset of a day", time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := api.StatusResponse{Claims: []api.Claim{{ClaimedAt: tt.at}}}
			if _, err := stdJSON(st, false); err == nil {
				t.Fatal("encoding/json wrote it: the case tests nothing")
			}
			if got, err := api.AppendStatus(nil, &st, false); err == nil {
				t.Errorf("got %s, want an error as from encoding/json", got)
			}
		})
	}
}

// FuzzAppendStatus holds AppendStatus to encoding/json for any strings,
// numbers, durations and times.
func FuzzAppendStatus(f *testing.F) {
	f.Add("192.0.2.10", "eth0<&>", "\u2028\xff", uint64(7), int64(1100*time.Millisecond), int64(1798592400), int64(5), true)
	f.Add("", "", "", uint64(0), int64(0), int64(0), int64(0), false)
	f.Add("\x00\"\\", "é", "\t", uint64(1<<63), int64(-1), int64(-62135596800), int64(-3600), false)
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, n uint64, d, sec, off int64, flag bool) {
		at := time.Unix(sec, d).In(time.FixedZone(s3, int(off%(30*3600))))
		c := api.Claim{Addr: s1, Interface: s2, MAC: s3, State: s1 + s2, ClaimedAt: at, RefreshedAt: at.UTC(), WindowEnd: at,
			WindowRemaining: api.Duration(d), Answered: n, GratuitousFrames: n / 3, Assigned: flag, Window: api.Duration(-d), Interval: api.Duration(d / 1000),
			Frames: s3, RefreshEvery: api.Duration(d / 7), OnConflict: s2}
		if flag {
			c.Claimers = []api.Claimer{{MAC: s2, Kind: s1, FirstSeen: at, LastSeen: at, Count: n}}
		}
		st := api.StatusResponse{Agent: api.Agent{PID: int(sec), Version: s1, Started: at, Socket: s2, StateFile: s3, Autostarted: flag},
			Claims: []api.Claim{c, {}}, Captures: []api.CaptureStat{{Interface: s1, Received: n, Error: s2}}}
		for _, indent := range []bool{false, true} {
			want, werr := stdJSON(st, indent)
			got, err := api.AppendStatus(nil, &st, indent)
			if (err != nil) != (werr != nil) {
				t.Fatalf("indent %v: got error %v, encoding/json's %v", indent, err, werr)
			}
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("indent %v: got:\n%s\nwant (encoding/json):\n%s", indent, got, want)
			}
			if err == nil {
				checkDecode(t, got)
			}
		}
	})
}

// tenKStatus is a status of 10,000 claims in their window, as right after
// the lab's 10,000-address claim.
func tenKStatus() api.StatusResponse {
	st := variedStatus()
	st.Claims = make([]api.Claim, 10000)
	at := time.Date(2026, 11, 30, 1, 0, 0, 123456789, time.UTC)
	for i := range st.Claims {
		st.Claims[i] = api.Claim{Addr: fmt.Sprintf("2001:db8:1::%x:%x", i>>16, i&0xffff), Interface: "eth0", MAC: "02:00:00:00:00:02", State: "announcing",
			ClaimedAt: at, RefreshedAt: at, WindowEnd: at.Add(5 * time.Second), WindowRemaining: api.Duration(time.Duration(3200+i%100) * time.Millisecond),
			GratuitousFrames: 4, Window: api.Duration(5 * time.Second), Interval: api.Duration(1100 * time.Millisecond), Frames: "arp-request,arp-reply,na", OnConflict: "defend"}
	}
	return st
}

// BenchmarkStatusJSON compares AppendStatus with encoding/json on 10,000
// claims, compact (the agent's answer) and indented (vip status --json).
func BenchmarkStatusJSON(b *testing.B) {
	st := tenKStatus()
	for _, indent := range []bool{false, true} {
		b.Run(fmt.Sprintf("encoding-json/indent=%v", indent), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := stdJSON(st, indent); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("append/indent=%v", indent), func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = api.AppendStatus(buf[:0], &st, indent); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
