package agent_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/agent"
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

// writeJSON is what WriteJSON writes for s, and the writes it made.
func writeJSON(s *agent.EngineStatus, indent bool) ([]byte, int, error) {
	var w countingWriter
	_, err := s.WriteJSON(&w, indent)
	return w.b.Bytes(), w.writes, err
}

type countingWriter struct {
	b      bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.b.Write(p)
}

var (
	statusAt  = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	statusNow = statusAt.Add(time.Minute + time.Second)
)

// variedClaims sets every field of a claim somewhere, with the values that
// take encoding/json's less travelled paths: escapes, zones other than UTC,
// zero and non-zero optional fields. (Invalid UTF-8, which does not come
// back from JSON as it went, is left to FuzzWriteJSON.)
func variedClaims() []announce.Status {
	at, now := statusAt, statusNow
	return []announce.Status{
		{Claim: announce.Claim{Addr: netip.MustParseAddr("192.0.2.10"), Interface: "eth0", ClaimedAt: at, RefreshedAt: at.Add(time.Minute)},
			MAC: "02:00:00:00:00:02", State: api.StateAnnouncing, WindowEnd: at.Add(time.Minute + 5*time.Second), Answered: 3, GratuitousFrames: 6},
		{Claim: announce.Claim{Addr: netip.MustParseAddr("2001:db8::10"), Interface: "eth0", ClaimedAt: at, RefreshedAt: at, AddedAddress: true,
			Options: announce.ClaimOptions{Window: time.Second, Interval: 100 * time.Millisecond, Frames: announce.FrameNA, RefreshEvery: time.Minute, OnConflict: announce.PolicyWarn}},
			MAC: "02:00:00:00:00:02", State: api.StateConflict, WindowEnd: at, // a window that has ended
			Claimers: []announce.Claimer{{MAC: net.HardwareAddr{2, 0, 0, 0, 0xee, 1}, Kind: "advertisement", FirstSeen: at, LastSeen: now, Count: 4}}},
		{Claim: announce.Claim{Addr: netip.MustParseAddr("fe80::1%eth<1>"), Interface: "eth\t1\u2028\x00<>&é", ClaimedAt: at.In(time.FixedZone("", -(9*3600 + 30*60 + 15))), RefreshedAt: at.Add(1)},
			State: api.StateWaiting, Answered: 1<<64 - 1},
		{Claim: announce.Claim{Addr: netip.MustParseAddr("::ffff:198.51.100.7"), Interface: "eth1", ClaimedAt: at.In(time.FixedZone("CET", 3600)), RefreshedAt: at,
			Options: announce.ClaimOptions{Frames: announce.DefaultFrameKinds, OnConflict: announce.PolicyYield}}, State: api.StateHolding},
		{}, // the zero address
	}
}

func variedAgent() api.Agent {
	return api.Agent{PID: 4242, Version: "dev (commit <unknown>, go1.26 & more)", Started: statusAt.Add(123456789).In(time.FixedZone("CET", 3600)),
		Socket: "/run/vip/vip \"x\".sock", StateFile: "/run/vip/v\\ip.state", Autostarted: true}
}

func variedCaptures() []api.CaptureStat {
	return []api.CaptureStat{
		{Interface: "eth0", Received: 1234, Undecodable: 2, Scope: "held"},
		{Interface: "eth1", Dropped: 7, Error: "capture eth1: permission denied\n\r\b\f"},
	}
}

// manyClaims is n claims in their window, as right after a claim of n
// addresses.
func manyClaims(n int) []announce.Status {
	at := statusAt.Add(123456789)
	base := netip.MustParseAddr("2001:db8:1::").As16()
	out := make([]announce.Status, n)
	for i := range out {
		a := base
		a[13], a[14], a[15] = byte(i>>16), byte(i>>8), byte(i)
		out[i] = announce.Status{Claim: announce.Claim{Addr: netip.AddrFrom16(a), Interface: "eth0", ClaimedAt: at, RefreshedAt: at},
			MAC: "02:00:00:00:00:02", State: api.StateAnnouncing, WindowEnd: at.Add(time.Duration(3+i%5) * time.Second), GratuitousFrames: 4}
	}
	return out
}

