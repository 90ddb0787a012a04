package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// renewer renews a lease over one long-lived keepalive stream instead of a
// stream opened for each renewal (KeepAliveOnce). Renewals overlap: each
// sends its request at once, whatever is still unanswered, so that a slow
// store (answers later than a renewal period) still acknowledges every
// renewal, late, and the answer deadline counts from each one's send time.
// A stream answers its requests one by one in order (etcd's server reads a
// request, renews, answers, then reads the next), so the n-th answer is the
// n-th request's: each request waits in a queue for its own answer, and a
// request that stops waiting (its timeout) leaves its place in the queue,
// where its answer, when it comes, is dropped. A stream that fails fails
// every request it has not answered; the next renewal opens a new one.
//
// clientv3's own KeepAlive cannot serve, as it sends on its own schedule and
// its answers do not say which request they answer.
type renewer struct {
	lc pb.LeaseClient

	// mu serialises the stream's sends, its opening and the queue.
	mu     sync.Mutex
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc
	// waiting holds, oldest first, where the answer of each request sent
	// on stream and not yet answered goes (buffered: a request that
	// stopped waiting is not waited for).
	waiting []chan keepAliveResult
	// streams counts the streams opened, for tests.
	streams int
}

type keepAliveResult struct {
	resp *pb.LeaseKeepAliveResponse
	err  error
}

// maxWaiting bounds the requests a stream may leave unanswered: a stream
// that far behind (a store that holds its connection open but answers
// nothing) is closed, and the next renewal opens another.
const maxWaiting = 64

func newRenewer(c *clientv3.Client) *renewer {
	return &renewer{lc: clientv3.RetryLeaseClient(c)}
}

// renew sends one keepalive for id and waits, up to timeout, for its
// answer, while other renewals may be under way on the same stream. It
// returns rpctypes.ErrLeaseNotFound when the store no longer has the lease.
func (r *renewer) renew(ctx context.Context, id clientv3.LeaseID, timeout time.Duration) error {
	start := time.Now()
	t := time.NewTimer(timeout)
	defer t.Stop()
	answer, err := r.send(ctx, id, timeout)
	if err != nil {
		return err
	}
	select {
	case res := <-answer:
		if res.err != nil {
			return fmt.Errorf("read a keepalive's answer: %w", res.err)
		}
		if res.resp.ID != int64(id) {
			return fmt.Errorf("a keepalive for lease %x was answered for lease %x", int64(id), res.resp.ID)
		}
		if res.resp.TTL <= 0 {
			return rpctypes.ErrLeaseNotFound
		}
		return nil
	case <-t.C:
		// Its answer, should it come, goes to its place in the queue
		// and no further: the stream stays open for the others.
		return fmt.Errorf("no answer to a keepalive within %s", time.Since(start).Round(time.Millisecond))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send sends a keepalive for id on the stream, opened within timeout if
// there is none, and returns where its answer will come.
func (r *renewer) send(ctx context.Context, id clientv3.LeaseID, timeout time.Duration) (<-chan keepAliveResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stream == nil {
		if err := r.openLocked(ctx, timeout); err != nil {
			return nil, err
		}
	}
	if len(r.waiting) >= maxWaiting {
		r.failLocked(fmt.Errorf("%d keepalives unanswered on the stream", len(r.waiting)))
		if err := r.openLocked(ctx, timeout); err != nil {
			return nil, err
		}
	}
	if err := r.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
		r.failLocked(err)
		return nil, fmt.Errorf("send a keepalive: %w", err)
	}
	answer := make(chan keepAliveResult, 1)
	r.waiting = append(r.waiting, answer)
	return answer, nil
}

// openLocked opens a stream, within timeout, and starts the reader that
// hands each answer to the oldest request waiting. The stream lives until
// it is closed or ctx (the member's life) ends. The etcd client waits for a
// connection to be ready before it opens a stream: without the timeout a
// renewal during a store outage would wait for the outage, and the
// member's Close with it.
func (r *renewer) openLocked(ctx context.Context, timeout time.Duration) error {
	sctx, cancel := context.WithCancel(ctx)
	giveUp := time.AfterFunc(timeout, cancel)
	stream, err := r.lc.LeaseKeepAlive(sctx)
	if !giveUp.Stop() && err == nil {
		err = fmt.Errorf("no stream within %s", timeout)
	}
	if err != nil {
		cancel()
		return fmt.Errorf("open a keepalive stream: %w", err)
	}
	r.stream, r.cancel = stream, cancel
	r.streams++
	go r.read(stream)
	return nil
}

// read hands the answers of stream to its requests, in order, until the
// stream fails or is closed.
func (r *renewer) read(stream pb.Lease_LeaseKeepAliveClient) {
	for {
		resp, err := stream.Recv()
		r.mu.Lock()
		if r.stream != stream {
			// Closed: its requests were failed then.
			r.mu.Unlock()
			return
		}
		if err == nil && len(r.waiting) == 0 {
			// An answer to no request: the stream cannot be trusted.
			err = errors.New("an answer to no keepalive sent")
		}
		if err != nil {
			r.failLocked(err)
			r.mu.Unlock()
			return
		}
		answer := r.waiting[0]
		r.waiting[0] = nil
		r.waiting = r.waiting[1:]
		r.mu.Unlock()
		answer <- keepAliveResult{resp: resp}
	}
}

// failLocked ends the stream, failing every request it has not answered;
// the next renewal opens a new one.
func (r *renewer) failLocked(err error) {
	if r.stream == nil {
		return
	}
	for _, answer := range r.waiting {
		answer <- keepAliveResult{err: err}
	}
	r.waiting = nil
	r.cancel()
	r.stream, r.cancel = nil, nil
}

// close ends the stream.
func (r *renewer) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failLocked(net.ErrClosed)
}

