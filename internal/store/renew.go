package store

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
