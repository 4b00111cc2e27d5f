package consulbackend_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// Break compares and breaks in one transaction: when the grant it read
// is released and another owner takes the key between its read and its
// write, the write fails, the next read finds the new grant, and Break
// ends nothing (ErrLeaseChanged naming the new holder).
func TestBreakLosesRaceToNewHolder(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s, other := newStore(t, a), newStore(t, a)
	const key, ttl = "break-race", 10 * time.Second
	shown, err := s.Acquire(ctx, key, "a", ttl, 0)
	if err != nil {
		t.Fatal(err)
	}
	var now backend.Lease
	once := true
	consulbackend.SetAfterLook(s, func() {
		if once {
			once = false
			if err := other.Release(ctx, key, "a", 0); err != nil {
				t.Errorf("a's release between the break's read and write: %v", err)
			}
			if now, err = other.Acquire(ctx, key, "b", ttl, 0); err != nil {
				t.Errorf("b's acquire between the break's read and write: %v", err)
			}
		}
	})
	_, err = s.Break(ctx, key, "a", shown.Token)
	var ce *backend.ChangedError
	if !errors.As(err, &ce) || !errors.Is(err, backend.ErrLeaseChanged) || ce.Holder.Owner != "b" || ce.Holder.Token != now.Token {
		t.Fatalf("Break of a's grant once b took the key during the break: %v; want a *backend.ChangedError naming b (token %d)", err, now.Token)
	}
	if _, err := other.Renew(ctx, key, "b", ttl); err != nil {
		t.Fatalf("b's Renew after the break: %v; want its lease untouched", err)
	}
}
