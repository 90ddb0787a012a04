package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config says how to reach the store.
type Config struct {
	// URL is etcd://HOST:PORT[,HOST:PORT...] (etcds:// for TLS).
	URL    string
	Prefix string
	// CA, Cert and Key are PEM files for TLS: CA checks the servers,
	// Cert and Key are this client's certificate.
	CA, Cert, Key string
	// User and Password are this client's etcd user, for a store with
	// authentication enabled; both or neither. Without a user, etcd takes
	// the common name of Cert as the user (etcd --client-cert-auth).
	User, Password string
	// Dial, if set, makes the connections (tests dial inside a lab host).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Timeout bounds each request; zero takes DefaultTimeout.
	Timeout time.Duration
}

// MaxTxnOps is etcd's limit on one transaction (--max-txn-ops, 128 by
// default): at most that many compares, and as many operations in each
// branch. Every batch vip reads or writes in one transaction is sized from
// it, and the ledger's contract (internal/fleet) and
// TestBatchesFit run the largest against a real etcd.
const MaxTxnOps = 128

// MaxReadsPerTxn bounds the operations of a transaction of reads (or of
// puts of one key each), and nothing else.
const MaxReadsPerTxn = MaxTxnOps

// DefaultTimeout bounds one request to the store.
const DefaultTimeout = 5 * time.Second

// Client is a connection to the store and the keys under its prefix.
type Client struct {
	*clientv3.Client
	Keys      Keys
	Endpoints []string
	timeout   time.Duration
	// identity is who the store knows this client as (Identity).
	identity string
}

// Identity is who the store authenticated this client as: its etcd user
// name, or the common name of its client certificate when etcd takes that
// as the user; empty when the store asked for no authentication. The
// history records it beside what the operator's environment says.
func (c *Client) Identity() string { return c.identity }

// ParseURL reads etcd://HOST:PORT[,HOST:PORT...] (or etcds:// for TLS) into
// endpoints for the etcd client.
func ParseURL(s string) (endpoints []string, secure bool, err error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || (scheme != "etcd" && scheme != "etcds") || rest == "" {
		return nil, false, fmt.Errorf("store %q is not etcd://HOST:PORT[,HOST:PORT...]", s)
	}
	secure = scheme == "etcds"
	for _, hp := range strings.Split(strings.TrimSuffix(rest, "/"), ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" || port == "" {
			return nil, false, fmt.Errorf("store %q: %q is not HOST:PORT", s, hp)
		}
		u := url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}
		if secure {
			u.Scheme = "https"
		}
		endpoints = append(endpoints, u.String())
	}
	return endpoints, secure, nil
}

