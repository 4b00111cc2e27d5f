package role

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
)

// A role TTL no store holds, or one a store would round up, is refused by
// NewElector, naming the field and the limit, instead of failing on every
// claim at run time; huge intervals do not overflow the rules between the
// durations.
func TestConfigLimits(t *testing.T) {
	store := membackend.New()
	defer store.Close()
	id, err := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	if err != nil {
		t.Fatal(err)
	}
	const day = 24 * time.Hour
	cases := []struct {
		name string
		cfg  Config
		want string // in the error; "" for a valid configuration
	}{
		{"a year", Config{HeartbeatInterval: time.Hour, HeartbeatExpiration: 365 * day}, ""},
		{"a year and a day", Config{HeartbeatInterval: time.Hour, HeartbeatExpiration: 366 * day},
			"HeartbeatExpiration 366 days is longer than 365 days"},
		{"huge", Config{HeartbeatInterval: math.MaxInt64 / 4, HeartbeatExpiration: math.MaxInt64},
			"HeartbeatExpiration 106751 days 23h47m16.854775807s is longer than 365 days"},
		{"interval overflows twice over", Config{HeartbeatInterval: 1 << 62, HeartbeatExpiration: 45 * time.Second},
			"must be less than half of HeartbeatExpiration"},
		{"sub-millisecond TTL", Config{HeartbeatInterval: time.Nanosecond, HeartbeatExpiration: 500 * time.Microsecond, SafetyMargin: 1},
			"HeartbeatExpiration 500µs is shorter than 1ms"},
		{"negative operation timeout", Config{OperationTimeout: -time.Second}, "OperationTimeout -1s must not be negative"},
	}
	for _, c := range cases {
		_, err := NewElector(store, id, c.cfg)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v; want a valid configuration", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewElector error %v; want one saying %q", c.name, err, c.want)
		}
		if strings.HasPrefix(c.want, "HeartbeatExpiration") && !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("%s: %v does not wrap backend.ErrInvalidArgument", c.name, err)
		}
	}
}

// The zero OperationTimeout is the heartbeat interval, at most 5 s.
func TestOperationTimeoutDefault(t *testing.T) {
	for _, c := range []struct{ interval, want time.Duration }{
		{time.Second, time.Second},
		{15 * time.Second, 5 * time.Second},
	} {
		got := Config{HeartbeatInterval: c.interval, HeartbeatExpiration: 45 * time.Second}.WithDefaults().OperationTimeout
		if got != c.want {
			t.Errorf("interval %v: OperationTimeout %v; want %v", c.interval, got, c.want)
		}
	}
}
