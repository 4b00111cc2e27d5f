package role_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/backend/springredis"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/testenv"
)

// A mixed fleet: Go electors on the Spring framework's layout
// (springredis) and a Java instance played with the commands the
// framework's documents describe — SET <app> <id> NX EX <ttl> to claim,
// EXPIRE to keep it while it reads its own ID, nothing on shutdown — elect
// one master between them, in both directions, through a crash on each
// side.
func TestSpringMixedFleet(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	const app, javaID = "billing", "10.0.0.9:acme:billing:8080"
	const javaTTL = 600 * time.Millisecond
	cfg := role.Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatExpiration: 600 * time.Millisecond}
	newStore := func() *springredis.Store {
		s, err := springredis.New(r.Client(t), springredis.Layout{}, redisbackend.WithoutRestartGuard())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}

	// The Java instance is master first; its heartbeat keeps the key.
	if ok, err := rdb.SetNX(ctx, app, javaID, javaTTL).Result(); err != nil || !ok {
		t.Fatalf("the Java instance's claim: %v, %v", ok, err)
	}
	javaBeat, stopJava := context.WithCancel(ctx)
	javaDone := make(chan struct{})
	go func() {
		defer close(javaDone)
		for javaBeat.Err() == nil {
			if v, _ := rdb.Get(ctx, app).Result(); v == javaID {
				rdb.PExpire(ctx, app, javaTTL)
			}
			select {
			case <-javaBeat.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	cutA, cutB := &role.Flaky{Store: newStore()}, &role.Flaky{Store: newStore()}
	a := startElector(t, cutA, 7501, cfg, nil)
	b := startElector(t, cutB, 7502, cfg, nil)
	defer stopAll(t, a, b)
	waitFor(t, "both Go electors see the Java master", func() bool {
		return a.Status().Master == javaID && b.Status().Master == javaID
	}, a, b)
	if a.IsMaster() || b.IsMaster() {
		t.Fatal("a Go elector is master while the Java instance holds the role key")
	}
	if ok, err := a.IsMasterOf(ctx, app, javaID); err != nil || !ok {
		t.Fatalf("IsMasterOf(%s, %s) = %v, %v; want true", app, javaID, ok, err)
	}

	// The Java instance crashes: its key expires, a Go elector takes over
	// and writes its instance ID, which the Java side reads as master.
	stopJava()
	<-javaDone
	var m *role.Elector
	waitFor(t, "a Go master after the Java master crashed", func() bool { m = master([]*role.Elector{a, b}); return m != nil }, a, b)
	if v, err := rdb.Get(ctx, app).Result(); err != nil || v != m.Status().Instance {
		t.Fatalf("the role key holds %q, %v; want the Go master's ID %s", v, err, m.Status().Instance)
	}
	if ok, _ := rdb.SetNX(ctx, app, javaID, javaTTL).Result(); ok {
		t.Fatal("the Java instance's SET NX succeeded while a Go elector is master")
	}

	// The Go instances crash (they stop renewing without releasing): the
	// key expires and the Java instance's next claim succeeds. A Go
	// instance that comes back sees the Java master and stays slave.
	cutA.Cut(true)
	cutB.Cut(true)
	deadline := time.Now().Add(patience)
	for {
		ok, err := rdb.SetNX(ctx, app, javaID, time.Minute).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the crashed Go master's role key never expired for the Java instance")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "the Go electors step down", func() bool { return !a.IsMaster() && !b.IsMaster() }, a, b)
	cutA.Cut(false)
	cutB.Cut(false)
	waitFor(t, "the Go electors see the Java master again", func() bool {
		return a.Status().Master == javaID && b.Status().Master == javaID
	}, a, b)
	if a.IsMaster() || b.IsMaster() {
		t.Fatal("a Go elector is master beside the Java master")
	}
	if v, _ := rdb.Get(ctx, app).Result(); v != javaID {
		t.Fatalf("the role key holds %q after the Go instances came back; want the Java master %s", v, javaID)
	}
}

// A Java master that shuts down deletes the role key (a plain DEL, which
// announces nothing): a Go slave claims the role at its next heartbeat,
// as the framework's own slaves do, instead of sleeping out the long TTL
// it last saw on the key.
func TestSpringJavaReleaseClaimedAtNextHeartbeat(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	const app, javaID = "billing", "10.0.0.9:acme:billing:8080"
	javaTTL := 10 * patience // far beyond the test's deadline
	if ok, err := rdb.SetNX(ctx, app, javaID, javaTTL).Result(); err != nil || !ok {
		t.Fatalf("the Java instance's claim: %v, %v", ok, err)
	}
	s, err := springredis.New(r.Client(t), springredis.Layout{}, redisbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg := role.Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatExpiration: 600 * time.Millisecond}
	a := startElector(t, s, 7511, cfg, nil)
	defer stopAll(t, a)
	waitFor(t, "the Go elector sees the Java master", func() bool { return a.Status().Master == javaID }, a)

	if err := rdb.Del(ctx, app).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Go elector is master after the Java master deleted the role key", a.IsMaster, a)
}
