package etcdlab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// The ports every member listens on, on its host's eth0 address: each host
// is a network namespace of its own, so they never collide.
const (
	ClientPort = 2379
	PeerPort   = 2380
)

// healthyTimeout bounds the wait for a started member to answer a quorum
// read. It is wide: etcd fsyncs its first WAL entries, and a cluster elects
// its first leader, on a machine that other tests keep busy.
const healthyTimeout = 30 * time.Second

// probeTimeout bounds one health or status request.
const probeTimeout = 2 * time.Second

// Etcd is one etcd server running inside a lab host, started by StartEtcd
// or StartEtcdCluster.
type Etcd struct {
	// Name is the member's name: its host's name.
	Name string
	// Host is the lab host etcd runs in.
	Host *lab.Host

	bin     string
	args    []string // the same on every start: a restart reuses the data directory
	proc    *labtest.Proc
	status  *clientv3.Client // from Host to this member alone, for Leader
	healthy *http.Client     // from Host to this member alone, for the health check
}

// StartEtcd runs a single-member etcd inside h, serving clients on
// http://IP:2379 of h's IPv4 address with a data directory of its own, and
// returns once it answers a quorum read. The test's cleanup kills it, and
// its data directory is removed after.
func StartEtcd(t labtest.TB, h *lab.Host, opts ...Option) *Etcd {
	t.Helper()
	e := newMember(t, h, "vip-"+h.Netns, []*lab.Host{h})
	e.apply(opts)
	e.start(t)
	e.waitHealthy(t)
	return e
}

// TLSFiles are the PEM files of a store that also serves clients over TLS.
type TLSFiles struct {
	// Cert and Key are the server's; CA checks the clients' certificates,
	// which it then requires.
	Cert, Key, CA string
}

// TLSPort is where StartEtcdTLS serves clients over TLS, beside ClientPort.
const TLSPort = 2381

// StartEtcdTLS is StartEtcd with clients served over TLS too, on
// https://IP:2381 (TLSEndpoint), with client certificates required there.
// The plain endpoint stays for the health check.
func StartEtcdTLS(t labtest.TB, h *lab.Host, files TLSFiles, opts ...Option) *Etcd {
	t.Helper()
	e := newMember(t, h, "vip-"+h.Netns, []*lab.Host{h})
	e.apply(opts)
	for i, a := range e.args {
		if a == "--listen-client-urls" {
			e.args[i+1] += "," + e.TLSEndpoint()
		}
	}
	e.args = append(e.args, "--cert-file", files.Cert, "--key-file", files.Key,
		"--trusted-ca-file", files.CA, "--client-cert-auth")
	e.start(t)
	e.waitHealthy(t)
	return e
}

// TLSEndpoint returns https://IP:2381, where StartEtcdTLS serves clients
// over TLS.
func (e *Etcd) TLSEndpoint() string {
	return "https://" + netip.AddrPortFrom(e.Host.IPv4.Addr(), TLSPort).String()
}

// EnvBinary names the environment variable that, when set, is the etcd
// binary the lab runs instead of the one in PATH (Debian's etcd-server):
// vipbench sets it to the etcd it builds from go.mod's
// go.etcd.io/etcd/server/v3, the version the embedded test store runs.
const EnvBinary = "VIP_ETCD"

// Binary returns the etcd binary the lab runs: $VIP_ETCD, else etcd in
// PATH (the test skips, or fails under CI=true, without one).
func Binary(t labtest.TB) string {
	t.Helper()
	if bin := os.Getenv(EnvBinary); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("$%s: %v", EnvBinary, err)
		}
		return bin
	}
	return labtest.RequireTool(t, "etcd")
}

// newMember prepares the member of host h in a new cluster of the hosts
// members, named token; it does not start it.
func newMember(t labtest.TB, h *lab.Host, token string, members []*lab.Host) *Etcd {
	t.Helper()
	bin := Binary(t)
	var initial []string
	for _, m := range members {
		initial = append(initial, m.Name+"="+url(t, m, PeerPort))
	}
	e := &Etcd{Name: h.Name, Host: h, bin: bin}
	e.args = []string{
		"--name", h.Name,
		// A directory etcd creates itself gets the 0700 it asks for.
		"--data-dir", filepath.Join(t.TempDir(), "data"),
		"--listen-client-urls", e.Endpoint(),
		"--advertise-client-urls", e.Endpoint(),
		"--listen-peer-urls", url(t, h, PeerPort),
		"--initial-advertise-peer-urls", url(t, h, PeerPort),
		"--initial-cluster", strings.Join(initial, ","),
		"--initial-cluster-state", "new",
		"--initial-cluster-token", token,
		// capnslog, 3.4's default, says on every start that it is deprecated.
		"--logger", "zap",
		"--log-outputs", "stderr",
	}
	e.status = Client(t, h, e.Endpoint())
	dial := labtest.DialIn(h)
	e.healthy = &http.Client{
		Timeout: probeTimeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return dial(ctx, addr)
			},
			// A new connection each time: one kept from before a restart
			// would only fail.
			DisableKeepAlives: true,
		},
	}
	return e
}

