package tui

import "github.com/vipctl/vip/internal/api"

// eventLog keeps the latest events, a fixed number of them, whatever the
// rate they come at.
type eventLog struct {
	buf   []api.Event
	start int // index of the oldest event
	n     int
	total uint64 // events ever pushed
}

func newEventLog(size int) eventLog { return eventLog{buf: make([]api.Event, size)} }

func (l *eventLog) push(ev api.Event) {
	l.total++
	if l.n < len(l.buf) {
		l.buf[(l.start+l.n)%len(l.buf)] = ev
		l.n++
		return
	}
	l.buf[l.start] = ev
	l.start = (l.start + 1) % len(l.buf)
}

// len is how many events are kept.
func (l *eventLog) len() int { return l.n }

// at returns the i-th kept event, oldest first.
func (l *eventLog) at(i int) api.Event { return l.buf[(l.start+i)%len(l.buf)] }
