package store

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// authenticateMethod is etcd's RPC that trades a user and password for a
// token.
const authenticateMethod = "/etcdserverpb.Auth/Authenticate"

// tokenAuth keeps the token of a client that authenticates with a
// password, in place of the etcd client's own. That one sends its expired
// token with the request for a new one, which etcd 3.4 refuses as an
// invalid token, and then asks again, forever; tokenAuth asks without a
// token, and asks again whenever etcd says the token is gone (it expires
// unused, 5 minutes by default, and on a restart of etcd).
type tokenAuth struct {
	user, password string

	// renewing is held while a token is asked for, mu while the token is
	// read or set.
	renewing sync.Mutex
	mu       sync.Mutex
	token    string
	// gen counts the tokens got, so that requests refused at once ask
	// for one new token, not one each.
	gen uint64
}

// GetRequestMetadata gives each request the token, but the request for a
// new one.
func (a *tokenAuth) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if ri, ok := credentials.RequestInfoFromContext(ctx); ok && ri.Method == authenticateMethod {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == "" {
		return nil, nil
	}
	return map[string]string{rpctypes.TokenFieldNameGRPC: a.token}, nil
}

func (a *tokenAuth) RequireTransportSecurity() bool { return false }

// current returns the token's generation.
func (a *tokenAuth) current() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gen
}

// renew gets a new token over cc unless one newer than gen was got
// meanwhile.
func (a *tokenAuth) renew(ctx context.Context, cc *grpc.ClientConn, gen uint64) error {
	a.renewing.Lock()
	defer a.renewing.Unlock()
	if a.current() != gen {
		return nil
	}
	var resp pb.AuthenticateResponse
	err := cc.Invoke(ctx, authenticateMethod, &pb.AuthenticateRequest{Name: a.user, Password: a.password}, &resp)
	token := resp.Token
	switch {
	case isEtcd(err, rpctypes.ErrAuthNotEnabled):
		token = ""
	case err != nil:
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token = token
	a.gen++
	return nil
}

// tokenGone reports whether err says the request carried no valid token.
func tokenGone(err error) bool {
	return isEtcd(err, rpctypes.ErrInvalidAuthToken) || isEtcd(err, rpctypes.ErrUserEmpty) || isEtcd(err, rpctypes.ErrAuthOldRevision)
}

// intercept sends a request again, once, on a new token when etcd refused
// its token.
func (a *tokenAuth) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	gen := a.current()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil || method == authenticateMethod || !tokenGone(err) {
		return err
	}
	if rerr := a.renew(ctx, cc, gen); rerr != nil {
		return errors.Join(err, rerr)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// tokenWatcher opens each watch of a client that authenticates with a
// password on a valid token. etcd checks a watch's permission when it is
// created, against the token its gRPC stream was opened with, and the
// client shares one stream among its watches: a watch created there after
// the token expired is refused "permission denied", which closes the
// stream with every watch on it (etcd-io/etcd#12385). So each watch is
// preceded by a read, which renews a token that is gone, and gets a stream
// of its own, opened with that token. A watch goes on when its token
// expires after it was created.
type tokenWatcher struct {
	clientv3.Watcher
	kv      clientv3.KV
	timeout time.Duration
	n       atomic.Uint64
}

func (w *tokenWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	rctx, cancel := context.WithTimeout(ctx, w.timeout)
	// Its error is the watch's to find and report.
	_, _ = w.kv.Get(rctx, key, clientv3.WithCountOnly())
	cancel()
	// The client keys its streams by the request's metadata.
	ctx = metadata.AppendToOutgoingContext(ctx, "vip-watch", strconv.FormatUint(w.n.Add(1), 10))
	return w.Watcher.Watch(ctx, key, opts...)
}
