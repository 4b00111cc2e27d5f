package springredis_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/springredis"
)

// Break ends a lease the Java side holds too (batonctl release --force):
// the shared key is deleted, Break names the Java holder (no token), and
// the next grant's token is above every token granted before.
func TestBreakJavaHolder(t *testing.T) {
	ctx := ctxT(t)
	rdb := server.Client(t)
	s := newStore(t, rdb, springredis.Layout{})
	key := backend.AppKey("acme", "billing", "lock", "com.acme.Ledger.close()")
	java := s.Shared(key)
	first, err := s.Acquire(ctx, key, goID+"#n1", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, goID+"#n1", 0); err != nil {
		t.Fatal(err)
	}
	// The Java side's acquire: SET NX with the hold time.
	if ok, err := rdb.SetNX(ctx, java, javaID, 45*time.Second).Result(); err != nil || !ok {
		t.Fatalf("the Java side's SET NX: %v, %v", ok, err)
	}
	l, err := s.Break(ctx, key, javaID, 0)
	if err != nil || l.Owner != javaID || l.Token != 0 || l.TTL <= 0 || l.TTL > 45*time.Second {
		t.Fatalf("Break of the Java holder's key: %+v, %v; want its lease (owner %s, no token)", l, err, javaID)
	}
	if n, err := rdb.Exists(ctx, java).Result(); err != nil || n != 0 {
		t.Fatalf("the shared key %s after Break: exists %d, %v; want it deleted", java, n, err)
	}
	next, err := s.Acquire(ctx, key, goID+"#n2", time.Minute, 0)
	if err != nil || next.Token <= first.Token {
		t.Fatalf("the grant after Break: %+v, %v; want a token above %d", next, err, first.Token)
	}
	if _, err := s.Break(ctx, key, next.Owner, next.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Break(ctx, key, next.Owner, next.Token); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Break of a free key: %v; want ErrNotFound", err)
	}
}

// Break ends only the grant it names, also across the two sides: a Go
// holder's grant shown before the Java side took the key, and a Java
// instance's grant shown before another Java instance took it, are not
// broken (ErrLeaseChanged naming the holder now), and the shared key
// keeps its value.
func TestBreakChangedHolder(t *testing.T) {
	ctx := ctxT(t)
	rdb := server.Client(t)
	s := newStore(t, rdb, springredis.Layout{})
	key := backend.AppKey("acme", "billing", "lock", "com.acme.Ledger.post()")
	java := s.Shared(key)
	shown, err := s.Acquire(ctx, key, goID+"#n1", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, goID+"#n1", 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := rdb.SetNX(ctx, java, javaID, 45*time.Second).Result(); err != nil || !ok {
		t.Fatalf("the Java side's SET NX: %v, %v", ok, err)
	}
	wantChanged := func(what, owner string, token uint64, holder string) {
		t.Helper()
		_, err := s.Break(ctx, key, owner, token)
		var ce *backend.ChangedError
		if !errors.As(err, &ce) || !errors.Is(err, backend.ErrLeaseChanged) || ce.Holder.Owner != holder || ce.Holder.Token != 0 {
			t.Fatalf("%s: %v; want a *backend.ChangedError naming %s (no token)", what, err, holder)
		}
		if v, err := rdb.Get(ctx, java).Result(); err != nil || v != holder {
			t.Fatalf("%s: the shared key %s holds %q, %v; want %q, unbroken", what, java, v, err, holder)
		}
	}
	wantChanged("Break of the Go grant once the Java side holds the key", shown.Owner, shown.Token, javaID)

	const otherJava = "10.0.0.10:acme:billing:8080"
	if err := rdb.Del(ctx, java).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := rdb.SetNX(ctx, java, otherJava, 45*time.Second).Result(); err != nil || !ok {
		t.Fatalf("the other Java instance's SET NX: %v, %v", ok, err)
	}
	wantChanged("Break of one Java instance's grant once another holds the key", javaID, 0, otherJava)
}
