package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// pollInterval is how often topology checks are repeated while waiting.
const pollInterval = 100 * time.Millisecond

// poll runs check until it returns nil or ctx ends. The error then says what
// was awaited and why the last check failed.
func poll(ctx context.Context, what string, check func(ctx context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		t := time.NewTimer(pollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("testenv: %s: %w", what, errors.Join(err, ctx.Err()))
		case <-t.C:
		}
	}
}

// info runs INFO section on r and returns its fields.
func info(ctx context.Context, r *Redis, section string) (map[string]string, error) {
	c := r.adminClient()
	defer c.Close()
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("INFO %s on %s: %w", section, r.Addr(), err)
	}
	return parseFields(s), nil
}

// parseFields parses the "key:value" lines of an INFO or CLUSTER INFO reply.
func parseFields(s string) map[string]string {
	fields := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\r"), ":"); ok && !strings.HasPrefix(k, "#") {
			fields[k] = v
		}
	}
	return fields
}

// withDefaultTimeout returns ctx bounded by d unless it already has a deadline.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
