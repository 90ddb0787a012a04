package journal

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// priority is the syslog priority of a slog level: debug 7, info 6, warn 4,
// error 3. A level between two of those counts as the less severe one, so
// that nothing is made more urgent than it was logged: info+2 is info,
// debug+2 is debug, and anything above error is still error.
func priority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	}
	return 7
}

// Handler writes each record as the handler it wraps would, without the
// time, after the record's priority prefix, in one write to the stream.
type Handler struct {
	inner slog.Handler
	out   *prefixWriter
}

// prefixWriter is the writer of the wrapped handler and of every handler
// derived from it: Handle sets the prefix of the record under way, and the
// one write of the record puts it in front.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(append(p.buf[:0], p.prefix...), b...)
	if _, err := p.w.Write(p.buf); err != nil {
		return 0, err
	}
	return len(b), nil
}

// NewHandler returns a Handler writing to w through the handler that
// newInner makes for a writer, such as slog.NewTextHandler or
// slog.NewJSONHandler with the options of the level.
func NewHandler(w io.Writer, newInner func(io.Writer) slog.Handler) *Handler {
	out := &prefixWriter{w: w}
	return &Handler{inner: newInner(out), out: out}
}

// Enabled reports whether the wrapped handler handles records of level l.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

// Handle writes r with its priority prefix and without its time: slog's
// handlers leave out a zero time, and the journal stamps the line itself.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	r.Time = time.Time{}
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.prefix = append(strconv.AppendInt(append(h.out.prefix[:0], '<'), int64(priority(r.Level)), 10), '>')
	return h.inner.Handle(ctx, r)
}

// WithAttrs returns a Handler whose records carry attrs as well.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{inner: h.inner.WithAttrs(attrs), out: h.out}
}

// WithGroup returns a Handler that puts the attributes that follow in the
// group name.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name), out: h.out}
}
