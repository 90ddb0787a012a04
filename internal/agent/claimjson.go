package agent

import (
	"math"
	"strconv"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// appendClaimJSON appends c as encoding/json writes it, compact, and says
// whether it could: a string with a byte encoding/json escapes, a time
// RFC 3339 cannot write, or a float JSON has no number for, is left to
// encoding/json (false, and b as it was). At 10,000 claims encoding/json
// spent half its time on the claims' times (time.Time's MarshalJSON,
// whose output it then checks byte by byte) and the rest on reflection:
// this writes a claim in a fifth of that (BenchmarkStatusJSON). The tests
// hold it to encoding/json for every field, and fail when api.Claim gains
// one this does not write (TestAppendClaimJSONCoversEveryField).
func appendClaimJSON(b []byte, c *api.Claim) ([]byte, bool) {
	start := len(b)
	ok := true
	str := func(key, s string, always bool) {
		if !always && s == "" {
			return
		}
		b = append(b, key...)
		b, ok = appendPlainString(b, s, ok)
	}
	tm := func(key string, t time.Time, always bool) {
		if !always && t.IsZero() {
			return
		}
		b = append(b, key...)
		// What RFC 3339 cannot write, time.Time's MarshalJSON refuses:
		// a year outside 0-9999, a zone offset of a day or more.
		_, off := t.Zone()
		if y := t.Year(); y < 0 || y > 9999 || off <= -24*60*60 || off >= 24*60*60 {
			ok = false
			return
		}
		b = append(b, '"')
		b = t.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	dur := func(key string, d api.Duration, always bool) {
		if !always && d == 0 {
			return
		}
		b = append(b, key...)
		b = append(b, '"')
		b = append(b, time.Duration(d).String()...)
		b = append(b, '"')
	}
	num := func(key string, n uint64) {
		b = append(b, key...)
		b = strconv.AppendUint(b, n, 10)
	}
	str(`{"addr":`, c.Addr, true)
	str(`,"interface":`, c.Interface, true)
	str(`,"mac":`, c.MAC, true)
	str(`,"state":`, c.State, true)
	tm(`,"claimed_at":`, c.ClaimedAt, true)
	tm(`,"refreshed_at":`, c.RefreshedAt, true)
	tm(`,"window_end":`, c.WindowEnd, false)
	dur(`,"window_remaining":`, c.WindowRemaining, false)
	num(`,"answered":`, c.Answered)
	num(`,"gratuitous_frames":`, c.GratuitousFrames)
	if c.Assigned {
		b = append(b, `,"assigned":true`...)
	}
	dur(`,"window":`, c.Window, true)
	dur(`,"interval":`, c.Interval, true)
	str(`,"frames":`, c.Frames, true)
	dur(`,"refresh_every":`, c.RefreshEvery, false)
	str(`,"on_conflict":`, c.OnConflict, false)
	str(`,"group":`, c.Group, false)
	str(`,"note":`, c.Note, false)
	if len(c.Claimers) > 0 {
		b = append(b, `,"claimers":[`...)
		for i := range c.Claimers {
			cl := &c.Claimers[i]
			if i > 0 {
				b = append(b, ',')
			}
			str(`{"mac":`, cl.MAC, true)
			str(`,"node":`, cl.Node, false)
			str(`,"kind":`, cl.Kind, true)
			tm(`,"first_seen":`, cl.FirstSeen, true)
			tm(`,"last_seen":`, cl.LastSeen, true)
			num(`,"count":`, cl.Count)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	str(`,"responder":`, c.Responder, false)
	if t := c.Traffic; t != nil {
		num(`,"traffic":{"packets":`, t.Packets)
		num(`,"bytes":`, t.Bytes)
		b = append(b, `,"packets_per_second":`...)
		b, ok = appendFloat(b, t.PacketsPerSecond, ok)
		b = append(b, `,"bytes_per_second":`...)
		b, ok = appendFloat(b, t.BytesPerSecond, ok)
		b = append(b, '}')
	}
	b = append(b, '}')
	if !ok {
		return b[:start], false
	}
	return b, true
}

// appendPlainString appends s quoted when encoding/json would write it
// byte for byte (printable ASCII, none of the characters it escapes);
// otherwise it leaves ok false.
func appendPlainString(b []byte, s string, ok bool) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ok
}

// appendFloat appends f as encoding/json writes a float64: the shortest
// decimal that reads back as f, in exponent form (without a leading zero
// in a negative exponent) below 1e-6 and from 1e21; NaN and the infinities
// leave ok false, as encoding/json refuses them.
func appendFloat(b []byte, f float64, ok bool) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, ok
}