// TestWriteJSONIsEncodingJSON holds the agent's way of writing a status,
// converting each claim as it goes, to encoding/json's output for the
// StatusResponse that ClaimsFromStatus makes of the same claims; and what
// it writes, a client decodes back to that StatusResponse.
func TestWriteJSONIsEncodingJSON(t *testing.T) {
	tests := []struct {
		name      string
		claims    []announce.Status
		captures  []api.CaptureStat
		minWrites int
	}{
		{"varied", variedClaims(), variedCaptures(), 1},
		{"no claims", nil, variedCaptures(), 1},
		{"empty captures", variedClaims()[:1], []api.CaptureStat{}, 1},
		{"in pieces", append(manyClaims(5000), variedClaims()...), nil, 4},
	}
	for _, tt := range tests {
		for _, indent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/indent=%v", tt.name, indent), func(t *testing.T) {
				sent := api.StatusResponse{Agent: variedAgent(), Claims: agent.ClaimsFromStatus(tt.claims, statusNow), Captures: tt.captures}
				want, err := stdJSON(sent, indent)
				if err != nil {
					t.Fatal(err)
				}
				st := agent.EngineStatus{Agent: sent.Agent, Claims: tt.claims, Now: statusNow, Captures: tt.captures}
				got, writes, err := writeJSON(&st, indent)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					at := firstDiff(got, want)
					t.Fatalf("from byte %d on, got:\n%.1000s\nwant (encoding/json):\n%.1000s", at, got[at:], want[at:])
				}
				if writes < tt.minWrites {
					t.Errorf("got %d writes, want at least %d: the answer goes in pieces", writes, tt.minWrites)
				}
				var read api.StatusResponse
				if err := json.NewDecoder(bytes.NewReader(got)).Decode(&read); err != nil {
					t.Fatalf("decode: %v", err)
				}
				if again, err := stdJSON(read, indent); err != nil || !bytes.Equal(again, want) {
					at := firstDiff(again, want)
					t.Errorf("decoded and encoded again (%v), from byte %d on, got:\n%.1000s\nwant:\n%.1000s", err, at, again[at:], want[at:])
				}
			})
		}
	}
}

// firstDiff returns where a and b first differ.
func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// TestStatusResponseMembers keeps WriteJSON, which lays out the members of
// StatusResponse, in step with it: a member added fails here until
// WriteJSON writes it (and this list names it).
func TestStatusResponseMembers(t *testing.T) {
	var got []string
	typ := reflect.TypeFor[api.StatusResponse]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		got = append(got, f.Name+" "+f.Type.String()+" "+f.Tag.Get("json"))
	}
	want := []string{"Agent api.Agent agent", "Claims []api.Claim claims", "Captures []api.CaptureStat captures,omitempty"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StatusResponse's members are %q, WriteJSON writes %q: make WriteJSON write what it now holds", got, want)
	}
}

func TestWriteJSONFails(t *testing.T) {
	bad := announce.Status{Claim: announce.Claim{ClaimedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	many := manyClaims(5000)
	tests := []struct {
		name        string
		claims      []announce.Status
		wantWritten bool
	}{
		{"year 10000 at once", []announce.Status{bad}, false},
		{"an offset of a day at once", []announce.Status{{Claim: announce.Claim{RefreshedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))}}}, false},
		{"year 10000 once the answer went out", append(many, bad), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := stdJSON(api.StatusResponse{Claims: agent.ClaimsFromStatus(tt.claims, statusNow)}, false); err == nil {
				t.Fatal("encoding/json wrote it: the case tests nothing")
			}
			st := agent.EngineStatus{Claims: tt.claims, Now: statusNow}
			written, err := st.WriteJSON(io.Discard, true)
			if err == nil || written != tt.wantWritten {
				t.Errorf("got written %v, error %v; want written %v and an error as from encoding/json", written, err, tt.wantWritten)
			}
		})
	}
	t.Run("a failing writer", func(t *testing.T) {
		st := agent.EngineStatus{Claims: many, Now: statusNow}
		w := &failingWriter{after: 1}
		written, err := st.WriteJSON(w, true)
		if !written || !errors.Is(err, errWriter) || w.writes != 2 {
			t.Errorf("got written %v, error %v after %d writes; want written, errWriter and no write after the failed one", written, err, w.writes)
		}
	})
}

var errWriter = errors.New("the client went away")

type failingWriter struct{ after, writes int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes > w.after {
		return 0, errWriter
	}
	return len(p), nil
}

