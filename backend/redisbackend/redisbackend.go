// Package redisbackend is the Redis lease store of baton. It works on any
// redis.UniversalClient: a standalone server, a Sentinel-managed master
// (redis.NewFailoverClient) or a Redis Cluster.
//
// # Layout
//
// A lease key K is stored as the string "<prefix>:K", "<token> <owner>"
// with a PX expiry, followed by " contended" once someone waits for it or
// watches it, or by " released" once it was released with a keep time. Its
// fencing counter is the integer "<prefix>:K:fence", the last token
// granted, which expires max(ttl, 1 h) after K's last grant (or never, if
// a floor put it further than that ahead of the server's clock), so that
// per-entity keys such as invoice:42 leave nothing behind once idle.
// K's hash tag (the part in braces, such as "{acme:billing}") keeps all of
// a key's Redis keys in one Cluster slot; a key without one is used whole
// as its tag. A key's waiting line (backend.Queue) is the sorted set
// "<prefix>:K:line" (waiters by arrival, on the server's clock) with the
// hash "<prefix>:K:line-req" of what each waiter asked for (ttl and
// fencing floor) and when its place lapses; both expire with the last
// place. A script reads the places it needs before it writes anything,
// and one call looks at no more than 100 of them from the head (dropping
// the lapsed ones among them): a place not in baton's shape (a ttl
// outside 1 ms to 365 days, a floor at the largest token, a waiter named
// with a space or control character, garbage) is backend.ErrCorrupt
// naming the line's key, and the call changes nothing; a line whose first
// 100 places have all lapsed (say, stuffed by another client) loses its
// order until later calls have dropped them or it expires, and Leases
// lists the live waiters among its first 100 places only. A release of a key with a live waiter in line grants it to that
// waiter (backend.Handover), publishes the grant (see Handovers) and
// copies the lease into K's mailbox, the string "<prefix>:K:mailbox"
// ("<token> <owner>"), which expires with the lease and is deleted when
// that lease ends. A watched key has the marker "<prefix>:K:watch-mark"
// (see Notifications). The suffixes ":fence", ":line", ":line-req",
// ":watch-mark", ":mailbox", ":member-data" and ":member-ids" are
// reserved (see Registry below).
//
// Every operation is one Lua script (EVALSHA, falling back to EVAL when the
// server does not have it yet; WithFunctions: the function of baton's
// library that runs it, FCALL), so the owner check, the fencing increment,
// the write and the release notification are atomic. Each script is a file
// of the package's lua directory, sent behind one shared prelude
// (lua/prelude.lua), and declares in KEYS the eight keys that a lease
// script may touch (K's lease, counter, line, requests, watch marker and
// mailbox, and the restart guard's markers of its service and tenant), as
// Redis's scripting rules require and as Redis-compatible servers enforce.
// Expiry is decided by the server's clock alone.
//
// # ACL
//
// ACLRules gives the rules of a least-privilege Redis user for a store:
// keys and pub/sub channels under the prefix, and the commands the store
// and its scripts use. Refusals (WRONGPASS, NOPERM) come back as errors
// that name the client's user. TenantACLRules gives those of one tenant
// of a shared server: its own {tenant:app} keys and channels only, no
// SCAN (Redis does not confine SCAN to key patterns), so Leases is
// refused to it, and no scripts of its own (a looping script stalls the
// server): its stores call baton's Redis functions instead
// (WithFunctions), which an administrator loads (LoadFunctions). The
// README's Tenants section says what tenants still share.
//
// # Fencing tokens
//
// A grant's token is max(counter, floor, the server's clock in µs, from
// TIME) + 1, at most backend.MaxToken (2^53 - 1, so that the scripts
// compute it exactly as a Lua number). A script runs far longer than a microsecond, so the tokens of
// a key increase also when its counter is gone: expired, or lost with the
// server's data; a caller that has seen no token (a new process) still
// gets a larger one. The floor covers a server whose clock went back.
//
// No grant puts a token more than backend.MaxTokenLead (366 days) ahead
// of the server's clock: a floor at or beyond that limit is refused with
// backend.ErrFloorAhead, and a counter or lease token found beyond it
// (forged, or written while the server's clock was far ahead) makes every
// call that reads it fail with backend.ErrCorrupt naming the Redis key to
// delete, instead of handing it to a caller that would keep it as its
// floor. Reading a lease therefore reads TIME too.
//
// # Restart guard
//
// A server restarted without its data may have lost a lease whose holder
// still acts on it. A grant that finds no fencing counter (a key never
// granted, idle past the counter's life, or lost) therefore asks whether
// the data of the key's service is known whole for long enough, and if
// not refuses: Acquire and AcquireQueued return a *backend.HeldError with
// Recovering set and the time left as Holder.TTL (its message says why,
// and names batonctl init and WithoutRestartGuard); a waiter in line
// keeps its place. The time asked for is the guard, the ttl asked for or
// WithRestartGuard if longer: set that to the longest lease the fleet
// keeps. WithoutRestartGuard turns it off, for tests on servers started
// for them.
//
// Markers say since when data is known whole, each the server's time in
// ms and the ID of the server's run that wrote it (INFO server's run_id),
// with no expiry:
//
//	<prefix>:{T:app}:intact   the service's (IntactKey): its hash tag's keys
//	<prefix>:{T:}:intact      the tenant's (TenantIntactKey): all of tenant T's services
//
// A data loss takes both: a FLUSHALL or FLUSHDB, and a restart without
// data. A grant waits until the guard has passed since the service's
// marker says, or, for a service without one, since the tenant's says: a
// service new to a server its tenant already uses is new, not lost (had
// the server lost the service's data, it would have lost the tenant's
// marker too), and is granted at once once the tenant has used the
// server for the guard. With neither marker (a new server, or one that
// lost its data) the grant writes both and refuses: from the server's
// start, if that is nearer than the guard, else from now. A marker
// written in an earlier run of the server (it restarted with its data,
// perhaps from an older snapshot) also waits for the server's uptime to
// pass the guard plus a second (Redis counts whole seconds). A server new
// to baton looks the same as one that lost its data, so the first
// service of each tenant waits once; batonctl init (DeclareIntact), on a
// server an operator knows holds no live lease, writes the tenant's
// marker as whole since ever, for this run of the server, and the
// tenant's grants are at once. The marker is per tenant, not per server,
// so that it stays inside the keys of TenantACLRules: no tenant of a
// shared server can write what another tenant's grants trust.
//
// On a Redis Cluster a script may touch only the keys of its own slot,
// and the tenant's marker is in another: there each service's marker
// stands alone, every new service waits once, and batonctl init declares
// one service (--app) at a time. Keys without a hash tag of their own
// have no service marker: they read the marker "<prefix>:intact", which
// only DeclareIntact writes, and otherwise the uptime alone. A marker
// ahead of the server's clock (the clock was stepped back, or the value
// was forged) would refuse fresh keys until the clock caught up: the
// grant that finds one resets it to the server's time and fails with
// backend.ErrCorrupt naming it, and fresh keys then wait out the guard
// once, as after a flush. A tenant's user can write its tenant's marker,
// and so skip its own services' wait, no other tenant's.
//
// The guard does not cover a DEL of a lease key by hand (its counter and
// the marker stay), nor a failover to a replica that missed writes (see
// WithReplicaAck), nor servers that report no uptime (miniredis), nor a
// restart from a stale RDB snapshot: the snapshot brings the counter back,
// and a lease renewed after the snapshot and lost with the restart is then
// granted again at once. Fencing tokens still increase in every one of
// these cases; run Redis without persistence, or with AOF, to keep the
// guard's promise.
//
// # Notifications
//
// Release and Renew of a contended lease publish on a channel named after
// the lease key, so watchers learn of a release at once and of a renewal's
// new expiry without asking. A lease is contended when a waiter joins its
// line, when it was granted while a line or a watch marker existed, when
// it was handed over, or when a Watch began while it was held; a lease
// nobody waits for or watches is released with a GET and a DEL and
// publishes nothing. Watch subscribes to the channel over one shared
// pub/sub connection per Store (on a Cluster: sharded pub/sub, one
// connection per slot in use, so events stay on the node that owns the key
// and arrive in order with its writes), opened on the first Watch and
// closed by Close; the subscription is confirmed by the server, and the
// key marked, before Watch returns, so a release after Watch returned is
// never missed while the connection stays up. The store refreshes the
// marker of every watched key every third of its life (WithMarkerTTL,
// default 30 s); when a refresh
// fails, the key's watchers are told to look again. Keyspace notifications
// are not needed: expiry is not signalled, and waiters re-check at the
// holder's remaining TTL (backend.WaitFree). When the pub/sub connection
// breaks, every watcher gets a signal, because a release may have been
// missed. Once a key's subscription is confirmed again (the connection
// came back, or the store replaced one that stopped answering), the store
// marks the key again at once, since a server restarted without its data
// lost the markers, and then signals the key's watchers once more: from
// that mark on, releases are published again, and one that went
// unpublished before it is covered by the signal. A mark that fails is
// tried again a quarter of a second later.
//
// The pub/sub connection has two goroutines of the store: one sends on it
// (SUBSCRIBE, UNSUBSCRIBE, PING, the re-dial of a connection that stopped
// answering, in the order callers asked), the other reads it. No network
// call runs under a mutex that another caller needs, so a server that
// stalls delays only the calls that wait for it, each until its own
// context ends. A Watch whose context has a deadline returns by it even
// when the client ignores context deadlines on reads (go-redis without
// ContextTimeoutEnabled); the command it abandoned finishes on its own
// and Close waits for it.
//
// # The protocol as states and transitions
//
// A lease key K is in one of four states, by its value:
//
//	free        (no K)                   nobody holds K; its line may keep it for the first live waiter
//	plain       "<token> <owner>"        held; nobody waits or watches
//	contended   "... contended"          held; someone waits, watches, or was handed it
//	released    "... released"           released with a keep time; it only expires
//
// Every change is one script (O is the caller, W the first live waiter
// in K's line; "publish" is on K's channel):
//
//	from              call                         to                                    publish
//	free, no line     Acquire(Queued) by O         plain (contended: no counter, marker)  -
//	free, W first     AcquireQueued by W           contended, W leaves the line           -
//	free, W first     AcquireQueued by O != W      O joins the line; reply queued W        -
//	plain/contended   AcquireQueued by O           contended; O joins (or keeps) its place -
//	contended of O    AcquireQueued by O           same (a handover: mailbox deleted)     -
//	plain of O        Renew by O                   plain, new PX                          -
//	contended of O    Renew by O                   contended, new PX                      renewed <token> <ttl>
//	plain of O        Release by O                 free                                   -
//	contended of O    Release by O, W in line      contended of W, new token, W's ttl;    renewed <token> <ttl> W
//	                                               W leaves the line, the mailbox a copy
//	contended of O    Release by O, no W           free                                   released <token> <next>
//	plain/contended   Release by O, keep > 0       released, PX keep (mailbox deleted)    renewed <token> <keep> if contended
//	contended of W    Dequeue by W (handed to it)  as Release by W
//	free, W first     Dequeue by W                 the next waiter's, as above            renewed ... / released - <next>
//	any, in line      Dequeue by O                 O leaves the line                      -
//	any held          Break (backend.Breaker)      counter past the token and the clock;  renewed <token> <ttl> W /
//	                                               then as Release by its owner, also     released <token> <next>,
//	                                               when plain or released                 also when plain
//	plain             Watch (mark)                 contended; marker set (WithMarkerTTL)  -
//	any held          PX runs out                  free                                   - (waiters wake at the TTL)
//
// A place in line lapses at its due time, 3 x RetryInterval after its
// waiter last asked (synclock's patience); a lapsed waiter is dropped when
// it reaches the head of the line or joins again. A store made
// WithReplicaAck does not hand over: its contended release publishes
// "released <token> <W>" and W claims. The restart guard refuses a grant
// in every row that grants, with "recovering <ms left>", when K's fencing
// counter is missing and K's data is not known whole for the guard (see
// Restart guard).
//
// # Handovers
//
// AwaitHandover never holds a connection of the client's pool: a process
// may wait on more keys than its pool has connections while its renewals
// and releases go through. A release that hands K to a waiter publishes
// "renewed <token> <ttl-ms> <new owner>" on K's channel; AwaitHandover
// subscribes to that channel over the store's pub/sub connection and
// returns when the message names its owner. The channel stays subscribed
// for 2 s after its last watch closed and its last waiter left, and a
// handover seen while its owner was not waiting (between a refused
// AcquireQueued and the next AwaitHandover) is kept for the owner's next
// wait, up to the lease's ttl, until the next message on the channel, or
// until the owner has the lease from AcquireQueued.
// A handover published before the subscription held is found by one look
// in the key's mailbox (GET and PTTL in one MULTI) once the server has
// confirmed the subscription, and again after every re-subscription. A
// wait ends at its max by a timer of the client, never later (a blocking
// read on the server would end only on the server's next clock tick, up
// to 100 ms late at the default hz); if the pub/sub connection broke and
// a handover went unseen, the caller's next AcquireQueued returns it.
package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
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

	sharded  bool   // a Cluster client: sharded pub/sub (SPUBLISH, SSUBSCRIBE)
	user     string // the ACL user the client logs in as, for errors
	scripts  *scriptSet
	settings []any   // the first arguments of every script (scriptSettings)
	marker   *marker // keeps watched keys marked

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
	s.settings = scriptSettings(guard, sharded, s.replicas == 0)
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

