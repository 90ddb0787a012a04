package api

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vipctl/vip/announce"
)

// AppendStatus appends r as JSON to dst: byte for byte what an
// encoding/json Encoder writes for it, trailing newline included, and with
// indent what it writes after SetIndent("", "  "), the form vip status
// --json prints. It exists because the agent answers status with every
// claim: at 10,000 claims encoding/json's reflection took half of the
// agent's answer. The tests hold it to encoding/json's output.
//
// It fails where encoding/json fails: on a time that RFC 3339 cannot
// write (a year outside [0,9999], a zone offset of a day or more).
func AppendStatus(dst []byte, r *StatusResponse, indent bool) ([]byte, error) {
	claim := func(i int) (*Claim, netip.Addr) { return &r.Claims[i], netip.Addr{} }
	return appendStatus(dst, &r.Agent, len(r.Claims), r.Claims == nil, claim, r.Captures, indent)
}

// EngineStatus is a status as the agent has it: the engine's view of each
// claim, not yet converted for clients.
type EngineStatus struct {
	Agent  Agent
	Claims []announce.Status
	// Now and Defaults convert the claims, as for ClaimsFromStatus.
	Now      time.Time
	Defaults announce.EngineConfig
	Captures []CaptureStat
}

// AppendJSON appends what AppendStatus appends for the StatusResponse of
// s, whose claims ClaimsFromStatus converts (no claims is an empty list,
// not null), converting one claim at a time instead of into a slice first.
func (s *EngineStatus) AppendJSON(dst []byte, indent bool) ([]byte, error) {
	cv := newClaimConverter(s.Now, s.Defaults)
	var c Claim
	claim := func(i int) (*Claim, netip.Addr) {
		st := &s.Claims[i]
		// Without a zone, an address is digits, dots and colons: it goes
		// into the JSON as it is, with no string made for it.
		if st.Addr.IsValid() && st.Addr.Zone() == "" {
			c = cv.claimWithoutAddr(st)
			return &c, st.Addr
		}
		c = cv.claim(st)
		return &c, netip.Addr{}
	}
	return appendStatus(dst, &s.Agent, len(s.Claims), false, claim, s.Captures, indent)
}

// appendStatus writes a status whose claims are claim(0) to claim(n-1).
// Where claim returns a valid address, it is written for the claim's addr.
func appendStatus(dst []byte, agent *Agent, n int, nilClaims bool, claim func(int) (*Claim, netip.Addr), captures []CaptureStat, indent bool) ([]byte, error) {
	w := jsonAppender{b: dst, indent: indent}
	w.open('{')
	w.key(`"agent":`)
	w.agent(agent)
	w.key(`"claims":`)
	if nilClaims {
		w.null()
	} else {
		w.open('[')
		for i := range n {
			w.elem()
			w.claim(claim(i))
		}
		w.close(']')
	}
	if len(captures) > 0 {
		w.key(`"captures":`)
		w.open('[')
		for i := range captures {
			w.elem()
			w.capture(&captures[i])
		}
		w.close(']')
	}
	w.close('}')
	w.b = append(w.b, '\n')
	if w.err != nil {
		return dst, w.err
	}
	return w.b, nil
}

func (w *jsonAppender) agent(a *Agent) {
	w.open('{')
	w.key(`"pid":`)
	w.b = strconv.AppendInt(w.b, int64(a.PID), 10)
	w.key(`"version":`)
	w.str(a.Version)
	w.key(`"started":`)
	w.time(a.Started)
	w.key(`"socket":`)
	w.str(a.Socket)
	w.key(`"state_file":`)
	w.str(a.StateFile)
	w.key(`"autostarted":`)
	w.bool(a.Autostarted)
	w.close('}')
}

