package store

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// expiredCert returns a self-signed certificate for 127.0.0.1 that
// expired an hour ago.
func expiredCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "expired"},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsServer starts an HTTPS server (HTTP/2, as etcd's) with the TLS
// configuration cfg, httptest's certificate unless cfg has one, and
// returns it and a pool that trusts its certificate.
func tlsServer(t *testing.T, cfg *tls.Config) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.EnableHTTP2, srv.TLS = true, cfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, pool
}

// TestTLSFailed: each way a real handshake with the store can fail is a
// TLS failure by its type, and a good handshake is none.
func TestTLSFailed(t *testing.T) {
	t.Parallel()
	good, goodPool := tlsServer(t, nil)
	expired, expiredPool := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{expiredCert(t)}})
	clientAuth, clientAuthPool := tlsServer(t, &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert})
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)

	tests := []struct {
		name string
		srv  *httptest.Server
		// host is the name the client asks for: httptest's certificate
		// is for 127.0.0.1, ::1 and example.com.
		host string
		cfg  *tls.Config
		// as is a pointer to what the error must be, to errors.As.
		as any
	}{
		{"a good server", good, "127.0.0.1", &tls.Config{RootCAs: goodPool}, nil},
		{"another CA", good, "127.0.0.1", &tls.Config{RootCAs: x509.NewCertPool()}, &x509.UnknownAuthorityError{}},
		{"another CA, as crypto/tls says it", good, "127.0.0.1", &tls.Config{RootCAs: x509.NewCertPool()}, new(*tls.CertificateVerificationError)},
		{"another host's certificate", good, "localhost", &tls.Config{RootCAs: goodPool}, &x509.HostnameError{}},
		{"an expired certificate", expired, "127.0.0.1", &tls.Config{RootCAs: expiredPool}, &x509.CertificateInvalidError{}},
		{"a server without TLS", plain, "127.0.0.1", &tls.Config{}, &tls.RecordHeaderError{}},
		// The server refuses in an alert: after the handshake in TLS 1.3,
		// during it in TLS 1.2.
		{"no client certificate, TLS 1.3", clientAuth, "127.0.0.1", &tls.Config{RootCAs: clientAuthPool}, new(*net.OpError)},
		{"no client certificate, TLS 1.2", clientAuth, "127.0.0.1", &tls.Config{RootCAs: clientAuthPool, MaxVersion: tls.VersionTLS12}, new(*net.OpError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := tt.srv.Listener.Addr().String()
			_, port, _ := net.SplitHostPort(addr)
			dial := func(ctx context.Context, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			}
			err := probeTLS(context.Background(), "https://"+net.JoinHostPort(tt.host, port), tt.cfg, dial)
			want := tt.as != nil
			if (err != nil) != want {
				t.Fatalf("probeTLS: got %v, want an error: %v", err, want)
			}
			if want && !errors.As(err, tt.as) {
				t.Errorf("probeTLS: got %v, want it to be a %T", err, tt.as)
			}
			if got := tlsFailed(err); got != want {
				t.Errorf("tlsFailed(%v): got %v, want %v", err, got, want)
			}
		})
	}
}

// TestTLSFailedErrors: crafted errors of each class, gRPC's status for a
// failed handshake, and errors that are no TLS failure.
func TestTLSFailedErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"unknown authority", x509.UnknownAuthorityError{}, true},
		{"hostname", x509.HostnameError{Host: "store.invalid"}, true},
		{"expired", x509.CertificateInvalidError{Reason: x509.Expired}, true},
		{"not TLS", tls.RecordHeaderError{Msg: "tls: first record does not look like a TLS handshake"}, true},
		{"verification", &tls.CertificateVerificationError{Err: errors.New("x509: no")}, true},
		{"wrapped", errors.Join(errors.New("handshake"), &tls.CertificateVerificationError{}), true},
		{"gRPC's failed handshake", status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`), true},
		{"gRPC's alert after the handshake", status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: remote error: tls: certificate required"`), true},
		{"gRPC's refused connection", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 192.0.2.5:2379: connect: connection refused"`), false},
		{"a deadline", context.DeadlineExceeded, false},
		{"a socket's error", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tlsFailed(tt.err); got != tt.want {
				t.Errorf("tlsFailed(%v): got %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestExplainTLS: a TLS failure, typed or in gRPC's words, gets the TLS
// sentence; an unreachable store still gets its own.
func TestExplainTLS(t *testing.T) {
	t.Parallel()
	c := &Client{Endpoints: []string{"https://192.0.2.5:2379"}}
	tlsSentence := "TLS with the store at https://192.0.2.5:2379 failed ("
	for _, err := range []error{
		x509.UnknownAuthorityError{},
		status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: EOF"`),
	} {
		got := c.Explain(err).Error()
		if !strings.HasPrefix(got, tlsSentence) || !strings.HasSuffix(got, "): check --store-ca, --store-cert and --store-key") {
			t.Errorf("Explain(%v): got %q, want the TLS sentence", err, got)
		}
	}
	got := c.Explain(status.Error(codes.Unavailable, "connection refused"))
	if !errors.Is(got, ErrUnreachable) {
		t.Errorf("Explain of a refused connection: got %v, want ErrUnreachable", got)
	}
}

// TestOpenExplainsTLS: Open against a server whose certificate no CA it
// is given signed fails in the TLS sentence, from its probe, not in
// gRPC's timeout.
func TestOpenExplainsTLS(t *testing.T) {
	t.Parallel()
	srv, _ := tlsServer(t, nil)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), Config{URL: "etcds://" + srv.Listener.Addr().String(), CA: ca, Timeout: time.Second})
	if err == nil || !strings.HasPrefix(err.Error(), "TLS with the store at https://"+srv.Listener.Addr().String()+" failed (") ||
		!strings.Contains(err.Error(), "--store-ca") {
		t.Fatalf("Open: got %v, want the TLS sentence", err)
	}
}
