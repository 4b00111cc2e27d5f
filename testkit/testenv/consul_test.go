package testenv

import (
	"context"
	"testing"
	"time"
)

// A dev agent starts on free ports, is leader and takes sessions, loses
// its data on Restart, keeps its port, and is gone after Close.
func TestConsulStartRestartClose(t *testing.T) {
	c := NewConsul(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.do(ctx, "PUT", "/v1/kv/testenv/probe", "x", nil); err != nil {
		t.Fatalf("write a key: %v", err)
	}
	var keys []string
	if err := c.do(ctx, "GET", "/v1/kv/testenv/?keys", nil, &keys); err != nil || len(keys) != 1 {
		t.Fatalf("keys before restart: %v, %v; want the one written", keys, err)
	}
	port, pid := c.Port(), c.PID()
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if c.Port() != port || c.PID() == pid || c.PID() == 0 {
		t.Errorf("after Restart: port %d (was %d), pid %d (was %d); want the same port and a new process", c.Port(), port, c.PID(), pid)
	}
	err := c.do(ctx, "GET", "/v1/kv/testenv/?keys", nil, &keys)
	if err == nil {
		t.Errorf("keys after restart: %v; want none (404)", keys)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c.PID() != 0 {
		t.Errorf("PID after Close: %d", c.PID())
	}
}