// MailboxKey returns the Redis key in which a release that hands key to a
// waiter in line (backend.Handover) leaves a copy of the waiter's lease,
// "<token> <owner>", expiring with it.
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

// Acquire implements backend.Store.
func (s *Store) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if err := s.begin(ctx, "acquire", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), backend.ValidateTTL("ttl", ttl), backend.ValidateFloor(floor)); err != nil {
		return backend.Lease{}, fmt.Errorf("redisbackend: acquire: %w", err)
	}
	ms := backend.RoundUpMillis(ttl).Milliseconds()
	res, err := s.grant(ctx, s.scripts.acquire, key, owner, ms, strconv.FormatUint(floor, 10))
	if errors.Is(err, ErrNotReplicated) {
		// Undo the grant that only the master has; a failover could
		// lose it while we believed in it.
		s.undo(ctx, key, owner)
	}
	if err != nil {
		return backend.Lease{}, s.transport("acquire", key, ctx, err)
	}
	r, err := parseReply("acquire", key, res, asked(key, owner, ms))
	if err != nil {
		return backend.Lease{}, err
	}
	switch r.status {
	case statusOK:
		return r.lease, nil
	case statusHeld:
		return backend.Lease{}, &backend.HeldError{Holder: r.lease}
	case statusRecovering:
		return backend.Lease{}, &backend.HeldError{Holder: r.lease, Recovering: true}
	}
	return backend.Lease{}, r.unexpected("acquire", key)
}

