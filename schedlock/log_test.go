package schedlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/testenv"
)

// logBuffer keeps the records of a JSON slog handler, safe for the
// goroutines of an elector and a locker.
type logBuffer struct{ testenv.SyncBuffer }

// records returns the records logged so far, each as its JSON object.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// find returns the first record with message msg, or nil.
func find(recs []map[string]any, msg string) map[string]any {
	for _, r := range recs {
		if r["msg"] == msg {
			return r
		}
	}
	return nil
}

// An election, a lock and a skipped job on the in-memory store, a real
// redis-server and a real Consul agent log the records an operator looks
// for, each with the same keys — app, tenant, instance, backend — and its
// own (key, epoch, token, job, reason); and at info level only the
// election is logged: locks and skips, which happen on every run, stay at
// debug.
func TestLogRecords(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) { testLogRecords(t, kind) })
	}
}

func testLogRecords(t *testing.T, kind string) {
	f := newFleet(t, kind, 1, fastRole)
	id, store := f.ids[0], f.stores[0]
	name := backend.StoreName(store)
	var debug, info logBuffer
	debugLog := slog.New(slog.NewJSONHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug}))
	infoLog := slog.New(slog.NewJSONHandler(&info, &slog.HandlerOptions{Level: slog.LevelInfo}))
	both := slog.New(fanout{debugLog.Handler(), infoLog.Handler()})
	ctx := context.Background()

	el, err := role.NewElector(store, id, fastRole, role.WithLogger(both))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Start(el, el.Run)
	defer testenv.Stop(ctx, el)
	waitFor(t, "the elector to become master", el.IsMaster)

	lk, err := synclock.NewLocker(store, id, synclock.Config{}, synclock.WithLogger(both))
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.DoKey(ctx, "nightly-report", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}

	g, err := schedlock.NewGate(schedlock.Slave, el, schedlock.WithLogger(both))
	if err != nil {
		t.Fatal(err)
	}
	if err := schedlock.Run(ctx, g.Job(), time.Time{}, func(context.Context) error { return nil }); !errors.Is(err, schedlock.ErrSkipped) {
		t.Fatalf("a slave-only run on the master: %v; want it skipped", err)
	}

	common := map[string]any{"app": id.App, "tenant": id.Tenant, "instance": id.String()}
	want := []struct {
		msg  string
		keys map[string]any // value nil: present, any value
	}{
		{"role: became master", map[string]any{"backend": name, "key": el.Status().Key, "epoch": nil}},
		{"synclock: lock acquired", map[string]any{"backend": name, "key": "nightly-report", "token": nil, "wait": nil}},
		{"synclock: lock released", map[string]any{"backend": name, "key": "nightly-report", "token": nil, "held": nil}},
		{"schedlock: run skipped", map[string]any{"job": "slave-only", "reason": "not-slave"}},
	}
	waitFor(t, "the election's record", func() bool { return find(debug.records(t), want[0].msg) != nil })
	recs := debug.records(t)
	for _, w := range want {
		r := find(recs, w.msg)
		if r == nil {
			t.Errorf("no record %q among %d records", w.msg, len(recs))
			continue
		}
		for k, v := range common {
			if r[k] != v {
				t.Errorf("record %q: %s = %v, want %v", w.msg, k, r[k], v)
			}
		}
		for k, v := range w.keys {
			if got, ok := r[k]; !ok || (v != nil && got != v) {
				t.Errorf("record %q: %s = %v (present %v), want %v", w.msg, k, got, ok, v)
			}
		}
	}
	for _, r := range info.records(t) {
		if msg := fmt.Sprint(r["msg"]); !strings.HasPrefix(msg, "role: ") {
			t.Errorf("at info level, record %q (%v); want only the election's records", msg, r)
		}
	}
	if find(info.records(t), "role: became master") == nil {
		t.Error("at info level, no record of the election")
	}
}

// fanout sends every record to each of its handlers that takes its level.
type fanout []slog.Handler

func (f fanout) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range f {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (f fanout) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	for _, h := range f {
		if h.Enabled(ctx, r.Level) {
			errs = append(errs, h.Handle(ctx, r.Clone()))
		}
	}
	return errors.Join(errs...)
}

func (f fanout) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithAttrs(attrs)
	}
	return out
}

func (f fanout) WithGroup(name string) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithGroup(name)
	}
	return out
}