// FuzzWriteJSON holds WriteJSON to encoding/json for any strings, numbers,
// durations and times.
func FuzzWriteJSON(f *testing.F) {
	f.Add("eth0<&>", "\u2028\xff", uint64(7), int64(1100*time.Millisecond), int64(1798592400), int64(5), uint8(announce.DefaultFrameKinds), true)
	f.Add("", "", uint64(0), int64(0), int64(0), int64(0), uint8(0), false)
	f.Add("\x00\"\\", "é", uint64(1<<63), int64(-1), int64(-62135596800), int64(-3600), uint8(0xff), false)
	f.Fuzz(func(t *testing.T, s1, s2 string, n uint64, d, sec, off int64, frames uint8, flag bool) {
		at := time.Unix(sec, d).In(time.FixedZone(s2, int(off%(30*3600))))
		c := announce.Status{Claim: announce.Claim{Addr: netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 15: byte(n)}).WithZone(s1), Interface: s1, ClaimedAt: at, RefreshedAt: at.UTC(), AddedAddress: flag,
			Options: announce.ClaimOptions{Window: time.Duration(d), Interval: time.Duration(-d), Frames: announce.FrameKinds(frames), RefreshEvery: time.Duration(d / 7), OnConflict: announce.ConflictPolicy(s2)}},
			MAC: s2, State: s1 + s2, WindowEnd: at, Answered: n, GratuitousFrames: n / 3}
		if flag {
			c.Claimers = []announce.Claimer{{MAC: net.HardwareAddr(s2), Kind: s1, FirstSeen: at, LastSeen: at, Count: n}}
		}
		now := time.Unix(sec, 0)
		claims := []announce.Status{c, {}}
		ag := api.Agent{PID: int(sec), Version: s1, Started: at, Socket: s2, Autostarted: flag}
		captures := []api.CaptureStat{{Interface: s1, Received: n, Error: s2}}
		for _, indent := range []bool{false, true} {
			want, werr := stdJSON(api.StatusResponse{Agent: ag, Claims: agent.ClaimsFromStatus(claims, now), Captures: captures}, indent)
			st := agent.EngineStatus{Agent: ag, Claims: claims, Now: now, Captures: captures}
			got, _, err := writeJSON(&st, indent)
			if (err != nil) != (werr != nil) {
				t.Fatalf("indent %v: got error %v, encoding/json's %v", indent, err, werr)
			}
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("indent %v: got:\n%s\nwant (encoding/json):\n%s", indent, got, want)
			}
		}
	})
}

// FuzzAppendIndented holds AppendIndented to json.Indent for any JSON,
// compact, at any depth.
func FuzzAppendIndented(f *testing.F) {
	for _, s := range []string{
		`{"a":[],"b":{},"c":[1,{"d":"\\\"x\\","e":null}],"f":"\u003c:,{}[]"}`,
		`"a string"`, `-1.5e3`, `[[[]],{}]`, `{"":{"":[true,false]}}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	b, err := stdJSON(api.StatusResponse{Agent: variedAgent(), Claims: agent.ClaimsFromStatus(variedClaims(), statusNow), Captures: variedCaptures()}, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, uint8(2))
	f.Fuzz(func(t *testing.T, src []byte, depth uint8) {
		var compact bytes.Buffer
		if json.Compact(&compact, src) != nil {
			return
		}
		d := int(depth % 4)
		var want bytes.Buffer
		if err := json.Indent(&want, compact.Bytes(), strings.Repeat("  ", d), "  "); err != nil {
			t.Fatal(err)
		}
		if got := agent.AppendIndented([]byte("prefix"), compact.Bytes(), d); string(got) != "prefix"+want.String() {
			t.Fatalf("%s at depth %d:\ngot  %q\nwant %q (json.Indent)", compact.Bytes(), d, got, "prefix"+want.String())
		}
	})
}

// BenchmarkStatusJSON compares WriteJSON with encoding/json's one Encode
// of the converted status, on 10,000 claims, compact (the agent's answer)
// and indented (vip status --json).
func BenchmarkStatusJSON(b *testing.B) {
	st := agent.EngineStatus{Agent: variedAgent(), Claims: manyClaims(10000), Now: statusNow}
	for _, indent := range []bool{false, true} {
		b.Run(fmt.Sprintf("encoding-json/indent=%v", indent), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sr := api.StatusResponse{Agent: st.Agent, Claims: agent.ClaimsFromStatus(st.Claims, st.Now)}
				if _, err := stdJSON(sr, indent); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("WriteJSON/indent=%v", indent), func(b *testing.B) {
			var w countingWriter
			b.ReportAllocs()
			for b.Loop() {
				w.b.Reset()
				if _, err := st.WriteJSON(&w, indent); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(w.b.Len()))
		})
	}
}
