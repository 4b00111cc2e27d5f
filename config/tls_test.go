package config_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/testkit/testenv"
)

// writeTLSFiles writes a CA and a client certificate it signed, with the
// client's key, as PEM files in a temporary directory.
func writeTLSFiles(t *testing.T) (caFile, certFile, keyFile string) {
	t.Helper()
	c := testenv.NewTLSCerts(t)
	return c.CAFile, c.ClientCert, c.ClientKey
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

// A store over TLS to a real redis-server that the test starts with a CA
// and certificates of its own: the client verifies the server and, with
// tls-auth-clients, shows its own certificate (mutual TLS), with every
// redis.tls-* key read from a file or the environment. Each mistake (no
// client certificate, another CA, a name the certificate does not hold,
// plain TCP to the TLS port) fails fast with an error naming the key to
// look at.
func TestRedisTLS(t *testing.T) {
	certs := testenv.NewTLSCerts(t)
	other := testenv.NewTLSCerts(t) // a CA the server's certificate is not from
	r := testenv.NewRedis(t, testenv.RedisOptions{TLS: certs, TLSAuthClients: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	base := map[string]any{"redis.addrs": r.TLSAddr(), "redis.fail-fast": true,
		"redis.dial-timeout-in-milliseconds": 2000, "redis.read-timeout-in-milliseconds": 1000}
	with := func(extra map[string]any) map[string]any {
		m := maps.Clone(base)
		maps.Copy(m, extra)
		return m
	}
	store := func(t *testing.T, src config.Source) (*config.RedisStore, error) {
		t.Helper()
		cfg, err := config.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.RedisStore(ctx, redisbackend.WithoutRestartGuard())
	}

	t.Run("File", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "baton.yaml")
		yaml := fmt.Sprintf("redis:\n  addrs: %q\n  fail-fast: true\n  tls-ca-file: %q\n  tls-cert-file: %q\n  tls-key-file: %q\n",
			r.TLSAddr(), certs.CAFile, certs.ClientCert, certs.ClientKey)
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := store(t, config.File(file))
		if err != nil {
			t.Fatalf("mutual TLS from a file: %v", err)
		}
		defer s.Close()
		key := backend.AppKey("acme", "billing", "lock", "tls")
		if _, err := s.Acquire(ctx, key, "a", time.Minute, 0); err != nil {
			t.Fatalf("Acquire over TLS: %v", err)
		}
		if err := s.Release(ctx, key, "a", 0); err != nil {
			t.Fatalf("Release over TLS: %v", err)
		}
	})
	t.Run("Env", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("BATON_REDIS_ADDRS", r.TLSAddr())
		t.Setenv("BATON_REDIS_FAIL_FAST", "true")
		t.Setenv("BATON_REDIS_TLS_CA_FILE", certs.CAFile)
		t.Setenv("BATON_REDIS_TLS_CERT_FILE", certs.ClientCert)
		t.Setenv("BATON_REDIS_TLS_KEY_FILE", certs.ClientKey)
		t.Setenv("BATON_REDIS_TLS_SERVER_NAME", "localhost") // a name the certificate holds
		s, err := store(t, config.Env("BATON_"))
		if err != nil {
			t.Fatalf("mutual TLS from the environment: %v", err)
		}
		s.Close()
	})
	for _, c := range []struct {
		name  string
		extra map[string]any
		hint  string
	}{
		{"NoClientCert", map[string]any{"redis.tls-ca-file": certs.CAFile}, "redis.tls-cert-file"},
		{"WrongCA", map[string]any{"redis.tls-ca-file": other.CAFile, "redis.tls-cert-file": certs.ClientCert, "redis.tls-key-file": certs.ClientKey}, "redis.tls-ca-file"},
		{"WrongName", map[string]any{"redis.tls-ca-file": certs.CAFile, "redis.tls-cert-file": certs.ClientCert, "redis.tls-key-file": certs.ClientKey,
			"redis.tls-server-name": "not-the-server"}, "redis.tls-server-name"},
		{"PlainToTLSPort", nil, "redis.tls"},
		{"TLSToPlainPort", map[string]any{"redis.addrs": r.Addr(), "redis.tls-ca-file": certs.CAFile}, "redis.tls"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := store(t, config.Map(with(c.extra)))
			if err == nil {
				s.Close()
				t.Fatal("the store started; want a fail-fast error")
			}
			if !errors.Is(err, config.ErrUnreachable) || !strings.Contains(err.Error(), "store unreachable at") || !strings.Contains(err.Error(), c.hint) {
				t.Fatalf("error %q; want ErrUnreachable naming the address and %q", err, c.hint)
			}
		})
	}
	t.Run("InsecureSkipVerify", func(t *testing.T) {
		// Any CA, or none: the connection is made, unverified.
		s, err := store(t, config.Map(with(map[string]any{"redis.tls-insecure-skip-verify": true,
			"redis.tls-cert-file": certs.ClientCert, "redis.tls-key-file": certs.ClientKey})))
		if err != nil {
			t.Fatalf("insecure-skip-verify: %v", err)
		}
		s.Close()
	})
}