// isLeaseGone says whether err is the store's word that the lease is gone.
func isLeaseGone(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound)
}

// renewLoop renews the lease every Renew, and arms the fence after each
// renewal that succeeded. Renewals overlap: one that waits for a slow store
// does not hold up the next, and each that the store acknowledges, however
// late, moves the fence and the deadline to its own send time plus the
// fence's delay (see acked).
func (m *Member) renewLoop(ctx context.Context) {
	m.mu.Lock()
	m.fence = m.clock.AfterFunc(m.timing.FenceAfter(), m.fenceNow)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.fence.Stop()
		m.mu.Unlock()
	}()
	t := m.clock.NewTicker(m.timing.Renew)
	defer t.Stop()
	last := m.cfg.Deadline.Now()
	for {
		// A tick far later than due is a process that did not run
		// (SIGSTOP, a cgroup freezer, a paused VM, a starved CPU): the
		// clock counts on while it is stopped.
		if gap := m.cfg.Deadline.Now() - last; gap > m.timing.FenceAfter() {
			m.mu.Lock()
			m.stalled = max(m.stalled, gap)
			m.mu.Unlock()
			m.log.Warn("this agent did not run for longer than its fence delay: frozen or starved", "for", gap.Round(time.Millisecond))
		}
		m.renewAsync(ctx)
		m.failsafeTick(ctx)
		m.reportWithheld()
		last = m.cfg.Deadline.Now()
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// maxInFlight bounds the renewals waiting for the store at once: those
// sent over one fence delay, after which an answer no longer counts, and
// one more.
func (t Timing) maxInFlight() int { return int(t.FenceAfter()/t.Renew) + 2 }

// renewAsync sends a renewal and waits for its answer in the background,
// unless as many as maxInFlight already wait.
func (m *Member) renewAsync(ctx context.Context) {
	m.mu.Lock()
	if m.inFlight >= m.timing.maxInFlight() {
		n := m.inFlight
		m.mu.Unlock()
		m.log.Debug("renewal not sent: the store has not answered the earlier ones", "in_flight", n)
		return
	}
	m.inFlight++
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.renewOnce(ctx)
		m.mu.Lock()
		m.inFlight--
		m.mu.Unlock()
	}()
}

