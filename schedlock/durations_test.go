package schedlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/schedlock"
)

// lockFromText builds a lock gate from durations written as configuration
// files write them, the way a program reads ShedLock's attributes.
func lockFromText(store backend.Store, atMostText, atLeastText string) (*schedlock.Gate, time.Duration, time.Duration, error) {
	atMost, err := config.ParseDuration(atMostText)
	if err != nil {
		return nil, 0, 0, err
	}
	atLeast, err := config.ParseDuration(atLeastText)
	if err != nil {
		return nil, 0, 0, err
	}
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	g, err := schedlock.NewGate(schedlock.Any, nil, schedlock.WithInstance(id), schedlock.WithLock(store, "nightly-export", atMost, atLeast))
	return g, atMost, atLeast, err
}

func TestLockDurationsFromText(t *testing.T) {
	store := membackend.New()
	defer store.Close()
	cases := []struct {
		atMost, atLeast string
		wantMost        time.Duration
		wantLeast       time.Duration
		wantErr         error
	}{
		{"PT10M", "PT30S", 10 * time.Minute, 30 * time.Second, nil},
		{"10m", "30s", 10 * time.Minute, 30 * time.Second, nil},
		{"PT14M", "PT5M", 14 * time.Minute, 5 * time.Minute, nil},
		{"PT30S", "PT0S", 30 * time.Second, 0, nil},
		{"pt1h30m", "0", 90 * time.Minute, 0, nil},
		{"P1D", "PT1H", 24 * time.Hour, time.Hour, nil},
		{"PT0.5S", "PT0.25S", 500 * time.Millisecond, 250 * time.Millisecond, nil},
		{"PT1S", "PT1S", time.Second, time.Second, nil},
		{"PT30S", "PT1M", 0, 0, backend.ErrInvalidArgument}, // lockAtMostFor < lockAtLeastFor
		{"PT0S", "PT0S", 0, 0, backend.ErrInvalidArgument},  // no lease
		{"P400D", "PT0S", 0, 0, backend.ErrInvalidArgument}, // beyond what a store holds
		{"P366D", "PT0S", 0, 0, backend.ErrInvalidArgument}, // a day beyond it
		{"P365D", "PT0S", 365 * 24 * time.Hour, 0, nil},
		{"PT0.0005S", "PT0S", 0, 0, backend.ErrInvalidArgument}, // below 1 ms: no longer rounded up
		{"PT0.001S", "PT0S", time.Millisecond, 0, nil},
		{"P1M", "PT0S", 0, 0, config.ErrInvalid},    // months vary
		{"PT", "PT0S", 0, 0, config.ErrInvalid},     // nothing after T
		{"30", "PT0S", 0, 0, config.ErrInvalid},     // no unit
		{"-PT1S", "PT0S", 0, 0, config.ErrInvalid},  // negative
		{"PT10M", "PT-1S", 0, 0, config.ErrInvalid}, // malformed
	}
	for _, c := range cases {
		g, atMost, atLeast, err := lockFromText(store, c.atMost, c.atLeast)
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) || g != nil {
				t.Errorf("(%q, %q): gate %v, error %v; want %v", c.atMost, c.atLeast, g, err, c.wantErr)
			}
			continue
		}
		if err != nil || atMost != c.wantMost || atLeast != c.wantLeast {
			t.Errorf("(%q, %q) = %v, %v, %v; want %v, %v", c.atMost, c.atLeast, atMost, atLeast, err, c.wantMost, c.wantLeast)
		}
	}
}

// FuzzLockDurations checks that any text either fails to parse or yields
// a gate exactly when ShedLock's rules hold, and never panics.
func FuzzLockDurations(f *testing.F) {
	for _, s := range [][2]string{{"PT10M", "PT30S"}, {"10m", "30s"}, {"PT30S", "PT1M"}, {"P1DT2H", "PT0S"}, {"PT0.0001S", "0"}, {"P52W", "P1W"}} {
		f.Add(s[0], s[1])
	}
	store := membackend.New()
	defer store.Close()
	f.Fuzz(func(t *testing.T, atMostText, atLeastText string) {
		g, atMost, atLeast, err := lockFromText(store, atMostText, atLeastText)
		if errors.Is(err, config.ErrInvalid) {
			return
		}
		valid := atMost >= backend.MinTTL && atMost <= backend.MaxTTL && atLeast <= atMost
		if valid != (err == nil) || (err == nil) != (g != nil) {
			t.Fatalf("(%q, %q) = %v, %v: gate %v, error %v; the rules say valid=%v", atMostText, atLeastText, atMost, atLeast, g, err, valid)
		}
		if err != nil && !errors.Is(err, backend.ErrInvalidArgument) {
			t.Fatalf("(%q, %q): error %v does not wrap ErrInvalid", atMostText, atLeastText, err)
		}
	})
}