// Open connects to the store of cfg and checks that it answers, so that a
// wrong address, TLS or authentication fails here in one sentence.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	endpoints, secure, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, configError{err}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if err := CheckPrefix(cfg.Prefix); err != nil {
		return nil, configError{err}
	}
	if (cfg.User == "") != (cfg.Password == "") {
		return nil, configError{errors.New("a store user goes with its password: give --store-user and --store-password-file (or VIP_STORE_USER and VIP_STORE_PASSWORD) together")}
	}
	if !secure && (cfg.CA != "" || cfg.Cert != "" || cfg.Key != "") {
		// etcd:// is plain: TLS is asked for by the URL, never
		// switched on behind it by a file.
		return nil, configError{fmt.Errorf("--store-ca, --store-cert and --store-key are for TLS, and %s is plain: give the store as etcds://%s", cfg.URL, strings.TrimPrefix(cfg.URL, "etcd://"))}
	}
	identity := cfg.User
	var tlsc *tls.Config
	if secure {
		if tlsc, err = tlsConfig(cfg); err != nil {
			return nil, configError{err}
		}
		if identity == "" && len(tlsc.Certificates) > 0 {
			identity = tlsc.Certificates[0].Leaf.Subject.CommonName
		}
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cc := clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsc,
		DialTimeout: timeout,
		// A lost connection is noticed within seconds, not minutes.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	}
	// gRPC's own back-off waits up to two minutes between attempts; an
	// agent must notice within a second that the store is back.
	cc.DialOptions = append(cc.DialOptions, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: 2 * time.Second,
	}))
	if cfg.Dial != nil {
		cc.DialOptions = append(cc.DialOptions, grpc.WithContextDialer(cfg.Dial))
	}
	var auth *tokenAuth
	if cfg.User != "" {
		// vip keeps the token, not the etcd client (tokenAuth says why).
		auth = &tokenAuth{user: cfg.User, password: cfg.Password}
		cc.DialOptions = append(cc.DialOptions, grpc.WithPerRPCCredentials(auth), grpc.WithChainUnaryInterceptor(auth.intercept))
	}
	c := &Client{Keys: NewKeys(cfg.Prefix), Endpoints: endpoints, timeout: timeout, identity: identity}
	cli, err := clientv3.New(cc)
	if err == nil {
		c.Client = cli
		rctx, cancel := c.ctx(ctx)
		defer cancel()
		if auth != nil {
			// A wrong password fails here.
			cli.Watcher = &tokenWatcher{Watcher: cli.Watcher, kv: cli.KV, timeout: timeout}
			err = auth.renew(rctx, cli.ActiveConnection(), auth.current())
		}
		if err == nil {
			_, err = cli.Get(rctx, c.Keys.Nodes(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		}
		if err != nil {
			cli.Close()
		}
	}
	if err != nil {
		// gRPC retries a failed handshake until the deadline and then
		// says only that: ask the first server once, to say why. What
		// fails that handshake fails TLS, whatever its type.
		if tlsc != nil {
			if perr := probeTLS(ctx, endpoints[0], tlsc, cfg.Dial); perr != nil {
				return nil, c.tlsFailure(perr)
			}
		}
		return nil, c.explain(err, true)
	}
	return c, nil
}

// probeTLS makes one TLS connection to endpoint as the client would, and
// returns why TLS failed, if it did: the handshake's error, or the alert
// the server sent after it.
func probeTLS(ctx context.Context, endpoint string, tc *tls.Config, dial func(context.Context, string) (net.Conn, error)) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil
	}
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	raw, err := dial(ctx, u.Host)
	if err != nil {
		return nil
	}
	defer raw.Close()
	cfg := tc.Clone()
	cfg.ServerName, cfg.NextProtos = u.Hostname(), []string{"h2"}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	// With TLS 1.3 the server judges the client's certificate after the
	// handshake, and says so in an alert on the first read.
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	var b [1]byte
	if _, err := conn.Read(b[:]); tlsFailed(err) {
		return err
	}
	return nil
}

// ctx bounds one request.
func (c *Client) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// ErrUnreachable marks a store that did not answer in time.
var ErrUnreachable = errors.New("the store is unreachable")

// ErrConfig says the store's settings themselves are wrong (its URL, its
// prefix, TLS files that cannot be read, a user without a password):
// the fix is in the flags, and nothing was tried.
var ErrConfig = errors.New("the store's settings are wrong")

// configError is an error of the store's settings (ErrConfig), said as
// its own sentence.
type configError struct{ err error }

func (e configError) Error() string        { return e.err.Error() }
func (e configError) Unwrap() error        { return e.err }
func (e configError) Is(target error) bool { return target == ErrConfig }

// ErrCredentials marks credentials the store does not take: a wrong user
// or password, none where it asks for them, or TLS that fails (a client
// certificate of another CA, a CA that did not sign the store's). The fix
// is in how vip was started, and nothing was done.
var ErrCredentials = errors.New("the store refused vip's credentials")

// ErrDenied marks a request the store refused this user: its roles lack
// the permission (DeniedError says which).
var ErrDenied = errors.New("the store denied the request")

// DeniedError is a request the store refused for want of a permission.
type DeniedError struct {
	// User is who the store knows the client as (Client.Identity).
	User   string
	Prefix string
	// Read says the read was refused; else a write was.
	Read bool
}

func (e *DeniedError) Error() string {
	who := "this client"
	if e.User != "" {
		who = fmt.Sprintf("user %q", e.User)
	}
	if e.Read {
		return fmt.Sprintf("the store refused the read: %s has no read permission on %s (ask for a role with read on the prefix)", who, e.Prefix)
	}
	return fmt.Sprintf("the store refused the write: %s has no write permission on %s (ask for a role with readwrite on the prefix)", who, e.Prefix)
}

func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// credentialsError is a sentence about credentials, ErrCredentials to
// errors.Is.
type credentialsError struct{ msg string }

func (e *credentialsError) Error() string        { return e.msg }
func (e *credentialsError) Is(target error) bool { return target == ErrCredentials }

