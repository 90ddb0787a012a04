package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// DecodeStatus reads a status as encoding/json's Decoder reads the first
// JSON value of b into a StatusResponse, with the same result and the same
// errors. The agent's compact status, as AppendStatus writes it, is read
// directly: at 10,000 claims encoding/json took 65 ms or more of a plain
// vip status. Anything else, down to a field out of order or an escaped
// string, goes to encoding/json.
func DecodeStatus(b []byte) (StatusResponse, error) {
	if st, ok := decodeStatusFast(b); ok {
		return st, nil
	}
	var st StatusResponse
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&st); err != nil {
		return StatusResponse{}, fmt.Errorf("read the agent's answer: %w", err)
	}
	return st, nil
}

// statusReader reads the compact JSON AppendStatus writes and nothing
// else: it gives up (ok false) at the first byte it does not expect.
type statusReader struct {
	b  []byte
	i  int
	ok bool
}

func decodeStatusFast(b []byte) (StatusResponse, bool) {
	r := statusReader{b: b, ok: true}
	var st StatusResponse
	r.lit(`{"agent":{"pid":`)
	st.Agent.PID = r.int()
	r.lit(`,"version":`)
	st.Agent.Version = r.str()
	r.lit(`,"started":`)
	st.Agent.Started = r.time()
	r.lit(`,"socket":`)
	st.Agent.Socket = r.str()
	r.lit(`,"state_file":`)
	st.Agent.StateFile = r.str()
	r.lit(`,"autostarted":`)
	st.Agent.Autostarted = r.bool()
	r.lit(`},"claims":`)
	if r.opt(`null`) {
		st.Claims = nil
	} else {
		// An indented claim is about 400 bytes.
		st.Claims = make([]Claim, 0, len(b)/400)
		r.list(func() {
			st.Claims = append(st.Claims, Claim{})
			r.claim(&st.Claims[len(st.Claims)-1])
		})
	}
	if r.opt(`,"captures":`) {
		st.Captures = []CaptureStat{}
		r.list(func() {
			st.Captures = append(st.Captures, CaptureStat{})
			r.capture(&st.Captures[len(st.Captures)-1])
		})
	}
	r.lit("}")
	r.opt("\n")
	return st, r.ok && r.i == len(r.b)
}

func (r *statusReader) claim(c *Claim) {
	r.lit(`{"addr":`)
	c.Addr = r.str()
	r.lit(`,"interface":`)
	c.Interface = r.str()
	r.lit(`,"mac":`)
	c.MAC = r.str()
	r.lit(`,"state":`)
	c.State = r.str()
	r.lit(`,"claimed_at":`)
	c.ClaimedAt = r.time()
	r.lit(`,"refreshed_at":`)
	c.RefreshedAt = r.time()
	if r.opt(`,"window_end":`) {
		c.WindowEnd = r.time()
	}
	if r.opt(`,"window_remaining":`) {
		c.WindowRemaining = r.duration()
	}
	r.lit(`,"answered":`)
	c.Answered = r.uint()
	r.lit(`,"gratuitous_frames":`)
	c.GratuitousFrames = r.uint()
	if r.opt(`,"assigned":`) {
		c.Assigned = r.bool()
	}
	r.lit(`,"window":`)
	c.Window = r.duration()
	r.lit(`,"interval":`)
	c.Interval = r.duration()
	r.lit(`,"frames":`)
	c.Frames = r.str()
	if r.opt(`,"refresh_every":`) {
		c.RefreshEvery = r.duration()
	}
	if r.opt(`,"on_conflict":`) {
		c.OnConflict = r.str()
	}
	if r.opt(`,"claimers":`) {
		c.Claimers = []Claimer{}
		r.list(func() {
			var cl Claimer
			r.lit(`{"mac":`)
			cl.MAC = r.str()
			r.lit(`,"kind":`)
			cl.Kind = r.str()
			r.lit(`,"first_seen":`)
			cl.FirstSeen = r.time()
			r.lit(`,"last_seen":`)
			cl.LastSeen = r.time()
			r.lit(`,"count":`)
			cl.Count = r.uint()
			r.lit("}")
			c.Claimers = append(c.Claimers, cl)
		})
	}
	r.lit("}")
}

