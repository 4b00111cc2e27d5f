package synclock

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of the seed framework's synchronized-lock.* keys.
const (
	DefaultRetryInterval = time.Second
	DefaultHoldDuration  = 45 * time.Second
)

// Config tunes the locks of a Locker. The zero value means the seed's
// defaults: enabled, retry every second, hold at most 45 s, retry forever.
type Config struct {
	// Disabled turns the locks off (synchronized-lock.enabled=false): every
	// call fails with ErrDisabled instead of running unlocked.
	Disabled bool
	// RetryInterval is the longest a waiter sleeps before it tries again
	// when no release wakes it (synchronized-lock.retry-interval-in-milliseconds).
	// Default 1 s.
	RetryInterval time.Duration
	// HoldDuration caps how long one holder keeps the lock, so that a
	// crashed holder cannot dead-lock the others
	// (synchronized-lock.hold-duration-in-seconds). Default 45 s.
	HoldDuration time.Duration
	// MaxRetries bounds how many times a waiter tries again after the first
	// attempt; 0 means until it succeeds or its context ends.
	MaxRetries int
}

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.HoldDuration == 0 {
		c.HoldDuration = DefaultHoldDuration
	}
	return c
}

// Validate reports every rule the configuration breaks, after defaults
// are applied, in one error.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.RetryInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("synclock: RetryInterval %v must be at least 1ms", c.RetryInterval))
	}
	if c.HoldDuration < time.Millisecond {
		errs = append(errs, fmt.Errorf("synclock: HoldDuration %v must be at least 1ms", c.HoldDuration))
	}
	if c.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("synclock: MaxRetries %d must not be negative (0 means retry until the context ends)", c.MaxRetries))
	}
	return errors.Join(errs...)
}