// claim follows the fields of Claim in order, with their omitempty and
// omitzero rules. A valid addr, which needs no escaping, stands for c.Addr.
func (w *jsonAppender) claim(c *Claim, addr netip.Addr) {
	w.open('{')
	w.key(`"addr":`)
	if addr.IsValid() {
		w.b = append(w.b, '"')
		w.b = addr.AppendTo(w.b)
		w.b = append(w.b, '"')
	} else {
		w.str(c.Addr)
	}
	w.key(`"interface":`)
	w.str(c.Interface)
	w.key(`"mac":`)
	w.str(c.MAC)
	w.key(`"state":`)
	w.str(c.State)
	w.key(`"claimed_at":`)
	w.time(c.ClaimedAt)
	w.key(`"refreshed_at":`)
	w.time(c.RefreshedAt)
	if !c.WindowEnd.IsZero() {
		w.key(`"window_end":`)
		w.time(c.WindowEnd)
	}
	if c.WindowRemaining != 0 {
		w.key(`"window_remaining":`)
		w.duration(c.WindowRemaining)
	}
	w.key(`"answered":`)
	w.b = strconv.AppendUint(w.b, c.Answered, 10)
	w.key(`"gratuitous_frames":`)
	w.b = strconv.AppendUint(w.b, c.GratuitousFrames, 10)
	if c.Assigned {
		w.key(`"assigned":`)
		w.bool(true)
	}
	w.key(`"window":`)
	w.duration(c.Window)
	w.key(`"interval":`)
	w.duration(c.Interval)
	w.key(`"frames":`)
	w.str(c.Frames)
	if c.RefreshEvery != 0 {
		w.key(`"refresh_every":`)
		w.duration(c.RefreshEvery)
	}
	if c.OnConflict != "" {
		w.key(`"on_conflict":`)
		w.str(c.OnConflict)
	}
	if len(c.Claimers) > 0 {
		w.key(`"claimers":`)
		w.open('[')
		for i := range c.Claimers {
			w.elem()
			w.claimer(&c.Claimers[i])
		}
		w.close(']')
	}
	w.close('}')
}

func (w *jsonAppender) claimer(c *Claimer) {
	w.open('{')
	w.key(`"mac":`)
	w.str(c.MAC)
	w.key(`"kind":`)
	w.str(c.Kind)
	w.key(`"first_seen":`)
	w.time(c.FirstSeen)
	w.key(`"last_seen":`)
	w.time(c.LastSeen)
	w.key(`"count":`)
	w.b = strconv.AppendUint(w.b, c.Count, 10)
	w.close('}')
}

func (w *jsonAppender) capture(c *CaptureStat) {
	w.open('{')
	w.key(`"interface":`)
	w.str(c.Interface)
	w.key(`"received":`)
	w.b = strconv.AppendUint(w.b, c.Received, 10)
	w.key(`"dropped":`)
	w.b = strconv.AppendUint(w.b, c.Dropped, 10)
	w.key(`"undecodable":`)
	w.b = strconv.AppendUint(w.b, c.Undecodable, 10)
	if c.Scope != "" {
		w.key(`"scope":`)
		w.str(c.Scope)
	}
	if c.Error != "" {
		w.key(`"error":`)
		w.str(c.Error)
	}
	w.close('}')
}

// jsonAppender writes JSON the way encoding/json does, compact or
// indented like json.Indent with no prefix and two spaces.
type jsonAppender struct {
	b      []byte
	indent bool
	depth  int
	// empty is set while the innermost object or array has no member yet:
	// an empty one closes on the same line, as json.Indent writes it.
	empty bool
	// durs remembers the text of the last durations written: a status
	// repeats the same few windows and intervals thousands of times.
	durs [4]struct {
		d Duration
		s string
	}
	nextDur int
	// seconds are the last two seconds written, most recent first: times
	// in the same second and zone differ in their fraction alone, and
	// the claims of a status share few seconds.
	seconds [2]writtenSecond
	err     error
}

// writtenSecond is where b holds a time written in a second: b[at:mid] is
// the quote, the date and the time to the second, b[zone:end] the zone and
// the closing quote.
type writtenSecond struct {
	unix               int64
	loc                *time.Location
	at, mid, zone, end int
}

func (w *jsonAppender) open(c byte) {
	w.b = append(w.b, c)
	w.depth++
	w.empty = true
}

func (w *jsonAppender) close(c byte) {
	w.depth--
	if !w.empty {
		w.newline()
	}
	w.b = append(w.b, c)
	w.empty = false
}

// elem starts a member of an array.
func (w *jsonAppender) elem() {
	if !w.empty {
		w.b = append(w.b, ',')
	}
	w.empty = false
	w.newline()
}

// key starts a member of an object; k is its name quoted, with the colon,
// like `"addr":`.
func (w *jsonAppender) key(k string) {
	w.elem()
	w.b = append(w.b, k...)
	if w.indent {
		w.b = append(w.b, ' ')
	}
}