// Renew implements backend.Store.
func (s *Store) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if err := s.begin(ctx, "renew", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), backend.ValidateTTL("ttl", ttl)); err != nil {
		return backend.Lease{}, fmt.Errorf("redisbackend: renew: %w", err)
	}
	ms := backend.RoundUpMillis(ttl).Milliseconds()
	res, err := s.run(ctx, s.scripts.renew, key, owner, ms).Result()
	if err != nil {
		return backend.Lease{}, s.transport("renew", key, ctx, err)
	}
	r, err := parseReply("renew", key, res, asked(key, owner, ms))
	if err != nil {
		return backend.Lease{}, err
	}
	switch r.status {
	case statusOK:
		return r.lease, nil
	case statusHeld, statusFree:
		return backend.Lease{}, &backend.NotHeldError{Key: key, Owner: owner, Holder: r.lease}
	}
	return backend.Lease{}, r.unexpected("renew", key)
}

// Release implements backend.Store.
func (s *Store) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	if err := s.begin(ctx, "release", key); err != nil {
		return err
	}
	if err := backend.ValidateOwner(owner); err != nil {
		return fmt.Errorf("redisbackend: release: %w", err)
	}
	if err := backend.ValidateKeepFor(keepFor); err != nil {
		return fmt.Errorf("redisbackend: release: %w", err)
	}
	var ms int64
	if keepFor > 0 {
		ms = backend.RoundUpMillis(keepFor).Milliseconds()
	}
	res, err := s.run(ctx, s.scripts.release, key, owner, ms).Result()
	if err != nil {
		return s.transport("release", key, ctx, err)
	}
	r, err := parseReply("release", key, res, asked(key, owner, ms))
	if err != nil {
		return err
	}
	switch r.status {
	case statusOK:
		return nil
	case statusHeld, statusFree:
		return &backend.NotHeldError{Key: key, Owner: owner, Holder: r.lease}
	}
	return r.unexpected("release", key)
}

