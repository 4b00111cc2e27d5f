package springredis

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/internal/redislua"
	"github.com/baton-go/baton/backend/redisbackend"
)

//go:embed lua/*.lua
var luaFiles embed.FS

func script(name string) *redis.Script {
	return redis.NewScript(readLua(name))
}

// fencedScript is a script that grants or breaks a lease: it is sent
// behind the fencing rule that both Redis stores share.
func fencedScript(name string) *redis.Script {
	return redis.NewScript(redislua.Fence + readLua(name))
}

func readLua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return string(b)
}

var (
	acquireScript = fencedScript("acquire")
	renewScript   = script("renew")
	releaseScript = script("release")
	getScript     = script("get")
)

// Layout names the keys and values the Java side of the fleet uses. The
// zero value is the Spring framework's and ShedLock's defaults.
type Layout struct {
	// RoleKey returns the role key of app in tenant. Default: the app
	// name (spring.application.name), which the Spring framework uses as
	// the key of a service's role; the tenant is not part of it.
	RoleKey func(tenant, app string) string

	// LockKey returns the key of the synchronized lock name of app.
	// Default: name itself, the Java method's signature, which the Go
	// side passes to Locker.DoKey (see the package doc).
	LockKey func(tenant, app, name string) string

	// JobKey returns the key of the job lock name of app. Default:
	// ShedLock's "<JobKeyPrefix>:<Environment>:<name>".
	JobKey func(tenant, app, name string) string

	// JobKeyPrefix and Environment are the key prefix and environment
	// of ShedLock's Redis lock provider (defaults "job-lock" and
	// "default"), used by the default JobKey.
	JobKeyPrefix, Environment string

	// Hostname names this process in the job-lock values it writes, as
	// ShedLock names the host (default: os.Hostname, or "unknown").
	Hostname string
}

func (l Layout) withDefaults() Layout {
	if l.RoleKey == nil {
		l.RoleKey = func(_, app string) string { return app }
	}
	if l.LockKey == nil {
		l.LockKey = func(_, _, name string) string { return name }
	}
	if l.JobKeyPrefix == "" {
		l.JobKeyPrefix = "job-lock"
	}
	if l.Environment == "" {
		l.Environment = "default"
	}
	if l.JobKey == nil {
		prefix, env := l.JobKeyPrefix, l.Environment
		l.JobKey = func(_, _, name string) string { return prefix + ":" + env + ":" + name }
	}
	if l.Hostname == "" {
		l.Hostname, _ = os.Hostname()
		if l.Hostname == "" {
			l.Hostname = "unknown"
		}
	}
	return l
}

// Store is a backend.Store whose role, lock and job-lock keys are the
// Java side's. Create it with New; Close closes the baton store it
// shares its client with, not the client.
type Store struct {
	rdb    redis.UniversalClient
	baton  *redisbackend.Store // members, watches, and keys of no shared kind
	layout Layout
	now    func() time.Time
}

var (
	_ backend.Store    = (*Store)(nil)
	_ backend.Registry = (*Store)(nil)
)

// StoreName returns "spring": the kind of store, for logs
// (backend.StoreName).
func (s *Store) StoreName() string { return "spring" }

// New returns a Store on rdb, a standalone or Sentinel client (the
// shared keys carry no Cluster hash tag, so a Cluster client is refused),
// with the Java side's keys as layout says and baton's own records
// (fencing counters, owners, members, watch markers) in the layout of a
// redisbackend store made with opts.
func New(rdb redis.UniversalClient, layout Layout, opts ...redisbackend.Option) (*Store, error) {
	if rdb == nil {
		return nil, fmt.Errorf("springredis: %w: nil client", backend.ErrInvalidArgument)
	}
	if _, ok := rdb.(*redis.ClusterClient); ok {
		return nil, fmt.Errorf("springredis: %w: the Spring layout's keys carry no hash tag, so they cannot share a Cluster slot with baton's records; use a standalone or Sentinel client", backend.ErrInvalidArgument)
	}
	b, err := redisbackend.New(rdb, opts...)
	if err != nil {
		return nil, err
	}
	l := layout.withDefaults()
	for what, v := range map[string]string{"job key prefix": l.JobKeyPrefix, "environment": l.Environment, "hostname": l.Hostname} {
		if strings.ContainsAny(v, " \t\r\n") {
			return nil, fmt.Errorf("springredis: %w: %s %q holds a space", backend.ErrInvalidArgument, what, v)
		}
	}
	return &Store{rdb: rdb, baton: b, layout: l, now: time.Now}, nil
}

