package role

import (
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
)

// Config tunes an election. The zero value means the seed's defaults: the
// feature enabled, a 15 s heartbeat and a 45 s role TTL.
type Config struct {
	// Disabled turns the role feature off (scheduler-lock.enabled=false):
	// no keys are written, IsMaster reports false and master-only jobs
	// never run.
	Disabled bool
	// HeartbeatInterval is how often the master renews the role key and a
	// slave looks for a free one
	// (scheduler-lock.touch-heartbeat-interval-in-milliseconds). Default
	// 15 s. It must be less than half of HeartbeatExpiration so that one
	// lost renewal is survivable.
	HeartbeatInterval time.Duration
	// HeartbeatExpiration is the TTL of the role key
	// (scheduler-lock.heartbeat-expiration-duration-in-seconds). Default
	// 45 s.
	HeartbeatExpiration time.Duration
	// SafetyMargin is how long before the role key can expire on the
	// server that the master stops calling itself master when renewals
	// fail. Default: a tenth of HeartbeatExpiration, at most half of
	// HeartbeatInterval. It must be less than HeartbeatInterval.
	SafetyMargin time.Duration
	// OperationTimeout bounds each call to the store. Default: the
	// heartbeat interval, at most 5 s. A renewal's context also ends at
	// the tenure's deadline, and a claim's after the TTL minus the safety
	// margin, whichever is sooner.
	OperationTimeout time.Duration
}

// WithDefaults returns c with every zero duration replaced by its default
// (the seed framework's scheduler-lock.* defaults for the heartbeat).
func (c Config) WithDefaults() Config {
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 15 * time.Second
	}
	if c.HeartbeatExpiration == 0 {
		c.HeartbeatExpiration = 45 * time.Second
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = min(c.HeartbeatExpiration/10, c.HeartbeatInterval/2)
	}
	if c.OperationTimeout == 0 {
		c.OperationTimeout = min(c.HeartbeatInterval, 5*time.Second)
	}
	return c
}

// Validate reports, in one error naming the Go fields, every rule the
// configuration breaks after defaults are applied: those of the fields'
// docs, HeartbeatExpiration a lease a store holds (backend.ValidateLease)
// and HeartbeatInterval at least 1 ms. Durations out of range wrap
// backend.ErrInvalidArgument.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.HeartbeatInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("role: HeartbeatInterval %v must be at least 1ms", c.HeartbeatInterval))
	}
	if err := backend.ValidateLease("HeartbeatExpiration", c.HeartbeatExpiration); err != nil {
		errs = append(errs, fmt.Errorf("role: %w", err))
	}
	if c.SafetyMargin < 0 {
		errs = append(errs, fmt.Errorf("role: SafetyMargin %v must not be negative", c.SafetyMargin))
	}
	if c.OperationTimeout < 0 {
		errs = append(errs, fmt.Errorf("role: OperationTimeout %v must not be negative", c.OperationTimeout))
	}
	if len(errs) == 0 {
		// 2*interval >= expiration, without overflow.
		if c.HeartbeatInterval >= c.HeartbeatExpiration-c.HeartbeatExpiration/2 {
			errs = append(errs, fmt.Errorf("role: HeartbeatInterval %v must be less than half of HeartbeatExpiration %v so that one lost renewal is survivable", c.HeartbeatInterval, c.HeartbeatExpiration))
		}
		if c.SafetyMargin >= c.HeartbeatInterval {
			errs = append(errs, fmt.Errorf("role: SafetyMargin %v must be less than HeartbeatInterval %v", c.SafetyMargin, c.HeartbeatInterval))
		}
	}
	return errors.Join(errs...)
}