// Get implements backend.Store.
func (s *Store) Get(ctx context.Context, key string) (backend.Lease, error) {
	if err := s.begin(ctx, "get", key); err != nil {
		return backend.Lease{}, err
	}
	res, err := s.run(ctx, s.scripts.get, key).Result()
	if err != nil {
		return backend.Lease{}, s.transport("get", key, ctx, err)
	}
	r, err := parseReply("get", key, res, backend.Lease{Key: key})
	if err != nil {
		return backend.Lease{}, err
	}
	switch r.status {
	case statusHeld:
		return r.lease, nil
	case statusFree:
		return backend.Lease{}, fmt.Errorf("redisbackend: get %q: %w", key, backend.ErrNotFound)
	}
	return backend.Lease{}, r.unexpected("get", key)
}

// undo releases a grant that too few replicas acknowledged, even when
// ctx has ended.
func (s *Store) undo(ctx context.Context, key, owner string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.replicaWait)
	defer cancel()
	_ = s.run(rctx, s.scripts.release, key, owner, 0).Err()
}

// transport wraps an error from the client. When ctx ended, the context's
// error is joined so errors.Is finds it.
func (s *Store) transport(op, key string, ctx context.Context, err error) error {
	return s.transportOn(op, key, s.lockKeyNames(key), ctx, err)
}

