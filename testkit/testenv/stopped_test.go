package testenv

import (
	"context"
	"testing"
)

func TestRestartEmptyDropsAppendOnlyData(t *testing.T) {
	r := NewRedis(t, RedisOptions{AppendOnly: true})
	c := r.Client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "kept", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "kept").Result(); err != nil || v != "1" {
		t.Fatalf("after Restart with AppendOnly: GET kept = %q, %v; want 1", v, err)
	}
	if err := r.RestartEmpty(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("after RestartEmpty: DBSIZE = %d, %v; want 0", n, err)
	}
}

func TestPauseReturnsOnceStopped(t *testing.T) {
	r := NewRedis(t)
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	state, err := procState(r.PID())
	if err != nil {
		t.Fatal(err)
	}
	if state != 'T' && state != 't' {
		t.Errorf("state after Pause = %q, want T (stopped)", state)
	}
	if err := r.Resume(); err != nil {
		t.Fatal(err)
	}
}
