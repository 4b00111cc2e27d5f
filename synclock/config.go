package synclock

import (
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
)

// Config tunes the locks of a Locker. The zero value means the defaults
// below.
type Config struct {
	// Disabled (synchronized-lock.enabled=false) fails every call with
	// ErrDisabled.
	Disabled bool
	// RetryInterval is the longest a waiter sleeps before it tries again
	// (synchronized-lock.retry-interval-in-milliseconds). Default 1 s.
	RetryInterval time.Duration
	// HoldDuration caps how long one holder keeps the lock
	// (synchronized-lock.hold-duration-in-seconds). Default 45 s.
	HoldDuration time.Duration
	// MaxRetries bounds how many times a waiter tries again after the first
	// attempt (0: until it succeeds or its context ends). Each whole
	// RetryInterval spent behind another goroutine of this process counts
	// as one, so a call gives up after about MaxRetries retry intervals,
	// whoever holds the lock; a recovering store's refusal does not.
	MaxRetries int
	// ClaimWindow is how long a lock is first granted for; a section that
	// runs a third of it extends the lease to HoldDuration. It must not
	// exceed HoldDuration (equal grants the whole hold at once, as the
	// seed did). Default: 10 s or HoldDuration, whichever is shorter.
	ClaimWindow time.Duration
	// AutoRenew, if set (at least HoldDuration), renews a holder's lease
	// while the section runs, up to AutoRenew in total.
	AutoRenew time.Duration
	// OperationTimeout bounds each store call that must finish even when
	// the caller's context has ended, such as the release. Default 5 s.
	OperationTimeout time.Duration
}

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	if c.RetryInterval == 0 {
		c.RetryInterval = time.Second
	}
	if c.HoldDuration == 0 {
		c.HoldDuration = 45 * time.Second
	}
	if c.ClaimWindow == 0 {
		c.ClaimWindow = min(c.HoldDuration, 10*time.Second)
	}
	if c.OperationTimeout == 0 {
		c.OperationTimeout = 5 * time.Second
	}
	return c
}

// Validate reports every rule the configuration breaks, after defaults
// are applied, in one error; durations out of range (1 ms to
// backend.MaxTTL, also for MaxRetries x RetryInterval) wrap
// backend.ErrInvalidArgument.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if err := backend.ValidateLease("RetryInterval", c.RetryInterval); err != nil {
		errs = append(errs, fmt.Errorf("synclock: %w", err))
	}
	if err := backend.ValidateLease("HoldDuration", c.HoldDuration); err != nil {
		errs = append(errs, fmt.Errorf("synclock: %w", err))
	}
	if err := backend.ValidateLease("ClaimWindow", c.ClaimWindow); err != nil {
		errs = append(errs, fmt.Errorf("synclock: %w", err))
	}
	if c.ClaimWindow > c.HoldDuration {
		errs = append(errs, fmt.Errorf("synclock: ClaimWindow %v must not exceed HoldDuration %v", c.ClaimWindow, c.HoldDuration))
	}
	if c.AutoRenew != 0 && c.AutoRenew < c.HoldDuration {
		errs = append(errs, fmt.Errorf("synclock: AutoRenew %v must be at least HoldDuration %v (0: no renewals)", c.AutoRenew, c.HoldDuration))
	}
	if c.OperationTimeout < 0 {
		errs = append(errs, fmt.Errorf("synclock: OperationTimeout %v must not be negative", c.OperationTimeout))
	}
	if c.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("synclock: MaxRetries %d must not be negative (0 means retry until the context ends)", c.MaxRetries))
	} else if c.RetryInterval > 0 && int64(c.MaxRetries) > int64(backend.MaxTTL/c.RetryInterval) {
		errs = append(errs, fmt.Errorf("synclock: %w: MaxRetries %d x RetryInterval %v is longer than %s: a waiter would wait longer than the longest lease; "+
			"set fewer retries, or 0 to retry until the context ends", backend.ErrInvalidArgument, c.MaxRetries, c.RetryInterval, backend.FormatDuration(backend.MaxTTL)))
	}
	return errors.Join(errs...)
}
