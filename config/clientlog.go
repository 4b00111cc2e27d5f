package config

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The values of redis.client-log (Redis.ClientLog): where go-redis's own
// log messages go, such as "connection pool: failed to dial after 5
// attempts" while a server is down. baton reports what matters of those
// itself (an unreachable store, refused credentials) in its own errors and
// log lines.
//
// go-redis keeps one logger for the whole process (redis.SetLogger), not
// one per client, so Config.RedisStore and SpringRedisStore set it for
// every go-redis client of the process, the program's own included, each
// time they make a store with ClientLogDebug or ClientLogOff. A program
// that sets its own go-redis logger says ClientLogKeep, or calls
// redis.SetLogger after making the store.
const (
	// ClientLogDebug (the default) sends go-redis's messages to
	// slog.Default() at debug level, with the attribute
	// component=go-redis: out of a service's log unless it logs at debug
	// level.
	ClientLogDebug = "debug"
	// ClientLogOff drops go-redis's messages.
	ClientLogOff = "off"
	// ClientLogKeep leaves go-redis's logger as it is: its default writes
	// every message to stderr, prefixed "redis: ".
	ClientLogKeep = "keep"
)

// routeClientLog sets go-redis's process-wide logger as r.ClientLog says.
func (r Redis) routeClientLog() {
	switch r.ClientLog {
	case ClientLogKeep:
	case ClientLogOff:
		redis.SetLogger(discardLog{})
	default:
		redis.SetLogger(debugLog{})
	}
}

// debugLog passes go-redis's messages to slog.Default() at debug level.
type debugLog struct{}

// Printf logs one go-redis message, if slog.Default() logs debug records.
func (debugLog) Printf(ctx context.Context, format string, v ...any) {
	l := slog.Default()
	if ctx == nil {
		ctx = context.Background()
	}
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.DebugContext(ctx, msg, "component", "go-redis")
}

// discardLog drops go-redis's messages.
type discardLog struct{}

// Printf does nothing.
func (discardLog) Printf(context.Context, string, ...any) {}
