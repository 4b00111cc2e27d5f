package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

var (
	_ backend.Store    = (*Store)(nil)
	_ backend.Handover = (*Store)(nil)
)

// DefaultPrefix is the key prefix used when none is given.
const DefaultPrefix = "baton"

const (
	fenceSuffix   = ":fence"
	lineSuffix    = ":line"
	requestSuffix = ":line-req"
	watchedSuffix = ":watch-mark"
	mailboxSuffix = ":mailbox"
	intactSuffix  = ":intact"
)

// reservedSuffixes end the Redis keys a store writes beside a lease key;
// keys passed to the store must not end in them.
var reservedSuffixes = []string{fenceSuffix, lineSuffix, requestSuffix, watchedSuffix, mailboxSuffix, intactSuffix, memberDataSuffix, memberIDsSuffix}

// Store is a backend.Store on Redis. Create it with New; call Close to
// release its pub/sub connection. The client is not closed by Close.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	health time.Duration
	marks  time.Duration // WithMarkerTTL

	replicas    int           // WithReplicaAck: replicas that must acknowledge a grant
	replicaWait time.Duration // and how long to wait for them
	guard       time.Duration // WithRestartGuard; negative: WithoutRestartGuard

	sharded bool // a Cluster client: sharded pub/sub (SPUBLISH, SSUBSCRIBE)
	// wakeSuffix names the store's wake-up channels: " wake " and its
	// wake-up id, 16 random hex digits (wakeChannel).
	wakeSuffix string
	user       string // the ACL user the client logs in as, for errors
	scripts    *scriptSet
	settings   []any                    // the first arguments of every script (scriptSettings)
	lastKeys   atomic.Pointer[keyNames] // leaseKeys' last answer
	marker     *marker                  // keeps watched keys marked

	mu     sync.Mutex             // guards subs, done and adding to awaits
	subs   map[string]*subscriber // by shard: "" or, on a Cluster, the slot
	done   bool
	awaits sync.WaitGroup // commands (handover looks, marks) whose callers left early
}

// Option configures a Store.
type Option func(*Store) error

// WithPrefix sets the prefix of every Redis key the store writes (default
// "baton"). Stores with different prefixes never see each other's leases.
// The prefix holds only letters, digits and - _ . : /
// (backend.ValidateKeyPrefix): a glob character would make the store's key
// walk (SCAN MATCH) miss its own keys and ACLRules grant other prefixes,
// and braces would break the {tenant:app} hash tags.
func WithPrefix(prefix string) Option {
	return func(s *Store) error {
		if err := backend.ValidateKeyPrefix(prefix); err != nil {
			return fmt.Errorf("redisbackend: WithPrefix: %w", err)
		}
		s.prefix = prefix
		return nil
	}
}

// WithHealthCheck sets how long the pub/sub connection may stay silent
// before the store pings it, and after twice that without an answer,
// replaces it (default 15 s). It bounds how long a silently broken
// connection (a network cut without a reset) can hide releases.
func WithHealthCheck(d time.Duration) Option {
	return func(s *Store) error {
		if d <= 0 {
			return fmt.Errorf("redisbackend: %w: health check interval %v must be positive", backend.ErrInvalidArgument, d)
		}
		s.health = d
		return nil
	}
}

// WithRestartGuard makes the store refuse, after the server restarted
// without its data, a key not granted since for d after the restart when
// that is longer than the ttl asked for (default 0: the ttl alone). A
// lease granted before the restart ends by its holder's clock at most its
// longest ttl after its last renewal, so set d to the longest lease any
// holder of the store's keys keeps: the role's heartbeat expiration, the
// locks' hold durations, the job locks' lockAtMostFor. See Restart guard.
func WithRestartGuard(d time.Duration) Option {
	return func(s *Store) error {
		if d < 0 || d > backend.MaxTTL {
			return fmt.Errorf("redisbackend: %w: restart guard %v must be in [0, %v]", backend.ErrInvalidArgument, d, backend.MaxTTL)
		}
		s.guard = backend.RoundUpMillis(d)
		return nil
	}
}