// newlines is a newline and the indent of 16 levels; a status goes 5 deep.
const newlines = "\n                                "

func (w *jsonAppender) newline() {
	if !w.indent {
		return
	}
	if n := 1 + 2*w.depth; n <= len(newlines) {
		w.b = append(w.b, newlines[:n]...)
		return
	}
	w.b = append(w.b, '\n')
	for range w.depth {
		w.b = append(w.b, "  "...)
	}
}

func (w *jsonAppender) null() { w.b = append(w.b, "null"...) }

func (w *jsonAppender) bool(v bool) {
	if v {
		w.b = append(w.b, "true"...)
	} else {
		w.b = append(w.b, "false"...)
	}
}

// time writes t as time.Time's MarshalJSON does, failing where it fails.
func (w *jsonAppender) time(t time.Time) {
	sec, loc := t.Unix(), t.Location()
	for i, c := range w.seconds {
		if c.end > 0 && c.unix == sec && c.loc == loc {
			w.b = append(w.b, w.b[c.at:c.mid]...)
			w.b = appendFraction(w.b, t.Nanosecond())
			w.b = append(w.b, w.b[c.zone:c.end]...)
			w.seconds[i] = w.seconds[0]
			w.seconds[0] = c
			return
		}
	}
	at := len(w.b)
	w.b = append(w.b, '"')
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	b := w.b
	switch {
	case b[at+len(`"9999`)] != '-':
		w.fail("Time.MarshalJSON: year outside of range [0,9999]")
		return
	case b[len(b)-1] != 'Z':
		c := b[len(b)-len("Z07:00")]
		hour := 10*(b[len(b)-len("07:00")]-'0') + (b[len(b)-len("7:00")] - '0')
		if ('0' <= c && c <= '9') || hour >= 24 {
			w.fail("Time.MarshalJSON: timezone hour outside of range [0,23]")
			return
		}
	}
	w.b = append(w.b, '"')
	c := writtenSecond{unix: sec, loc: loc, at: at, mid: at + len(`"2006-01-02T15:04:05`), end: len(w.b)}
	c.zone = c.mid
	if w.b[c.zone] == '.' {
		for c.zone++; '0' <= w.b[c.zone] && w.b[c.zone] <= '9'; c.zone++ {
		}
	}
	w.seconds[1] = w.seconds[0]
	w.seconds[0] = c
}

// appendFraction writes ns as RFC 3339 with nanoseconds does: a point and
// up to nine digits, without trailing zeros, or nothing.
func appendFraction(b []byte, ns int) []byte {
	if ns == 0 {
		return b
	}
	var d [10]byte
	d[0] = '.'
	for i := 9; i > 0; i-- {
		d[i] = byte('0' + ns%10)
		ns /= 10
	}
	n := len(d)
	for d[n-1] == '0' {
		n--
	}
	return append(b, d[:n]...)
}

func (w *jsonAppender) fail(msg string) {
	if w.err == nil {
		w.err = errors.New("json: error calling MarshalJSON for type time.Time: " + msg)
	}
}

// duration writes d as its MarshalText does, as a JSON string.
func (w *jsonAppender) duration(d Duration) {
	for _, c := range w.durs {
		if c.d == d && c.s != "" {
			w.str(c.s)
			return
		}
	}
	s := time.Duration(d).String()
	w.durs[w.nextDur] = struct {
		d Duration
		s string
	}{d, s}
	w.nextDur = (w.nextDur + 1) % len(w.durs)
	w.str(s)
}

// jsonSafe is set for the ASCII bytes that encoding/json writes as they
// are: not the controls, ", \\, <, > or &.
var jsonSafe = func() (t [256]bool) {
	for c := range utf8.RuneSelf {
		t[c] = c >= 0x20 && !strings.ContainsRune(`"\\<>&`, rune(c))
	}
	return t
}()

// str writes s as a JSON string escaped as encoding/json escapes it by
// default: HTML's <, > and & too, U+2028 and U+2029, and invalid UTF-8 as
// U+FFFD.
func (w *jsonAppender) str(s string) {
	i := 0
	for i < len(s) && jsonSafe[s[i]] {
		i++
	}
	if i == len(s) {
		w.b = append(w.b, '"')
		w.b = append(w.b, s...)
		w.b = append(w.b, '"')
		return
	}
	w.b = appendEscaped(w.b, s)
}

func appendEscaped(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
