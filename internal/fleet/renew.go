package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// renewer renews a lease over one long-lived keepalive stream instead of a
// stream opened for each renewal (KeepAliveOnce). One request is in flight
// at a time, and a stream answers its requests in order, so each
// acknowledgement is the answer to the request just sent, and the answer
// deadline can count from that request's send time. A request that is not
// answered in time, or a stream that fails, closes the stream: a late
// answer must never be taken for the next request's, whose send time is
// later. The next renewal opens a new one.
//
// The stream saves opening a stream per renewal; clientv3's own KeepAlive
// cannot serve, as it sends on its own schedule and its answers do not say
// which request they answer.
type renewer struct {
	lc pb.LeaseClient

	mu     sync.Mutex
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc
	recv   chan keepAliveResult
	// streams counts the streams opened, for tests.
	streams int
}

type keepAliveResult struct {
	resp *pb.LeaseKeepAliveResponse
	err  error
}

func newRenewer(c *clientv3.Client) *renewer {
	return &renewer{lc: clientv3.RetryLeaseClient(c)}
}

// renew sends one keepalive for id and waits, up to timeout, for its
// answer. It returns rpctypes.ErrLeaseNotFound when the store no longer
// has the lease.
func (r *renewer) renew(ctx context.Context, id clientv3.LeaseID, timeout time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	if r.stream == nil {
		if err := r.openLocked(ctx, timeout); err != nil {
			return err
		}
	}
	if err := r.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
		r.closeLocked()
		return fmt.Errorf("send a keepalive: %w", err)
	}
	t := time.NewTimer(max(timeout-time.Since(start), 0))
	defer t.Stop()
	select {
	case res := <-r.recv:
		if res.err != nil {
			r.closeLocked()
			return fmt.Errorf("read a keepalive's answer: %w", res.err)
		}
		if res.resp.ID != int64(id) {
			// Not this request's answer: the stream cannot be trusted.
			r.closeLocked()
			return fmt.Errorf("a keepalive for lease %x was answered for lease %x", int64(id), res.resp.ID)
		}
		if res.resp.TTL <= 0 {
			return rpctypes.ErrLeaseNotFound
		}
		return nil
	case <-t.C:
		r.closeLocked()
		return fmt.Errorf("no answer to a keepalive within %s", timeout)
	case <-ctx.Done():
		r.closeLocked()
		return ctx.Err()
	}
}

// openLocked opens a stream, within timeout, and starts the reader that
// hands its answers over, one at a time. The stream lives until it is
// closed or ctx (the member's life) ends. The etcd client waits for a
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
	recv := make(chan keepAliveResult, 1)
	r.stream, r.cancel, r.recv = stream, cancel, recv
	r.streams++
	go func() {
		for {
			resp, err := stream.Recv()
			select {
			case recv <- keepAliveResult{resp, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return nil
}

// closeLocked ends the stream and its reader; the next renewal opens a new
// one.
func (r *renewer) closeLocked() {
	if r.stream == nil {
		return
	}
	r.cancel()
	r.stream, r.cancel, r.recv = nil, nil, nil
}

// close ends the stream.
func (r *renewer) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeLocked()
}

// isLeaseGone says whether err is the store's word that the lease is gone.
func isLeaseGone(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound)
}
