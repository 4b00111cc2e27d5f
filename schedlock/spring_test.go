package schedlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/backend/springredis"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/schedlock"
)

// A mixed fleet: a Go job on the Spring framework's layout (springredis)
// and a Java instance played with the commands of ShedLock's Redis
// provider — SET job-lock:<env>:<name> "ADDED:<time>@<host>" NX PX
// <lockAtMostFor> to lock — run a job at most once between them: the Go
// run is skipped while ShedLock holds the lock, and ShedLock's lock is
// refused while the Go run holds it and through its lockAtLeastFor.
func TestSpringMixedFleetJobLock(t *testing.T) {
	ctx := ctxT(t)
	rdb := server.Client(t)
	st, err := springredis.New(server.Client(t), springredis.Layout{}, redisbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, err := instanceid.New("127.0.0.1", "acme", "billing", 8080)
	if err != nil {
		t.Fatal(err)
	}
	g, err := schedlock.NewGate(schedlock.Any, nil, schedlock.WithLock(st, "report", time.Minute, 30*time.Second), schedlock.WithInstance(id), quiet)
	if err != nil {
		t.Fatal(err)
	}
	const java = "job-lock:default:report"
	if ok, err := rdb.SetNX(ctx, java, "ADDED:2026-11-25T03:00:00.000Z@java-host", time.Minute).Result(); err != nil || !ok {
		t.Fatalf("ShedLock's lock: %v, %v", ok, err)
	}
	ran := false
	err = schedlock.Run(ctx, g.Job(), time.Time{}, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, schedlock.ErrSkipped) || ran {
		t.Fatalf("the Go run while ShedLock holds the job lock: ran %v, %v; want skipped", ran, err)
	}
	if err := rdb.Del(ctx, java).Err(); err != nil { // ShedLock's unlock after lockAtLeastFor
		t.Fatal(err)
	}
	err = schedlock.Run(ctx, g.Job(), time.Time{}, func(context.Context) error {
		if ok, _ := rdb.SetNX(ctx, java, "ADDED:x@java-host", time.Minute).Result(); ok {
			t.Error("ShedLock's lock succeeded while the Go run holds the job lock")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := rdb.SetNX(ctx, java, "ADDED:x@java-host", time.Minute).Result(); ok {
		t.Fatal("ShedLock's lock succeeded within the Go run's lockAtLeastFor")
	}
	if v, _ := rdb.Get(ctx, java).Result(); !strings.HasPrefix(v, "ADDED:") {
		t.Fatalf("the job lock holds %q; want ShedLock's value format", v)
	}
}

// On the Spring layout too, a Go instance that starts a fire late, after
// the lock was released, skips it: the fire marker is a key of its own
// beside ShedLock's.
func TestSpringLateFireIsSkipped(t *testing.T) {
	ctx := ctxT(t)
	var gates []*schedlock.Gate
	for i := range 2 {
		st, err := springredis.New(server.Client(t), springredis.Layout{}, redisbackend.WithoutRestartGuard())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		id, err := instanceid.New("127.0.0.1", "acme", "spring-late", 8080+i)
		if err != nil {
			t.Fatal(err)
		}
		g, err := schedlock.NewGate(schedlock.Any, nil, schedlock.WithLock(st, "late", time.Minute, 0), schedlock.WithInstance(id), quiet)
		if err != nil {
			t.Fatal(err)
		}
		gates = append(gates, g)
	}
	fire := time.Now().Truncate(time.Second)
	runs := 0
	job := func(context.Context) error { runs++; return nil }
	if err := schedlock.Run(ctx, gates[0].Job(), fire, job); err != nil {
		t.Fatal(err)
	}
	if err := schedlock.Run(ctx, gates[1].Job(), fire, job); !alreadyRan(err) {
		t.Fatalf("the same fire started late: %v; want a skip labelled already-ran", err)
	}
	if err := schedlock.Run(ctx, gates[1].Job(), fire.Add(time.Second), job); err != nil || runs != 2 {
		t.Fatalf("the next fire: %v, %d runs; want it run", err, runs)
	}
}