// WithoutRestartGuard turns the restart guard off: a key is granted as
// soon as it is free, also right after the server restarted without its
// data, when the holder of a lease the restart lost may still act on it.
// It is for tests on servers started for them, and for servers that cannot
// lose acknowledged writes (AOF with appendfsync always, and no failover
// to a replica that lacks them). Fencing tokens keep increasing either
// way.
func WithoutRestartGuard() Option {
	return func(s *Store) error {
		s.guard = -1
		return nil
	}
}

// WithMarkerTTL sets how long a watched key's marker lives after its last
// refresh (default 30 s, at least 3 s). The store refreshes the markers
// of its watched keys every third of it, one command per key, so in a
// fleet where every process watches its service's role key this is a
// standing cost per process; a longer marker costs fewer commands, and
// after the last watch of a key closes, its releases go on being published
// (to nobody) for up to that long. config.Config.RedisStoreOptions sets it
// to nine heartbeat intervals, so that a slave's marker refreshes and
// member heartbeats together stay within one command per interval.
func WithMarkerTTL(d time.Duration) Option {
	return func(s *Store) error {
		if d < 3*time.Second || d > backend.MaxTTL {
			return fmt.Errorf("redisbackend: %w: marker ttl %v must be in [3s, %v]", backend.ErrInvalidArgument, d, backend.MaxTTL)
		}
		s.marks = backend.RoundUpMillis(d)
		return nil
	}
}

// New returns a Store on rdb. It does not talk to Redis until it is used.
func New(rdb redis.UniversalClient, opts ...Option) (*Store, error) {
	if rdb == nil {
		return nil, fmt.Errorf("redisbackend: %w: nil client", backend.ErrInvalidArgument)
	}
	_, sharded := rdb.(*redis.ClusterClient)
	s := &Store{rdb: rdb, prefix: DefaultPrefix, health: 15 * time.Second, marks: defaultMarkerTTL, sharded: sharded, user: username(rdb), subs: make(map[string]*subscriber)}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	// A store that waits for replicas to acknowledge grants does not
	// grant inside a release, whose caller is not the grantee and could
	// not wait for them.
	guard := int64(-1)
	if s.guard >= 0 {
		guard = s.guard.Milliseconds()
	}
	wake := newWakeID()
	s.wakeSuffix = wakeSuffix(wake)
	s.settings = scriptSettings(guard, sharded, s.replicas == 0, wake)
	if s.scripts == nil {
		s.scripts = leaseScripts // WithFunctions sets its own
	}
	s.marker = &marker{rdb: rdb, scripts: s.scripts, settings: s.settings, ttl: s.marks}
	return s, nil
}

// Prefix returns the key prefix of the store.
func (s *Store) Prefix() string { return s.prefix }

// StoreName names the kind of Redis the store talks to, for logs
// (backend.StoreName): "cluster" on a Redis Cluster client, "sentinel" on
// a Sentinel-managed master (redis.NewFailoverClient, or
// redis.NewUniversalClient with a MasterName), "ring" on a Ring, "redis"
// on a single server.
func (s *Store) StoreName() string {
	if s == nil {
		return ""
	}
	return topology(s.rdb)
}

// topology names the kind of Redis rdb talks to (see StoreName).
func topology(rdb redis.UniversalClient) string {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return "cluster"
	case *redis.Ring:
		return "ring"
	case *redis.Client:
		// go-redis gives a failover client this placeholder address; the
		// master's real address comes from the Sentinels at each dial.
		if c.Options().Addr == "FailoverClient" {
			return "sentinel"
		}
	}
	return "redis"
}

// LeaseKey returns the Redis key that holds the lease on key.
func (s *Store) LeaseKey(key string) string {
	if strings.IndexByte(key, '{') >= 0 {
		return s.prefix + ":" + key
	}
	return s.prefix + ":{" + key + "}"
}