// transportOn is transport for a call whose script touches the Redis keys
// named in keys (for an error to point at).
func (s *Store) transportOn(op, key, keys string, ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, backend.ContextError(ctx))
	}
	if strings.Contains(err.Error(), "WRONGTYPE") {
		// A script met a key that holds another type than baton keeps
		// there: not baton's data.
		return fmt.Errorf("redisbackend: %s %q: %w: one of the Redis keys %s holds a value of another type than baton keeps there; delete the foreign one: %w",
			op, key, backend.ErrCorrupt, keys, err)
	}
	return fmt.Errorf("redisbackend: %s %q: %w", op, key, s.aclError(err))
}

// lockKeyNames names the Redis keys of lock key, for errors.
func (s *Store) lockKeyNames(key string) string {
	k := s.LeaseKey(key)
	return fmt.Sprintf("of %s (the lease, %s, %s, %s, %s, %s)", k, fenceSuffix, lineSuffix, requestSuffix, watchedSuffix, mailboxSuffix)
}

// status is the first element of a script's array reply: what happened.
// The scripts (scripts.go) write these words; parseReply reads them.
type status string

const (
	statusOK         status = "ok"          // owner token pttl: the caller holds the key (or a bare token: it was granted, renewed, released)
	statusHeld       status = "held"        // owner token pttl [next]: another lease is on the key
	statusQueued     status = "queued"      // next: the key is free but kept for next, first in line
	statusFree       status = "free"        // no lease is on the key
	statusRecovering status = "recovering"  // ms-left: the restart guard refuses the grant
	statusCorrupt    status = "corrupt"     // description: the key holds data baton did not write
	statusFloorAhead status = "floor-ahead" // description: the floor is beyond any token a grant can make (backend.ErrFloorAhead)
)

type reply struct {
	status status
	lease  backend.Lease
	next   string // the waiter first in line, for held (AcquireQueued) and queued
	detail string
}

func (r reply) unexpected(op, key string) error {
	if r.status == statusFloorAhead {
		return fmt.Errorf("redisbackend: %s %q: %w: %s; forget the floor", op, key, backend.ErrFloorAhead, r.detail)
	}
	if r.status == statusCorrupt {
		remedy := "; delete the key or use another prefix"
		if strings.HasSuffix(r.detail, "delete it") || strings.HasSuffix(r.detail, "guard once") {
			remedy = "" // the script said what to do
		}
		return fmt.Errorf("redisbackend: %s %q: %w: %s%s", op, key, backend.ErrCorrupt, backend.Printable(r.detail), remedy)
	}
	return fmt.Errorf("redisbackend: %s %q: %w: script replied %q", op, key, backend.ErrCorrupt, r.status)
}