// url returns http://IP:port of h's eth0 IPv4 address, failing the test when
// h has none.
func url(t labtest.TB, h *lab.Host, port uint16) string {
	t.Helper()
	if !h.IPv4.IsValid() {
		t.Fatalf("etcd in lab host %s needs an IPv4 address on eth0: give its lab.HostConfig an IPv4", h.Name)
	}
	return "http://" + netip.AddrPortFrom(h.IPv4.Addr(), port).String()
}

// Endpoint returns the URL clients reach the member at, http://IP:2379.
func (e *Etcd) Endpoint() string {
	return "http://" + netip.AddrPortFrom(e.Host.IPv4.Addr(), ClientPort).String()
}

// start runs etcd with the member's arguments; it does not wait.
func (e *Etcd) start(t labtest.TB) {
	t.Helper()
	e.proc = labtest.Start(t, e.Host, e.bin, e.args...)
}

// Running reports whether the member's etcd process is running: started
// and neither stopped nor killed since, nor exited on its own.
func (e *Etcd) Running() bool {
	return e.proc != nil && !e.proc.Exited()
}

// Stop ends etcd with SIGTERM, as a service manager would, and waits for it
// to exit.
func (e *Etcd) Stop(t labtest.TB) {
	t.Helper()
	// A member stopped after its peers may try to hand its leadership to
	// one that is gone, and take seconds to exit on a loaded machine (a
	// long nemesis run saw over 5 s): that is etcd's, not what a test is
	// about, so it is killed then. Its write-ahead log keeps its data.
	e.proc.StopOrKill(t, 10*time.Second)
}

// Kill ends etcd with SIGKILL, as a crash would, and waits for it to exit.
func (e *Etcd) Kill(t labtest.TB) {
	t.Helper()
	e.proc.Kill(t)
}

// Freeze stops etcd's process with SIGSTOP, as a stalled host or VM would:
// its connections stay open and nothing answers on them. thaw (SIGCONT)
// wakes it; it runs at cleanup too, so that the process can be stopped.
func (e *Etcd) Freeze(t labtest.TB) (thaw func()) {
	t.Helper()
	pid := e.proc.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP to etcd (pid %d): %v", pid, err)
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !e.proc.Exited() {
				t.Errorf("SIGCONT to etcd (pid %d): %v", pid, err)
			}
		})
	}
	t.Cleanup(thaw)
	return thaw
}

// Restart stops etcd if it is running, starts it again on the same data
// directory, so it keeps its keys, leases and cluster membership, and returns
// once it answers a quorum read (for a cluster member: once it has rejoined a
// quorum).
func (e *Etcd) Restart(t labtest.TB) {
	t.Helper()
	if e.Running() {
		e.Stop(t)
	}
	e.start(t)
	e.waitHealthy(t)
}

// waitHealthy waits until the member answers a quorum read, failing the test
// at once if etcd exits.
func (e *Etcd) waitHealthy(t labtest.TB) {
	t.Helper()
	labtest.Eventually(t, healthyTimeout, func() (bool, string) {
		if e.proc.Exited() {
			t.Fatalf("etcd on %s exited before it was healthy; output:\n%s", e.Host.Name, e.proc.Output())
		}
		err := e.health()
		return err == nil, fmt.Sprintf("etcd on %s is not healthy: %v", e.Host.Name, err)
	})
}

// health asks the member's /health, which etcd answers true only when it
// has a leader and a quorum read through raft succeeds.
func (e *Etcd) health() error {
	resp, err := e.healthy.Get(e.Endpoint() + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return fmt.Errorf("read /health: %w", err)
	}
	var h struct {
		Health string `json:"health"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("/health said %q: %w", body, err)
	}
	if resp.StatusCode != http.StatusOK || h.Health != "true" {
		return fmt.Errorf("/health said %s %q", resp.Status, body)
	}
	return nil
}

// memberStatus asks the member for its own id and the leader it follows
// (zero when it knows none).
func (e *Etcd) memberStatus() (self, leader uint64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	resp, err := e.status.Status(ctx, e.Endpoint())
	if err != nil {
		return 0, 0, err
	}
	return resp.Header.MemberId, resp.Leader, nil
}
