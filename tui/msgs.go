package tui

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/vipctl/vip/internal/api"
)

// Timing of the view.
const (
	// frameEvery is the render tick: at most ten frames a second.
	frameEvery = 100 * time.Millisecond
	// DefaultPollEvery is how often the view asks for status and traffic.
	DefaultPollEvery = time.Second
	// fleetEvery is how often the view asks for the fleet, when the agent
	// has a store: a change in the store (a move, a node's renewals
	// stopping, a takeover) shows within a second.
	fleetEvery = time.Second
	// moveGrace is what a move may take beyond twice the lease's TTL (an
	// owner that does not answer is waited for until its lease expires).
	moveGrace = 15 * time.Second
	// requestTimeout bounds one request to the agent.
	requestTimeout = 5 * time.Second
	// retryFirst and retryMax bound the backoff between reconnections.
	// Asking a unix socket costs next to nothing, so the view keeps asking
	// twice a second while the agent is gone: it is back on screen within
	// half a second of its return.
	retryFirst = 250 * time.Millisecond
	retryMax   = 500 * time.Millisecond
	// eventBatch is the most events one message carries.
	eventBatch = 256
	// logSize is how many events the log keeps.
	logSize = 500
)

// Messages of a connection carry its generation: a reconnection starts a
// new one, and messages of an older one are dropped.
type (
	connectedMsg struct {
		gen    int
		status api.StatusResponse
		stream *stream
	}
	connectFailedMsg struct {
		gen int
		err error
	}
	retryMsg    struct{ gen int }
	pollTickMsg struct{ gen int }
	snapshotMsg struct {
		gen       int
		status    api.StatusResponse
		statusErr error
		whoHas    api.WhoHasResponse
		whoHasErr error
	}
	// eventsMsg carries events in the order the agent sent them; end is
	// set when the stream ended after them.
	eventsMsg struct {
		gen    int
		events []api.Event
		end    error
	}
)

// The fleet, polled while the agent has a store.
type (
	fleetTickMsg struct{ gen int }
	fleetMsg     struct {
		gen   int
		fleet api.FleetResponse
		err   error
	}
)

// renderTickMsg turns a dirty model into a frame.
type renderTickMsg struct{}

// Answers to the operator's actions.
type (
	claimDoneMsg struct {
		addr, iface string
		resp        api.ClaimResponse
		err         error
	}
	releaseDoneMsg struct {
		addr string
		resp api.ReleaseResponse
		err  error
	}
	refreshDoneMsg struct {
		addr string
		resp api.RefreshResponse
		err  error
	}
	moveDoneMsg struct {
		addr, to string
		resp     api.MoveResponse
		err      error
	}
)

// clock schedules the model's timers; tests replace it to fire them by
// hand.
type clock struct {
	now   func() time.Time
	after func(d time.Duration, msg tea.Msg) tea.Cmd
}

func realClock() clock {
	return clock{
		now: time.Now,
		after: func(d time.Duration, msg tea.Msg) tea.Cmd {
			return tea.Tick(d, func(time.Time) tea.Msg { return msg })
		},
	}
}

