package etcdlab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/vipctl/vip/test/labtest"
)

// PKI is a test CA and the PEM files it signed: a server certificate for
// a store at one address, and client certificates made by Client.
type PKI struct {
	// CA is the CA's certificate; ServerCert and ServerKey the server's.
	CA, ServerCert, ServerKey string
	// Files is the TLSFiles of StartEtcdTLS: this server's, whose clients
	// this CA signs.
	Files TLSFiles

	dir, name string
	caCert    *x509.Certificate
	caKey     *ecdsa.PrivateKey
	serial    int64
}

// NewPKI makes a CA named name, valid for the next hour, and a server
// certificate for ip, each a file in dir whose name starts with name.
func NewPKI(t labtest.TB, dir, name string, ip netip.Addr) *PKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("CA certificate: %v", err)
	}
	caCert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("CA certificate: %v", err)
	}
	p := &PKI{dir: dir, name: name, caCert: caCert, caKey: caKey, serial: 1}
	p.CA = p.write(t, "ca.pem", "CERTIFICATE", der)
	p.ServerCert, p.ServerKey = p.leaf(t, "server", name, x509.ExtKeyUsageServerAuth, []net.IP{ip.AsSlice()})
	p.Files = TLSFiles{Cert: p.ServerCert, Key: p.ServerKey, CA: p.CA}
	return p
}

// Client makes a client certificate whose common name is cn (the user
// etcd takes it for, with authentication enabled) and returns its files.
func (p *PKI) Client(t labtest.TB, cn string) (cert, key string) {
	t.Helper()
	return p.leaf(t, "client-"+cn, cn, x509.ExtKeyUsageClientAuth, nil)
}

func (p *PKI) leaf(t labtest.TB, file, cn string, usage x509.ExtKeyUsage, ips []net.IP) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("key of %s: %v", cn, err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &k.PublicKey, p.caKey)
	if err != nil {
		t.Fatalf("certificate of %s: %v", cn, err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatalf("key of %s: %v", cn, err)
	}
	return p.write(t, file+".pem", "CERTIFICATE", der), p.write(t, file+"-key.pem", "EC PRIVATE KEY", kder)
}

func (p *PKI) write(t labtest.TB, file, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, p.name+"-"+file)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path
}