// millis converts a count of milliseconds read from Redis to a duration.
// It reports false for a negative count and for one too large for a
// time.Duration, which the multiplication would silently wrap to a
// negative (or a small) value.
func millis(ms int64) (time.Duration, bool) {
	if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// parseToken reads a fencing token as the scripts write it: a decimal in
// [1, backend.MaxToken].
func parseToken(s string) (uint64, bool) {
	t, err := strconv.ParseUint(s, 10, 64)
	return t, err == nil && t > 0 && t <= backend.MaxToken
}

// parsePositiveMillis reads a positive count of milliseconds that fits a
// time.Duration, as the scripts write TTLs and times left.
func parsePositiveMillis(s string) (time.Duration, bool) {
	ms, err := strconv.ParseInt(s, 10, 64)
	d, fits := millis(ms)
	return d, err == nil && ms > 0 && fits
}

// parseReply turns a script's reply into a lease, checking every field so
// that foreign data gives ErrCorrupt instead of a panic or a zero token. A
// reply that is a string alone is the token of the lease that was asked
// for (asked: key, owner and ttl), granted, renewed or released.
func parseReply(op, key string, res any, asked backend.Lease) (reply, error) {
	bad := func(format string, args ...any) (reply, error) {
		return reply{}, fmt.Errorf("redisbackend: %s %q: %w: %s", op, key, backend.ErrCorrupt, backend.Printable(fmt.Sprintf(format, args...)))
	}
	if tok, ok := res.(string); ok {
		token, ok := parseToken(tok)
		if !ok {
			return bad("lease token %q is not a positive integer (at most %d)", tok, uint64(backend.MaxToken))
		}
		asked.Token = token
		return reply{status: statusOK, lease: asked}, nil
	}
	arr, _ := res.([]any)
	if len(arr) == 0 {
		return bad("unexpected script reply %v", res)
	}
	word, _ := arr[0].(string)
	r := reply{status: status(word)}
	switch r.status {
	case statusFree:
		return r, nil
	case statusCorrupt, statusFloorAhead:
		if len(arr) > 1 {
			r.detail, _ = arr[1].(string)
		}
		return r, nil
	case statusRecovering:
		if len(arr) < 2 {
			return bad("short script reply %v", arr)
		}
		left, _ := arr[1].(string)
		d, ok := parsePositiveMillis(left)
		if !ok {
			return bad("recovering reply with time left %v", arr[1])
		}
		r.lease = backend.Lease{Key: key, TTL: d}
		return r, nil
	case statusQueued:
		if len(arr) < 2 {
			return bad("short script reply %v", arr)
		}
		r.next, _ = arr[1].(string)
		if r.next == "" {
			return bad("queued reply names no waiter")
		}
		if err := backend.CheckStoredName("waiter", "the line of "+key, r.next); err != nil {
			return reply{}, fmt.Errorf("redisbackend: %s %q: %w", op, key, err)
		}
		r.lease = backend.Lease{Key: key}
		return r, nil
	case statusOK, statusHeld:
	default:
		return bad("unknown script reply %v", arr)
	}
	if len(arr) < 4 {
		return bad("short script reply %v", arr)
	}
	owner, _ := arr[1].(string)
	tok, _ := arr[2].(string)
	ttl, ok := arr[3].(int64)
	if !ok {
		return bad("lease TTL %v is not an integer", arr[3])
	}
	if owner == "" {
		return bad("%s reply names no owner", r.status)
	}
	token, ok := parseToken(tok)
	if !ok {
		return bad("lease token %q is not a positive integer (at most %d)", tok, uint64(backend.MaxToken))
	}
	if ttl < 0 {
		return bad("lease key has no expiry (PTTL %d); baton never writes a lease without one", ttl)
	}
	if _, fits := millis(max(ttl, -ttl)); !fits {
		return bad("lease TTL %d ms is out of range", ttl)
	}
	r.lease = backend.Lease{Key: key, Owner: owner, Token: token, TTL: time.Duration(ttl) * time.Millisecond}
	if len(arr) > 4 {
		r.next, _ = arr[4].(string)
	}
	if err := r.checkNames(key); err != nil {
		return reply{}, fmt.Errorf("redisbackend: %s %q: %w", op, key, err)
	}
	return r, nil
}

// checkNames checks the names a reply read from the store, the holder and
// the waiter first in line, by the rules of what baton writes
// (backend.CheckStoredName): a name with a control character, such as a
// terminal escape or a newline, is ErrCorrupt, never returned.
func (r reply) checkNames(key string) error {
	if err := backend.CheckStoredName("owner", "lease "+key, r.lease.Owner); err != nil {
		return err
	}
	if r.next != "" {
		return backend.CheckStoredName("waiter", "the line of "+key, r.next)
	}
	return nil
}

// asked is the lease a request for key by owner for ms milliseconds
// would get, the token aside; parseReply completes it from a short reply.
func asked(key, owner string, ms int64) backend.Lease {
	return backend.Lease{Key: key, Owner: owner, TTL: time.Duration(ms) * time.Millisecond}
}

// succeeded reports whether a script's reply says it did what was asked.
func succeeded(res any) bool {
	if _, ok := res.(string); ok {
		return true
	}
	arr, _ := res.([]any)
	return len(arr) > 0 && arr[0] == string(statusOK)
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