// backoff is the wait before reconnection attempt n (from 1).
func backoff(n int) time.Duration {
	d := retryFirst
	for i := 1; i < n && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// gone reports whether err means the agent cannot be talked to at all, as
// opposed to an answer that refuses something.
func gone(err error) bool {
	var remote *api.RemoteError
	return err != nil && !errors.As(err, &remote)
}

// pumps owns the goroutines that read event streams: close stops taking
// new ones and waits for the running ones, which end with the model's
// context.
type pumps struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (p *pumps) start(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

func (p *pumps) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
}

// stream is one open event stream: a pump goroutine moves its events to
// ch, from where a command hands them to the model.
type stream struct {
	ctx    context.Context
	cancel context.CancelFunc
	src    EventSource
	ch     chan streamItem
}

type streamItem struct {
	ev  api.Event
	err error // set on the last item: the stream ended
}

func openStream(ctx context.Context, b Backend, p *pumps, since time.Time) (*stream, error) {
	sctx, cancel := context.WithCancel(ctx)
	src, err := b.Events(sctx, since)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &stream{ctx: sctx, cancel: cancel, src: src, ch: make(chan streamItem, eventBatch)}
	if !p.start(s.pump) {
		s.stop()
		return nil, context.Canceled
	}
	return s, nil
}

func (s *stream) pump() {
	for {
		ev, err := s.src.Next()
		if err == nil && s.ctx.Err() != nil {
			err = s.ctx.Err()
		}
		select {
		case s.ch <- streamItem{ev: ev, err: err}:
		case <-s.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// stop ends the stream; its pump returns once Next does.
func (s *stream) stop() {
	s.cancel()
	_ = s.src.Close()
}

// wait is the command that hands the stream's next events to the model:
// one event, and as many more as are already waiting, up to eventBatch.
// The model re-arms it after each message.
func (s *stream) wait(gen int) tea.Cmd {
	return func() tea.Msg {
		msg := eventsMsg{gen: gen}
		select {
		case it := <-s.ch:
			if it.err != nil {
				msg.end = it.err
				return msg
			}
			msg.events = append(make([]api.Event, 0, 16), it.ev)
		case <-s.ctx.Done():
			return nil
		}
		for len(msg.events) < eventBatch {
			select {
			case it := <-s.ch:
				if it.err != nil {
					msg.end = it.err
					return msg
				}
				msg.events = append(msg.events, it.ev)
			default:
				return msg
			}
		}
		return msg
	}
}

// connect asks the agent for its status and opens its event stream, from
// the events it kept since since when that is not zero (the view lost the
// stream then).
func connect(ctx context.Context, b Backend, p *pumps, gen int, since time.Time) tea.Cmd {
	return func() tea.Msg {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		st, err := b.Status(rctx)
		if err != nil {
			return connectFailedMsg{gen: gen, err: err}
		}
		s, err := openStream(ctx, b, p, since)
		if err != nil {
			return connectFailedMsg{gen: gen, err: err}
		}
		return connectedMsg{gen: gen, status: st, stream: s}
	}
}

// poll asks for status and traffic.
func poll(ctx context.Context, b Backend, gen int) tea.Cmd {
	return func() tea.Msg {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		msg := snapshotMsg{gen: gen}
		msg.status, msg.statusErr = b.Status(rctx)
		if msg.statusErr == nil {
			msg.whoHas, msg.whoHasErr = b.WhoHas(rctx)
		}
		return msg
	}
}

func claimCmd(ctx context.Context, b Backend, addr, iface string) tea.Cmd {
	return func() tea.Msg {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		resp, err := b.Claim(rctx, api.ClaimRequest{Addrs: []string{addr}, Interface: iface})
		return claimDoneMsg{addr: addr, iface: iface, resp: resp, err: err}
	}
}

func releaseCmd(ctx context.Context, b Backend, addr string) tea.Cmd {
	return func() tea.Msg {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		resp, err := b.Release(rctx, api.AddrsRequest{Addrs: []string{addr}})
		return releaseDoneMsg{addr: addr, resp: resp, err: err}
	}
}

func refreshCmd(ctx context.Context, b Backend, addr string) tea.Cmd {
	return func() tea.Msg {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		resp, err := b.Refresh(rctx, api.AddrsRequest{Addrs: []string{addr}})
		return refreshDoneMsg{addr: addr, resp: resp, err: err}
	}
}

// pollFleet asks for the fleet.
func pollFleet(ctx context.Context, b Backend, gen int) tea.Cmd {
	return func() tea.Msg {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		f, err := b.Fleet(rctx)
		return fleetMsg{gen: gen, fleet: f, err: err}
	}
}

// moveCmd moves addr to node to, waiting as long as the move may take.
func moveCmd(ctx context.Context, b Backend, addr, to string, ttl time.Duration) tea.Cmd {
	return func() tea.Msg {
		rctx, cancel := context.WithTimeout(ctx, 2*ttl+moveGrace)
		defer cancel()
		resp, err := b.Move(rctx, api.MoveRequest{Addrs: []string{addr}, To: to})
		return moveDoneMsg{addr: addr, to: to, resp: resp, err: err}
	}
}

// endedErr describes why a stream ended.
func endedErr(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("the agent ended the event stream")
	}
	return err
}
