package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSCerts are the PEM files of a private CA and of a server and a client
// certificate it signed, for servers that tests start with TLS. The
// server's certificate is valid for 127.0.0.1, ::1 and "localhost".
type TLSCerts struct {
	CAFile                string // the CA's certificate
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewTLSCerts makes a new CA and the server and client certificates it
// signs, in a directory removed when t ends. Two calls make two CAs that
// do not trust each other's certificates.
func NewTLSCerts(t testing.TB) *TLSCerts {
	t.Helper()
	c, err := makeTLSCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func makeTLSCerts(dir string) (*TLSCerts, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "baton testenv CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	write := func(name, typ string, der []byte) (string, error) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			return "", fmt.Errorf("testenv: write %s: %w", path, err)
		}
		return path, nil
	}
	leaf := func(serial int64, name string, server bool, usage ...x509.ExtKeyUsage) (cert, key string, err error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "baton testenv " + name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			ExtKeyUsage: usage, KeyUsage: x509.KeyUsageDigitalSignature}
		if server {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		keyDER, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return "", "", err
		}
		if cert, err = write(name+".pem", "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		key, err = write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
		return cert, key, err
	}
	c := &TLSCerts{}
	if c.CAFile, err = write("ca.pem", "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	// Servers also dial each other with their certificate (replication,
	// sentinels): it serves as a client certificate too.
	if c.ServerCert, c.ServerKey, err = leaf(2, "server", true, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	if c.ClientCert, c.ClientKey, err = leaf(3, "client", false, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	return c, nil
}
