package synclock_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/synclock"
)

// testPkg prefixes the names of this file's functions, as Do's keys.
const testPkg = "github.com/baton-go/baton/synclock_test."

// defaultOnMem sets, for the test, a default locker on a memory store of
// its own, and returns both and the key of the last lock it acquired.
func defaultOnMem(t *testing.T) (*synclock.Locker, *membackend.Store, func() string) {
	t.Helper()
	store := membackend.New()
	t.Cleanup(func() { store.Close() })
	var mu sync.Mutex
	var last string
	lk := lockerOn(t, 1, store, synclock.Config{}, synclock.WithObserver(func(ev synclock.Event) {
		if ev.Kind == synclock.EventAcquired {
			mu.Lock()
			last = ev.Key
			mu.Unlock()
		}
	}))
	synclock.SetDefault(lk)
	t.Cleanup(func() { synclock.SetDefault(nil) })
	return lk, store, func() string {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// holding returns a section that checks that the lock it runs under is
// key's, on store.
func holding(t *testing.T, store backend.Store, key string) func(context.Context) error {
	return func(ctx context.Context) error {
		if _, err := store.Get(ctx, backend.AppKey("acme", "billing", "lock", key)); err != nil {
			t.Errorf("the section runs without holding %q: %v", key, err)
		}
		return nil
	}
}

// eachDo runs f with the package-level Do, the one name-keyed entry
// point, on lk (the default).
func eachDo(t *testing.T, lk *synclock.Locker, f func(t *testing.T, do func(context.Context, func(context.Context) error) error)) {
	synclock.SetDefault(lk)
	t.Run("package Do", func(t *testing.T) { f(t, synclock.Do) })
}

// In an HTTP handler literal (a closure) Do works, keyed by the named
// function the literal is written in.
func TestDoInHandlerLiteral(t *testing.T) {
	lk, store, _ := defaultOnMem(t)
	eachDo(t, lk, func(t *testing.T, do func(context.Context, func(context.Context) error) error) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := do(r.Context(), holding(t, store, testPkg+"TestDoInHandlerLiteral")); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/close", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("Do in a handler literal: %d %s", rec.Code, rec.Body)
		}
	})
}

// In a goroutine started with a literal Do works, keyed by the named
// function around it; closures of one function share its lock.
func TestDoInGoroutine(t *testing.T) {
	lk, store, _ := defaultOnMem(t)
	eachDo(t, lk, func(t *testing.T, do func(context.Context, func(context.Context) error) error) {
		done := make(chan error, 1)
		go func() { done <- do(ctxT(t), holding(t, store, testPkg+"TestDoInGoroutine")) }()
		if err := <-done; err != nil {
			t.Fatalf("Do in a goroutine: %v", err)
		}
	})
}

// In a gocron task literal Do works, keyed by the named function the
// literal is written in.
func TestDoInGocronTaskLiteral(t *testing.T) {
	lk, store, _ := defaultOnMem(t)
	eachDo(t, lk, func(t *testing.T, do func(context.Context, func(context.Context) error) error) {
		s, err := gocron.NewScheduler()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Shutdown()
		done := make(chan error, 1)
		_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()), gocron.NewTask(func() {
			done <- do(ctxT(t), holding(t, store, testPkg+"TestDoInGocronTaskLiteral"))
		}))
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Do in a gocron task literal: %v", err)
			}
		case <-time.After(patience):
			t.Fatal("the job never ran")
		}
	})
}

// invoices is a service whose method is handed to Do as a method value.
type invoices struct {
	t     *testing.T
	store backend.Store
	ran   int
}

func (s *invoices) Close(ctx context.Context) error {
	s.ran++
	return holding(s.t, s.store, testPkg+"(*invoices).Close")(ctx)
}

func closeAll(ctx context.Context) error { return errClosedAll }

var errClosedAll = errors.New("closed all")

// callDo calls do from a named function: without fn's own name, Do would
// be keyed by callDo's.
func callDo(ctx context.Context, do func(context.Context, func(context.Context) error) error, fn func(context.Context) error) error {
	return do(ctx, fn)
}

// A named function or method value given to Do names the lock itself,
// wherever Do is called from — as an annotation on the method would.
func TestDoKeyedByMethodValue(t *testing.T) {
	lk, store, lastKey := defaultOnMem(t)
	eachDo(t, lk, func(t *testing.T, do func(context.Context, func(context.Context) error) error) {
		svc := &invoices{t: t, store: store}
		if err := callDo(ctxT(t), do, svc.Close); err != nil || svc.ran != 1 {
			t.Fatalf("Do(ctx, svc.Close): %v, ran %d times", err, svc.ran)
		}
		if err := callDo(ctxT(t), do, closeAll); !errors.Is(err, errClosedAll) || lastKey() != testPkg+"closeAll" {
			t.Fatalf("Do(ctx, closeAll): %v, key %q; want closeAll's error and key", err, lastKey())
		}
	})
}
