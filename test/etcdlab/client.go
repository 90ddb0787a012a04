package etcdlab

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// dialTimeout bounds a client's first connection.
const dialTimeout = 5 * time.Second

// reconnect is how a client retries a member it lost: soon, and never more
// than a second apart, so that it is back within a test's deadline after the
// member restarts or a partition heals (gRPC's default waits up to two
// minutes).
var reconnect = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   time.Second,
	},
	MinConnectTimeout: 2 * time.Second,
}

// Config returns a client configuration for the endpoints (http://IP:PORT,
// from Endpoint or Endpoints) whose every connection is made from inside
// host h, so that the test process reaches the lab and never dials from the
// root network namespace. Its logger is silent: a client retrying a member
// that is down on purpose would fill the test's output.
func Config(h *lab.Host, endpoints ...string) clientv3.Config {
	return clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		DialOptions: []grpc.DialOption{
			grpc.WithContextDialer(labtest.DialIn(h)),
			grpc.WithConnectParams(reconnect),
		},
		Logger: zap.NewNop(),
	}
}

// Client returns a client of the endpoints that connects from inside host h
// (see Config), closed when the test ends. It does not wait for a
// connection: the first request does.
func Client(t labtest.TB, h *lab.Host, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(Config(h, endpoints...))
	if err != nil {
		t.Fatalf("etcd client from lab host %s to %v: %v", h.Name, endpoints, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