// Close closes the store's watches (see redisbackend.Store.Close).
func (s *Store) Close() error { return s.baton.Close() }

// kind is which shared key a baton key maps to.
type kind int

const (
	kindRole kind = iota
	kindLock
	kindJob
)

// shared is a baton key's place in the Java side's layout.
type shared struct {
	kind  kind
	redis string // the shared Redis key
}

// Shared returns the Redis key that the Java side uses for baton's key
// (backend.AppKey(tenant, app, "role"), or "lock" or "job" and a name).
// A key of another shape is a synchronized lock whose name is the key
// itself.
func (s *Store) Shared(key string) string { return s.shared(key).redis }

func (s *Store) shared(key string) shared {
	if rest, ok := strings.CutPrefix(key, "{"); ok {
		if tag, tail, ok := strings.Cut(rest, "}"); ok {
			if tenant, app, ok := strings.Cut(tag, ":"); ok {
				switch {
				case tail == ":role":
					return shared{kindRole, s.layout.RoleKey(tenant, app)}
				case strings.HasPrefix(tail, ":lock:"):
					return shared{kindLock, s.layout.LockKey(tenant, app, tail[len(":lock:"):])}
				case strings.HasPrefix(tail, ":job:"):
					return shared{kindJob, s.layout.JobKey(tenant, app, tail[len(":job:"):])}
				}
			}
		}
	}
	return shared{kindLock, key}
}

// keys are the three Redis keys of a shared key's scripts: the shared
// key, baton's record of its holder and its fencing counter.
func (s *Store) keys(sh shared) []string {
	name := s.baton.LeaseKey("spring:" + sh.redis)
	return []string{sh.redis, name + ":owner", name + ":fence"}
}

// value is what owner writes in a shared key of kind k: its instance ID
// (the owner without its "#nonce"), or for a job lock ShedLock's
// "ADDED:<time>@<host>".
func (s *Store) value(k kind, owner string) string {
	if k == kindJob {
		return "ADDED:" + s.now().UTC().Format(shedLockTime) + "@" + s.layout.Hostname
	}
	return InstanceID(owner)
}

// shedLockTime is the time format of ShedLock's lock values.
const shedLockTime = "2006-01-02T15:04:05.000Z"

// InstanceID returns the instance ID part of a baton owner string, what
// the Java side writes and compares.
func InstanceID(owner string) string {
	if i := strings.LastIndexByte(owner, '#'); i >= 0 {
		return owner[:i]
	}
	return owner
}

// begin checks a call's context and arguments; owner is checked unless
// the call has none (nil).
func (s *Store) begin(ctx context.Context, op, key string, owner *string, ttls ...time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("springredis: %s %q: %w", op, key, backend.ContextError(ctx))
	}
	errs := []error{backend.ValidateKey(key)}
	if owner != nil {
		errs = append(errs, backend.ValidateOwner(*owner))
	}
	for _, d := range ttls {
		errs = append(errs, backend.ValidateTTL("ttl", d))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("springredis: %s: %w", op, err)
	}
	return nil
}

// Acquire implements backend.Store: SET NX PX of the shared key, as the
// Java side does, with baton's record and fencing token beside it.
func (s *Store) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if err := s.begin(ctx, "acquire", key, &owner, ttl); err != nil {
		return backend.Lease{}, err
	}
	if err := backend.ValidateFloor(floor); err != nil {
		return backend.Lease{}, fmt.Errorf("springredis: acquire: %w", err)
	}
	ttl = backend.RoundUpMillis(ttl)
	sh := s.shared(key)
	res, err := acquireScript.Run(ctx, s.rdb, s.keys(sh), s.value(sh.kind, owner), owner, ttl.Milliseconds(), strconv.FormatUint(floor, 10)).Slice()
	if err != nil {
		return backend.Lease{}, s.transport("acquire", key, sh, ctx, err)
	}
	switch status(res) {
	case "ok":
		tok, ok := token(res, 1)
		if !ok {
			return backend.Lease{}, s.unexpected("acquire", key, sh, res)
		}
		return backend.Lease{Key: key, Owner: owner, Token: tok, TTL: ttl}, nil
	case "held":
		l, err := s.holder(key, sh, res[1:])
		if err != nil {
			return backend.Lease{}, err
		}
		return backend.Lease{}, &backend.HeldError{Holder: l}
	case "floor-ahead":
		return backend.Lease{}, fmt.Errorf("springredis: acquire %q: %w: %v; forget the floor", key, backend.ErrFloorAhead, res[1])
	case "corrupt":
		return backend.Lease{}, fmt.Errorf("springredis: acquire %q: %w: %s", key, backend.ErrCorrupt, backend.Printable(fmt.Sprint(res[1])))
	}
	return backend.Lease{}, s.unexpected("acquire", key, sh, res)
}