// Notices returns how the store's watches of key learn what a store of
// another layout that shares the server (such as springredis) does to its
// own lease for key: it publishes, on channel, released followed by the
// lease's token when it releases the lease, and renewed followed by the
// token, a space and the TTL in ms when it renews the lease or keeps it
// after a release. The watches report them as EventReleased and
// EventRenewed.
func (s *Store) Notices(key string) (channel, released, renewed string) {
	return s.LeaseKey(key), "released ", "renewed "
}

// FenceKey returns the Redis key that holds the fencing counter of key.
func (s *Store) FenceKey(key string) string { return s.LeaseKey(key) + fenceSuffix }

// LineKeys returns the Redis keys that hold key's waiting line
// (backend.Queue): the sorted set of waiters by arrival, and the hash of
// what each waiter asked for and when its place lapses.
func (s *Store) LineKeys(key string) (line, requests string) {
	lk := s.LeaseKey(key)
	return lk + lineSuffix, lk + requestSuffix
}

// MailboxKey returns the Redis key in which a release of an older baton
// that handed key to a waiter in line (backend.Handover) left a copy of
// the waiter's lease, "<token> <owner>", expiring with it. This version
// writes none (a waiter reads the lease itself) and deletes one where a
// lease ends.
func (s *Store) MailboxKey(key string) string { return s.LeaseKey(key) + mailboxSuffix }

// IntactKey returns the Redis key that records since when the data of
// key's hash tag is known whole (see Restart guard): "<prefix>:{T}:intact"
// for a key with a hash tag T of its own, as every key of role, synclock
// and schedlock has ({tenant:app}); "" for a key without one.
func (s *Store) IntactKey(key string) string {
	tag := backend.HashTag(key)
	if tag == "" {
		return ""
	}
	return s.prefix + ":" + tag + intactSuffix
}

// MarkerKey returns the Redis key that marks key as watched (see
// Notifications).
func (s *Store) MarkerKey(key string) string { return s.LeaseKey(key) + watchedSuffix }

func validKey(op, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("redisbackend: %s: %w", op, err)
	}
	for _, suffix := range reservedSuffixes {
		if strings.HasSuffix(key, suffix) {
			return fmt.Errorf("redisbackend: %s: %w: key %q ends in the reserved suffix %q", op, backend.ErrInvalidArgument, key, suffix)
		}
	}
	return nil
}

func (s *Store) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *Store) begin(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisbackend: %s %q: %w", op, key, backend.ContextError(ctx))
	}
	if s.closed() {
		return fmt.Errorf("redisbackend: %s %q: %w", op, key, backend.ErrClosed)
	}
	return validKey(op, key)
}

func sortMembers(ms []backend.Member) {
	slices.SortFunc(ms, func(a, b backend.Member) int { return strings.Compare(a.Name, b.Name) })
}

// Close closes the store's pub/sub connection, if one was opened, and
// makes every later call fail with backend.ErrClosed. It does not close
// the Redis client. Open watches stay readable but receive nothing more.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return nil
	}
	s.done = true
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	var errs []error
	for _, sub := range subs {
		errs = append(errs, sub.close())
	}
	s.awaits.Wait()
	return errors.Join(errs...)
}

// bounded runs op, a command on the user's client, and returns when it
// does or when ctx ends, whichever comes first. A client without
// ContextTimeoutEnabled ignores ctx while it reads a reply, so on a stalled
// server op runs on a goroutine of its own, which Close waits for; its
// result is then dropped. op must not block beyond the client's timeouts.
func (s *Store) bounded(ctx context.Context, op func(context.Context) error) error {
	if ctx.Done() == nil {
		return op(ctx)
	}
	done := make(chan error, 1)
	if err := s.spawn(func() { done <- op(ctx) }); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return backend.ContextError(ctx)
	}
}

// spawn runs f on a goroutine of its own that Close waits for, or fails
// with backend.ErrClosed once the store is closed.
func (s *Store) spawn(f func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return backend.ErrClosed
	}
	s.awaits.Add(1)
	go func() {
		defer s.awaits.Done()
		f()
	}()
	return nil
}
