package synclock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
)

// A hold no store holds, or one a store would round up, and a wait budget
// (MaxRetries x RetryInterval) that overflows or outlasts the longest
// lease are refused by NewLocker, naming the field and the limit.
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
		{"a year", Config{HoldDuration: 365 * day}, ""},
		{"a year and a day", Config{HoldDuration: 366 * day}, "HoldDuration 366 days is longer than 365 days"},
		{"sub-millisecond hold", Config{HoldDuration: 500 * time.Microsecond}, "HoldDuration 500µs is shorter than 1ms"},
		{"retry every two years", Config{RetryInterval: 730 * day, HoldDuration: time.Minute}, "RetryInterval 730 days is longer than 365 days"},
		{"retries overflow", Config{RetryInterval: time.Hour, MaxRetries: 1 << 40}, "MaxRetries 1099511627776 x RetryInterval 1h0m0s is longer than 365 days"},
		{"a year of retries", Config{RetryInterval: time.Second, MaxRetries: 365 * 24 * 3600}, ""},
	}
	for _, c := range cases {
		_, err := NewLocker(store, id, c.cfg)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v; want a valid configuration", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewLocker error %v; want one saying %q", c.name, err, c.want)
		} else if !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("%s: %v does not wrap backend.ErrInvalidArgument", c.name, err)
		}
	}
}