// Renew implements backend.Store: PEXPIRE of the shared key, if owner
// holds it.
func (s *Store) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if err := s.begin(ctx, "renew", key, &owner, ttl); err != nil {
		return backend.Lease{}, err
	}
	ttl = backend.RoundUpMillis(ttl)
	sh := s.shared(key)
	channel, _, renewed := s.baton.Notices(key)
	res, err := renewScript.Run(ctx, s.rdb, s.keys(sh), owner, ttl.Milliseconds(), channel, renewed).Slice()
	if err != nil {
		return backend.Lease{}, s.transport("renew", key, sh, ctx, err)
	}
	return s.owned("renew", key, owner, sh, res, ttl)
}

// Release implements backend.Store: DEL of the shared key (or, with
// keepFor, PEXPIRE to keepFor, as ShedLock keeps a job lock until
// lockAtLeastFor), if owner holds it.
func (s *Store) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	if err := s.begin(ctx, "release", key, &owner); err != nil {
		return err
	}
	if err := backend.ValidateKeepFor(keepFor); err != nil {
		return fmt.Errorf("springredis: release: %w", err)
	}
	keep := int64(0)
	if keepFor > 0 {
		keep = backend.RoundUpMillis(keepFor).Milliseconds()
	}
	sh := s.shared(key)
	channel, released, renewed := s.baton.Notices(key)
	res, err := releaseScript.Run(ctx, s.rdb, s.keys(sh), owner, keep, channel, released, renewed).Slice()
	if err != nil {
		return s.transport("release", key, sh, ctx, err)
	}
	_, err = s.owned("release", key, owner, sh, res, keepFor)
	return err
}

// owned reads the reply of renew or release.
func (s *Store) owned(op, key, owner string, sh shared, res []any, ttl time.Duration) (backend.Lease, error) {
	switch status(res) {
	case "ok":
		tok, ok := token(res, 1)
		if !ok || len(res) != 3 {
			return backend.Lease{}, s.unexpected(op, key, sh, res)
		}
		now, _ := res[2].(int64)
		if err := s.checkRecord(op, key, sh, tok, now); err != nil {
			return backend.Lease{}, err
		}
		return backend.Lease{Key: key, Owner: owner, Token: tok, TTL: ttl}, nil
	case "not-held":
		e := &backend.NotHeldError{Key: key, Owner: owner}
		l, err := s.holder(key, sh, res[1:])
		if err != nil {
			return backend.Lease{}, err
		}
		if l.Owner != "" {
			e.Holder = l
		}
		return backend.Lease{}, e
	}
	return backend.Lease{}, s.unexpected(op, key, sh, res)
}

// Get implements backend.Store. A lease the Java side holds has the
// value it wrote as Owner and no token (0).
func (s *Store) Get(ctx context.Context, key string) (backend.Lease, error) {
	if err := s.begin(ctx, "get", key, nil); err != nil {
		return backend.Lease{}, err
	}
	sh := s.shared(key)
	res, err := getScript.Run(ctx, s.rdb, s.keys(sh)).Slice()
	if err != nil {
		return backend.Lease{}, s.transport("get", key, sh, ctx, err)
	}
	switch status(res) {
	case "ok":
		l, err := s.holder(key, sh, res[1:])
		if err != nil {
			return backend.Lease{}, err
		}
		if l.Owner == "" {
			return backend.Lease{}, fmt.Errorf("springredis: get %q (%s): %w", key, sh.redis, backend.ErrNotFound)
		}
		return l, nil
	case "corrupt":
		return backend.Lease{}, fmt.Errorf("springredis: get %q: %w: %s", key, backend.ErrCorrupt, backend.Printable(fmt.Sprint(res[1])))
	}
	return backend.Lease{}, s.unexpected("get", key, sh, res)
}