// renewOnce renews the lease once, waiting for the store's answer up to the
// fence's delay: an acknowledgement later than that would move the deadline
// to a time already past.
func (m *Member) renewOnce(ctx context.Context) {
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	sent, sentBoot := m.clock.Now(), m.cfg.Deadline.Now()
	err := m.l.Renew(ctx, lease, m.timing.FenceAfter())
	took := m.cfg.Deadline.Now() - sentBoot
	if took > m.timing.FenceAfter()+m.timing.Renew {
		// A renewal gives up after the fence's delay: one that took a
		// renewal period longer is a process stopped while it waited
		// (frozen mid-renewal, which renewLoop's gap between passes
		// does not see). Noted before the resumption, which tells it.
		m.mu.Lock()
		m.stalled = max(m.stalled, took)
		m.mu.Unlock()
		m.log.Warn("this agent did not run for longer than its fence delay, while it renewed: frozen or starved", "for", took.Round(time.Millisecond))
	}
	switch {
	case err == nil:
		m.acked(ctx, lease, sent, sentBoot, took)
	case errors.Is(err, ErrLeaseGone):
		m.mu.Lock()
		current := lease == m.lease
		if current {
			m.goneLease = lease
		}
		m.mu.Unlock()
		if !current {
			return // a renewal of a lease the member no longer has
		}
		// The store expired or revoked the lease: everything under it
		// is gone. Stop answering at once (if not already), then join
		// again under a new lease and take back what is still free.
		m.fenceWhy("the store no longer has this agent's lease")
		m.resumeAsync(ctx, true)
	case ctx.Err() == nil:
		m.mu.Lock()
		m.unanswered++
		m.mu.Unlock()
		m.log.Debug("renew the lease", "err", err)
	}
}

// acked takes the store's acknowledgement of a renewal of lease sent at
// sent (sentBoot on the deadline's clock), answered after took: the fence
// and the deadline move to its send time plus the fence's delay, unless a
// renewal sent later was acknowledged first, or the lease is no longer the
// member's, or that time has already passed.
func (m *Member) acked(ctx context.Context, lease LeaseID, sent time.Time, sentBoot, took time.Duration) {
	// ackMu orders the deadline's moves as the renewals' sends are
	// ordered: an earlier one never moves it back.
	m.ackMu.Lock()
	defer m.ackMu.Unlock()
	alone := m.aloneAfter(sentBoot, lease)
	m.mu.Lock()
	if lease != m.lease || lease == m.goneLease || !sent.After(m.renewed) || !m.clock.Now().Before(sent.Add(m.timing.FenceAfter()+alone)) {
		m.mu.Unlock()
		return
	}
	m.renewed = sent
	m.unanswered = 0
	m.answeredIn[m.answers%len(m.answeredIn)] = took
	m.answers++
	m.fence.Reset(m.clock.Until(sent.Add(m.timing.FenceAfter() + alone)))
	fenced := !m.fencedAt.IsZero()
	m.mu.Unlock()
	m.moveDeadline(sentBoot, alone)
	switch {
	case fenced:
		m.resumeAsync(ctx, false)
	case m.resuming.Load():
		// A resumption under way (the lease was lost, and this is
		// the new one's first renewal) tells of the stall, with
		// what it found: not this renewal, which knows nothing.
	default:
		// Woken before the fence's timer ran: nothing to resume.
		m.reportStall(false, 0, nil)
	}
}

// resumeAsync resumes in the background, so that the renewals go on
// while thousands of keys are read again; one resumption at a time.
func (m *Member) resumeAsync(ctx context.Context, leaseLost bool) {
	if !m.resuming.CompareAndSwap(false, true) {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.resuming.Store(false)
		m.resume(ctx, leaseLost)
		if _, fenced := m.isFenced(); !fenced {
			// A move that the inbox told of while fenced was passed
			// over (arrive, leave): acted on now.
			m.resync(ctx)
		}
	}()
}

// fenceNow is the fence's timer: no renewal sent in the last FenceAfter
// was acknowledged, or, on failsafe, the promises in force ran out.
func (m *Member) fenceNow() {
	if why := m.failsafeFenceWhy(); why != "" {
		m.fenceWhy(why)
		return
	}
	m.fenceWhy(m.noRenewal())
}

// noRenewal says why the fence's timer ran out, truthfully: when the last
// acknowledged renewal was sent, how fast the store answered before, and
// how many renewals sent since went unanswered.
func (m *Member) noRenewal() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg := fmt.Sprintf("no renewal of its lease was acknowledged since %s, when it was sent (lease TTL %s, fence after %s)",
		m.renewed.Local().Format("15:04:05.000"), m.timing.TTL, m.timing.FenceAfter())
	if n := min(m.answers, len(m.answeredIn)); n > 0 {
		var sum time.Duration
		for _, d := range m.answeredIn[:n] {
			sum += d
		}
		msg += fmt.Sprintf("; the store answered in %s on average before that", (sum / time.Duration(n)).Round(time.Millisecond))
	}
	if m.inFlight > 0 || m.unanswered > 0 {
		msg += fmt.Sprintf("; %d renewals sent since are unanswered, %d of them given up", m.inFlight+m.unanswered, m.unanswered)
	}
	return msg
}