func (r *statusReader) capture(c *CaptureStat) {
	r.lit(`{"interface":`)
	c.Interface = r.str()
	r.lit(`,"received":`)
	c.Received = r.uint()
	r.lit(`,"dropped":`)
	c.Dropped = r.uint()
	r.lit(`,"undecodable":`)
	c.Undecodable = r.uint()
	if r.opt(`,"scope":`) {
		c.Scope = r.str()
	}
	if r.opt(`,"error":`) {
		c.Error = r.str()
	}
	r.lit("}")
}

// list reads a JSON array, calling elem for each member.
func (r *statusReader) list(elem func()) {
	r.lit("[")
	if r.opt("]") {
		return
	}
	for r.ok {
		elem()
		if !r.opt(",") {
			break
		}
	}
	r.lit("]")
}

// opt reads s if it comes next.
func (r *statusReader) opt(s string) bool {
	if r.ok && bytes.HasPrefix(r.b[r.i:], []byte(s)) {
		r.i += len(s)
		return true
	}
	return false
}

// lit reads s, which must come next.
func (r *statusReader) lit(s string) {
	if !r.opt(s) {
		r.ok = false
	}
}

// token returns the quoted string that comes next, quotes included, if it
// holds printable ASCII alone: anything escaped, or beyond ASCII, is left
// to encoding/json.
func (r *statusReader) token() []byte {
	if !r.ok || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.ok = false
		return nil
	}
	for j := r.i + 1; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			t := r.b[r.i : j+1]
			r.i = j + 1
			return t
		case c == '\\' || c < 0x20 || c >= 0x80:
			r.ok = false
			return nil
		}
	}
	r.ok = false
	return nil
}

func (r *statusReader) str() string {
	t := r.token()
	if len(t) < 2 {
		return ""
	}
	return string(t[1 : len(t)-1])
}

// time reads a time as encoding/json does: through Time.UnmarshalJSON.
func (r *statusReader) time() time.Time {
	var t time.Time
	if tok := r.token(); !r.ok || t.UnmarshalJSON(tok) != nil {
		r.ok = false
	}
	return t
}

// duration reads a Duration as encoding/json does: through UnmarshalText.
func (r *statusReader) duration() Duration {
	var d Duration
	if tok := r.token(); !r.ok || d.UnmarshalText(tok[1:len(tok)-1]) != nil {
		r.ok = false
	}
	return d
}

func (r *statusReader) bool() bool {
	switch {
	case r.opt("true"):
		return true
	case r.opt("false"):
		return false
	}
	r.ok = false
	return false
}

// digits returns the unsigned integer that comes next, as JSON writes one:
// no leading zero, no fraction or exponent.
func (r *statusReader) digits() []byte {
	j := r.i
	for j < len(r.b) && '0' <= r.b[j] && r.b[j] <= '9' {
		j++
	}
	d := r.b[r.i:j]
	if !r.ok || len(d) == 0 || (d[0] == '0' && len(d) > 1) || (j < len(r.b) && (r.b[j] == '.' || r.b[j] == 'e' || r.b[j] == 'E')) {
		r.ok = false
		return nil
	}
	r.i = j
	return d
}

func (r *statusReader) uint() uint64 {
	n, err := strconv.ParseUint(string(r.digits()), 10, 64)
	if err != nil {
		r.ok = false
	}
	return n
}

func (r *statusReader) int() int {
	neg := r.opt("-")
	d := r.digits()
	if neg {
		d = append([]byte{'-'}, d...)
	}
	n, err := strconv.ParseInt(string(d), 10, strconv.IntSize)
	if err != nil {
		r.ok = false
	}
	return int(n)
}