// holder reads {value, pttl, record, the server's clock in µs}: the lease
// on the shared key, by baton's record if it is the record of that value,
// else the Java side's (its value as Owner, no token). An empty value is
// a free key. A record whose token no grant can have made by that clock
// (backend.CheckStoredToken) is ErrCorrupt naming it.
func (s *Store) holder(key string, sh shared, f []any) (backend.Lease, error) {
	if len(f) != 4 {
		return backend.Lease{}, s.unexpected("read", key, sh, f)
	}
	v, held := f[0].(string)
	pttl, _ := f[1].(int64)
	rec, _ := f[2].(string)
	now, _ := f[3].(int64)
	if !held {
		return backend.Lease{Key: key}, nil
	}
	l := backend.Lease{Key: key, TTL: time.Duration(pttl) * time.Millisecond}
	if pttl < 0 {
		// No expiry (written by hand): say it is held for as long as
		// a lease can be, so that waiters poll at their own pace.
		l.TTL = backend.MaxTTL
	}
	rec = strings.TrimPrefix(rec, "kept ")
	if tok, rest, ok := strings.Cut(rec, " "); ok {
		if owner, val, ok := strings.Cut(rest, " "); ok && val == v {
			if n, ok := backend.ParseToken(tok); ok && backend.ValidateOwner(owner) == nil {
				if err := s.checkRecord("read", key, sh, n, now); err != nil {
					return backend.Lease{}, err
				}
				l.Owner, l.Token = owner, n
				return l, nil
			}
		}
	}
	l.Owner = javaOwner(v)
	return l, nil
}

// javaOwner is the Owner of a lease the Java side holds: the value it
// wrote, with any space or control character replaced, so that it is a
// valid owner.
func javaOwner(v string) string {
	if v == "" {
		return "(empty)"
	}
	if len(v) > backend.MaxOwnerLen {
		v = v[:backend.MaxOwnerLen]
	}
	return strings.Map(func(r rune) rune {
		if r == '\uFFFD' || backend.ValidateOwner(string(r)) != nil {
			return '_' // a space or control character, by the owner rules
		}
		return r
	}, strings.ToValidUTF8(v, "_"))
}

var _ backend.Unannounced = (*Store)(nil)

// ReleasesUnannounced implements backend.Unannounced: the Java side frees
// the shared keys with a plain DEL, which no Watch reports, so waiters look
// again at their own interval.
func (s *Store) ReleasesUnannounced() bool { return true }

// Watch implements backend.Store. Releases by baton's instances are
// announced at once; the Java side announces nothing, so its releases
// and expiries are seen when the waiter looks again at the holder's TTL
// or its own poll (see the package doc).
func (s *Store) Watch(ctx context.Context, key string) (backend.Watch, error) {
	if err := s.begin(ctx, "watch", key, nil); err != nil {
		return nil, err
	}
	return s.baton.Watch(ctx, key)
}

// Heartbeat implements backend.Registry in baton's own layout: the Java
// side keeps no member list.
func (s *Store) Heartbeat(ctx context.Context, group string, m backend.Member, ttl time.Duration) ([]string, error) {
	return s.baton.Heartbeat(ctx, group, m, ttl)
}

// Members implements backend.Registry.
func (s *Store) Members(ctx context.Context, group string) ([]backend.Member, error) {
	return s.baton.Members(ctx, group)
}

// MemberEntry implements backend.MemberLocator, in baton's own layout.
func (s *Store) MemberEntry(group, name string) string {
	return s.baton.MemberEntry(group, name)
}

// Leave implements backend.Registry.
func (s *Store) Leave(ctx context.Context, group, name string) error {
	return s.baton.Leave(ctx, group, name)
}

func status(res []any) string {
	if len(res) == 0 {
		return ""
	}
	st, _ := res[0].(string)
	return st
}

// token reads the fencing token at res[i] (backend.ParseToken).
func token(res []any, i int) (uint64, bool) {
	if len(res) <= i {
		return 0, false
	}
	str, _ := res[i].(string)
	return backend.ParseToken(str)
}

// checkRecord returns the error of a record of key whose token tok no
// grant can have made by the server's clock nowUS
// (backend.CheckStoredToken), naming the record's Redis key; nil if tok
// is sound.
func (s *Store) checkRecord(op, key string, sh shared, tok uint64, nowUS int64) error {
	if err := backend.CheckStoredToken("record "+s.keys(sh)[1], tok, nowUS); err != nil {
		return fmt.Errorf("springredis: %s %q: %w", op, key, err)
	}
	return nil
}

func (s *Store) unexpected(op, key string, sh shared, res any) error {
	return fmt.Errorf("springredis: %s %q (%s): unexpected reply %s", op, key, sh.redis, backend.Printable(fmt.Sprintf("%.80v", res)))
}

func (s *Store) transport(op, key string, sh shared, ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, backend.ContextError(ctx))
	}
	return fmt.Errorf("springredis: %s %q (Redis key %s): %w", op, key, sh.redis, err)
}