// Explain turns an etcd client error into one sentence that names the fix.
// A permission the store denies is taken as one to write: Open has read
// under the prefix by then.
func (c *Client) Explain(err error) error { return c.explain(err, false) }

// explain is Explain, for a read when read.
func (c *Client) explain(err error, read bool) error {
	at := strings.Join(c.Endpoints, ",")
	// gRPC reports a failed TLS handshake as Unavailable: look for TLS
	// first.
	switch code := status.Code(err); {
	case tlsFailed(err):
		return c.tlsFailure(err)
	case isEtcd(err, rpctypes.ErrAuthFailed):
		return &credentialsError{fmt.Sprintf("the store at %s refused user %q: wrong user or password (check --store-user and --store-password-file, or VIP_STORE_USER and VIP_STORE_PASSWORD)", at, c.identity)}
	case isEtcd(err, rpctypes.ErrUserEmpty):
		return &credentialsError{fmt.Sprintf("the store at %s has authentication enabled and vip gave no user: give --store-user and --store-password-file (or VIP_STORE_USER and VIP_STORE_PASSWORD), or a client certificate whose common name is a user (--store-cert)", at)}
	case isEtcd(err, rpctypes.ErrPermissionDenied):
		return &DeniedError{User: c.identity, Prefix: c.Keys.Prefix, Read: read}
	case errors.Is(err, context.DeadlineExceeded), code == codes.DeadlineExceeded, code == codes.Unavailable:
		return fmt.Errorf("%w at %s (%v): check --store and the network to it", ErrUnreachable, at, err)
	case code == codes.Unauthenticated, code == codes.PermissionDenied:
		return &credentialsError{fmt.Sprintf("the store at %s refused vip (%v): check --store-user and --store-password-file, or the client certificate (--store-cert, --store-key), and its roles", at, err)}
	}
	return fmt.Errorf("the store at %s: %w", at, err)
}

// isEtcd reports whether err is etcd's error want, as the client returns
// it (an rpctypes.EtcdError) or as gRPC does (a status).
func isEtcd(err, want error) bool {
	return err != nil && (errors.Is(err, want) || errors.Is(rpctypes.Error(err), want))
}

// tlsFailure is the sentence for err, a failure of TLS with the store.
func (c *Client) tlsFailure(err error) error {
	return &credentialsError{fmt.Sprintf("TLS with the store at %s failed (%v): check --store-ca, --store-cert and --store-key", strings.Join(c.Endpoints, ","), err)}
}

// tlsFailed reports whether err says that TLS with the store failed. The
// errors of crypto/tls and crypto/x509 say it by their types: a server's
// certificate this client does not trust (*tls.CertificateVerificationError,
// around x509.UnknownAuthorityError, x509.HostnameError or
// x509.CertificateInvalidError), a server that does not speak TLS
// (tls.RecordHeaderError), or an alert (isAlert). gRPC keeps none of the
// types: it reports a failed handshake as a status whose message is the
// error's text, so for a status the words are all there is.
func tlsFailed(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &authority), errors.As(err, &host),
		errors.As(err, &invalid), errors.As(err, &record), isAlert(err):
		return true
	}
	if s, ok := status.FromError(err); ok && err != nil {
		msg := s.Message()
		return strings.Contains(msg, "certificate") || strings.Contains(msg, "tls:") || strings.Contains(msg, "handshake")
	}
	return false
}

// isAlert reports whether err is a TLS alert: one the server sent (a
// client certificate refused, for one), or one this client sent on a
// message of the server's it could not take. crypto/tls returns an alert
// as a *net.OpError of operation "remote error" or "local error" around
// its unexported alert type.
func isAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "remote error" || op.Op == "local error")
}

func tlsConfig(cfg Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CA != "" {
		pem, err := os.ReadFile(cfg.CA)
		if err != nil {
			return nil, fmt.Errorf("read --store-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--store-ca %s holds no PEM certificate", cfg.CA)
		}
		tc.RootCAs = pool
	}
	if (cfg.Cert == "") != (cfg.Key == "") {
		return nil, errors.New("--store-cert and --store-key go together: give both, or neither")
	}
	if cfg.Cert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.Cert, cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("load --store-cert and --store-key: %w", err)
		}
		if cert.Leaf == nil {
			if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
				return nil, fmt.Errorf("parse --store-cert %s: %w", cfg.Cert, err)
			}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
