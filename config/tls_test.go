package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/config"
)

// writeTLSFiles writes a self-signed CA and a client certificate it
// signed, with the client's key, as PEM files in a temporary directory.
func writeTLSFiles(t *testing.T) (caFile, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "baton test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "baton test client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("client.pem", "CERTIFICATE", der), write("client-key.pem", "EC PRIVATE KEY", keyDER)
}

// The redis.tls-* files reach the client's TLS configuration; setting
// them turns TLS on; files that do not load are reported by Load under
// their key.
func TestRedisTLSFiles(t *testing.T) {
	ca, cert, key := writeTLSFiles(t)
	c, err := config.Load(config.Map(map[string]any{"redis.tls-ca-file": ca, "redis.tls-cert-file": cert, "redis.tls-key-file": key}))
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.Redis.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if o.TLSConfig == nil || o.TLSConfig.RootCAs == nil || len(o.TLSConfig.Certificates) != 1 || o.TLSConfig.MinVersion < 0x0303 {
		t.Fatalf("TLSConfig = %+v; want TLS 1.2+, the CA pool and one client certificate", o.TLSConfig)
	}

	for _, tc := range []struct {
		name string
		m    map[string]any
		want string
	}{
		{"cert without key", map[string]any{"redis.tls-cert-file": cert}, "config: redis.tls-key-file=\"\": must be set together with redis.tls-cert-file"},
		{"missing CA", map[string]any{"redis.tls-ca-file": filepath.Join(t.TempDir(), "none.pem")}, "config: redis.tls-ca-file="},
		{"CA not PEM", map[string]any{"redis.tls-ca-file": key}, "no PEM certificate"},
		{"key of another cert", map[string]any{"redis.tls-cert-file": ca, "redis.tls-key-file": key}, "config: redis.tls-cert-file="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(config.Map(tc.m))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
