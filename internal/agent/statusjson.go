package agent

import (
	"bytes"
	"encoding/json"
	"io"
	"net/netip"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
)

// EngineStatus is a status as the agent has it: the engine's view of each
// claim, not yet converted for clients.
type EngineStatus struct {
	Agent  api.Agent
	Claims []announce.Status
	// Now is when the status was taken, for the windows remaining.
	Now      time.Time
	Captures []api.CaptureStat
	// Notes, when set, are what the store says of some claims.
	Notes map[netip.Addr]string
}

// statusFlushAt is how much of a status WriteJSON gathers before it
// writes: the client reads one piece while the next is encoded.
const statusFlushAt = 128 << 10

// WriteJSON writes to w what an encoding/json Encoder writes for the
// api.StatusResponse of s, whose claims ClaimsFromStatus converts (no claims
// is an empty list, not null), and with indent what it writes after
// SetIndent("", "  "), the form vip status --json prints.
//
// encoding/json writes every value, compact; WriteJSON lays out
// StatusResponse's three members around them, so that it can convert and
// encode one claim at a time and write the answer in pieces as it goes,
// and indents each value with appendIndented. At 10,000 claims an answer
// is 4 MB, which one Encode builds whole, indents whole in a second buffer
// and only then hands over, with the client idle meanwhile. The tests hold
// WriteJSON to encoding/json's output.
//
// An error from w, or from encoding/json (a time that RFC 3339 cannot
// write), ends the writing; written says whether any of the answer had
// gone to w by then.
func (s *EngineStatus) WriteJSON(w io.Writer, indent bool) (written bool, err error) {
	e := newStatusEncoder(w, indent)
	e.raw("{")
	e.key(1, `"agent":`)
	e.value(1, &s.Agent)
	e.raw(",")
	e.key(1, `"claims":`)
	e.raw("[")
	cv := newClaimConverter(s.Now)
	var c api.Claim // one for all, rather than one on the heap for each
	for i := range s.Claims {
		if i > 0 {
			e.raw(",")
		}
		e.newline(2)
		c = cv.claim(&s.Claims[i])
		c.Note = s.Notes[s.Claims[i].Addr]
		e.claim(2, &c)
		if e.buf.Len() >= statusFlushAt {
			e.flush()
		}
	}
	if len(s.Claims) > 0 {
		e.newline(1)
	}
	e.raw("]")
	if len(s.Captures) > 0 {
		e.raw(",")
		e.key(1, `"captures":`)
		e.value(1, s.Captures)
	}
	e.newline(0)
	e.raw("}\n")
	e.flush()
	return e.written, e.err
}

// statusEncoder gathers a status in buf, each value encoded by enc (into
// scratch, compact), and writes it to w a piece at a time. It keeps the
// first error.
type statusEncoder struct {
	w       io.Writer
	buf     bytes.Buffer
	scratch bytes.Buffer
	enc     *json.Encoder
	// claimBuf holds the claim appendClaimJSON wrote last, its array
	// kept for the next.
	claimBuf []byte
	indent   bool
	written  bool
	err      error
}

func newStatusEncoder(w io.Writer, indent bool) *statusEncoder {
	e := &statusEncoder{w: w, indent: indent}
	e.buf.Grow(statusFlushAt + 4<<10)
	e.enc = json.NewEncoder(&e.scratch)
	return e
}

// indents is the indent of every depth a status lays out: two spaces each.
const indents = "    "

func (e *statusEncoder) raw(s string) { e.buf.WriteString(s) }

// newline starts a line at depth, as json.Indent does in the indented
// form; the compact form has none.
func (e *statusEncoder) newline(depth int) {
	if e.indent {
		e.buf.WriteByte('\n')
		e.buf.WriteString(indents[:2*depth])
	}
}

// key starts the member named by k, quoted with its colon, at depth.
func (e *statusEncoder) key(depth int, k string) {
	e.newline(depth)
	e.raw(k)
	if e.indent {
		e.raw(" ")
	}
}

// value encodes v as a value at depth: its own lines indented below it.
func (e *statusEncoder) value(depth int, v any) {
	if e.err != nil {
		return
	}
	e.scratch.Reset()
	if e.err = e.enc.Encode(v); e.err != nil {
		return
	}
	b := e.scratch.Bytes()
	e.place(depth, b[:len(b)-1]) // without the newline Encode ends a value with
}

// claim encodes c as value does, by appendClaimJSON where it can.
func (e *statusEncoder) claim(depth int, c *api.Claim) {
	if e.err != nil {
		return
	}
	b, ok := appendClaimJSON(e.claimBuf[:0], c)
	if !ok {
		e.value(depth, c)
		return
	}
	e.claimBuf = b
	e.place(depth, b)
}

// place writes b, a compact value, at depth.
func (e *statusEncoder) place(depth int, b []byte) {
	if !e.indent {
		e.buf.Write(b)
		return
	}
	e.buf.Grow(2 * len(b))
	e.buf.Write(appendIndented(e.buf.AvailableBuffer(), b, depth))
}

func (e *statusEncoder) flush() {
	if e.err != nil || e.buf.Len() == 0 {
		return
	}
	e.written = true
	_, e.err = e.w.Write(e.buf.Bytes())
	e.buf.Reset()
}

// appendIndented appends src, compact JSON as encoding/json writes it, to
// dst indented as json.Indent does with a prefix of depth levels and two
// spaces a level. Unlike json.Indent it takes src to be valid, as
// encoding/json's own output is, rather than check every byte with the
// scanner: that took half of the agent's time for an indented status of
// 10,000 claims. FuzzAppendIndented holds it to json.Indent.
func appendIndented(dst, src []byte, depth int) []byte {
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"':
			end := stringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			dst = append(dst, c)
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				dst = append(dst, src[i+1]) // empty: closed on the same line
				i++
				continue
			}
			depth++
			dst = appendNewline(dst, depth)
		case '}', ']':
			depth--
			dst = appendNewline(dst, depth)
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			dst = appendNewline(dst, depth)
		case ':':
			dst = append(dst, c, ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// stringEnd returns where the string that starts with the quote at
// src[start] ends: just past its closing quote, the first one not escaped
// (after an even number of backslashes), or at the end of src.
func stringEnd(src []byte, start int) int {
	for i := start + 1; ; i++ {
		q := bytes.IndexByte(src[i:], '"')
		if q < 0 {
			return len(src)
		}
		i += q
		backslashes := 0
		for j := i - 1; j > start && src[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return i + 1
		}
	}
}

func appendNewline(dst []byte, depth int) []byte {
	dst = append(dst, '\n')
	for range depth {
		dst = append(dst, "  "...)
	}
	return dst
}