// Sentinel over TLS: the servers replicate and the sentinels monitor over
// TLS, and a store made from the redis.* keys finds the master through the
// sentinels' TLS ports with mutual TLS, holds a lease and follows a
// failover; with another CA it fails fast naming redis.tls-ca-file.
func TestRedisTLSSentinel(t *testing.T) {
	certs := testenv.NewTLSCerts(t)
	other := testenv.NewTLSCerts(t)
	sn := testenv.NewSentinel(t, testenv.SentinelOptions{Redis: testenv.RedisOptions{TLS: certs, TLSAuthClients: true}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	load := func(ca string) (*config.RedisStore, error) {
		return tlsStore(ctx, t, certs, ca, map[string]any{
			"redis.addrs": strings.Join(sn.SentinelTLSAddrs(), ","), "redis.master-name": sn.MasterName()})
	}

	s, err := load(certs.CAFile)
	if err != nil {
		t.Fatalf("Sentinel over mutual TLS: %v", err)
	}
	defer s.Close()
	key := backend.AppKey("acme", "billing", "lock", "tls-sentinel")
	l, err := s.Acquire(ctx, key, "a", time.Minute, 0)
	if err != nil {
		t.Fatalf("Acquire over TLS via Sentinel: %v", err)
	}
	newMaster, err := sn.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The lease was replicated before the failover (SENTINEL FAILOVER
	// waits for the replica to catch up); the client finds the new master.
	var got backend.Lease
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got, err = s.Get(ctx, key); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || got.Token != l.Token {
		t.Fatalf("Get after the failover to %s = %+v, %v; want the lease of token %d", newMaster, got, err, l.Token)
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatalf("Release on the new master over TLS: %v", err)
	}

	refusesOtherCA(t, load, other)
}

// Cluster over TLS: the nodes talk TLS among themselves and report their
// TLS ports to TLS clients; a store made from the redis.* keys with the
// nodes' TLS addresses holds leases on keys spread over every shard, with
// mutual TLS, and a watcher is woken by a release (sharded pub/sub over
// TLS); with another CA it fails fast naming redis.tls-ca-file.
func TestRedisTLSCluster(t *testing.T) {
	certs := testenv.NewTLSCerts(t)
	other := testenv.NewTLSCerts(t)
	c := testenv.NewCluster(t, testenv.ClusterOptions{Redis: testenv.RedisOptions{TLS: certs, TLSAuthClients: true}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	load := func(ca string) (*config.RedisStore, error) {
		return tlsStore(ctx, t, certs, ca, map[string]any{"redis.addrs": strings.Join(c.TLSAddrs(), ",")})
	}

	s, err := load(certs.CAFile)
	if err != nil {
		t.Fatalf("Cluster over mutual TLS: %v", err)
	}
	defer s.Close()
	for i := range 12 { // twelve apps: their {tenant:app} tags land on every shard
		key := backend.AppKey("acme", fmt.Sprintf("app%d", i), "lock", "tls-cluster")
		if _, err := s.Acquire(ctx, key, "a", time.Minute, 0); err != nil {
			t.Fatalf("Acquire %s over TLS on a Cluster: %v", key, err)
		}
		if err := s.Release(ctx, key, "a", 0); err != nil {
			t.Fatalf("Release %s: %v", key, err)
		}
	}
	key := backend.AppKey("acme", "billing", "lock", "watched")
	if _, err := s.Acquire(ctx, key, "a", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatalf("Watch over TLS on a Cluster: %v", err)
	}
	defer w.Close()
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-w.C():
		if e.Kind != backend.EventReleased {
			t.Fatalf("watch event %v; want a release", e)
		}
	case <-ctx.Done():
		t.Fatal("the watcher was not woken by the release")
	}

	refusesOtherCA(t, load, other)
}

// tlsStore makes a store, failing fast, from keys and the TLS keys of
// certs' client certificate and the CA file ca.
func tlsStore(ctx context.Context, t *testing.T, certs *testenv.TLSCerts, ca string, keys map[string]any) (*config.RedisStore, error) {
	t.Helper()
	m := map[string]any{"redis.fail-fast": true, "redis.tls-ca-file": ca,
		"redis.tls-cert-file": certs.ClientCert, "redis.tls-key-file": certs.ClientKey}
	maps.Copy(m, keys)
	cfg, err := config.Load(config.Map(m))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.RedisStore(ctx, redisbackend.WithoutRestartGuard())
}

// refusesOtherCA checks that a store trusting other's CA fails fast with
// an error naming redis.tls-ca-file.
func refusesOtherCA(t *testing.T, load func(ca string) (*config.RedisStore, error), other *testenv.TLSCerts) {
	t.Helper()
	s, err := load(other.CAFile)
	if err == nil {
		s.Close()
		t.Fatal("a store trusting another CA started; want a fail-fast error")
	}
	if !errors.Is(err, config.ErrUnreachable) || !strings.Contains(err.Error(), "redis.tls-ca-file") {
		t.Fatalf("another CA: %v; want ErrUnreachable naming redis.tls-ca-file", err)
	}
}
