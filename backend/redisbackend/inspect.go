package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

var _ backend.Inspector = (*Store)(nil)

// scanCount is the COUNT hint of each SCAN call of Leases.
const scanCount = 1000

// Leases implements backend.Inspector. It walks the server's keys with
// SCAN (MATCH on the prefix, TYPE string), on every master of a Cluster,
// skips the keys a store writes beside its leases (counters, lines,
// markers, mailboxes; member groups are not strings), and reads each
// lease and its line with one read-only script. Its cost therefore grows
// with the number of keys under the store's prefix, not only with the
// leases listed: it is for status pages and operators, not for a hot path.
// A key under the prefix that holds a string baton did not write makes it
// fail with backend.ErrCorrupt naming the key.
//
// A lease key written as a bare hash tag ("{invoice:42}") is the same
// Redis key as the same key without braces ("invoice:42"), and is listed
// without them unless prefix begins with a brace.
func (s *Store) Leases(ctx context.Context, prefix string) ([]backend.LeaseInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redisbackend: leases %q: %w", prefix, backend.ContextError(ctx))
	}
	if s.closed() {
		return nil, fmt.Errorf("redisbackend: leases %q: %w", prefix, backend.ErrClosed)
	}
	if err := backend.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("redisbackend: leases: %w", err)
	}
	names, err := s.scan(ctx, s.scanPatterns(prefix))
	if err != nil {
		return nil, fmt.Errorf("redisbackend: leases %q: scanning for keys: %w", prefix, s.aclError(joinContext(ctx, err)))
	}
	var out []backend.LeaseInfo
	seen := make(map[string]bool)
	for _, name := range names {
		key, ok := s.leaseName(name, prefix)
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		info, held, err := s.inspect(ctx, key)
		if err != nil {
			return nil, err
		}
		if held {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b backend.LeaseInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// scanPatterns returns the MATCH patterns that find the Redis keys of the
// lease keys beginning with prefix: a key with a hash tag is stored as
// "<store prefix>:key", one without as "<store prefix>:{key}".
func (s *Store) scanPatterns(prefix string) []string {
	p := s.prefix + ":" + globEscape(prefix) + "*"
	if prefix == "" || strings.IndexByte(prefix, '{') >= 0 {
		return []string{p}
	}
	return []string{p, s.prefix + ":{" + globEscape(prefix) + "*"}
}

// leaseName returns the lease key stored in the Redis key name if name can
// be one and the key begins with prefix.
func (s *Store) leaseName(name, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(name, s.prefix+":")
	if !ok || strings.IndexByte(rest, '{') < 0 {
		return "", false
	}
	for _, suffix := range reservedSuffixes {
		if strings.HasSuffix(rest, suffix) {
			return "", false
		}
	}
	candidates := []string{rest}
	if len(rest) > 2 && rest[0] == '{' && strings.IndexByte(rest, '}') == len(rest)-1 {
		// A bare hash tag: the key was given without braces, or with.
		candidates = []string{rest[1 : len(rest)-1], rest}
	}
	for _, key := range candidates {
		if strings.HasPrefix(key, prefix) && backend.ValidateKey(key) == nil {
			return key, true
		}
	}
	return "", false
}

// inspect reads the lease on key and the live waiters in its line; held is
// false when the key is free.
func (s *Store) inspect(ctx context.Context, key string) (info backend.LeaseInfo, held bool, err error) {
	res, err := s.run(ctx, s.scripts.inspect, key).Result()
	if err != nil {
		return backend.LeaseInfo{}, false, s.transport("leases", key, ctx, err)
	}
	r, err := parseReply("leases", key, res, backend.Lease{Key: key})
	if err != nil {
		return backend.LeaseInfo{}, false, err
	}
	switch r.status {
	case statusFree:
		return backend.LeaseInfo{}, false, nil
	case statusHeld:
	default:
		return backend.LeaseInfo{}, false, r.unexpected("leases", key)
	}
	info.Lease = r.lease
	arr, _ := res.([]any)
	for _, w := range arr[4:] {
		name, _ := w.(string)
		if err := backend.CheckStoredName("waiter", s.LeaseKey(key)+lineSuffix, name); err != nil {
			return backend.LeaseInfo{}, false, fmt.Errorf("redisbackend: leases %q: %w", key, err)
		}
		info.Waiters = append(info.Waiters, name)
	}
	return info, true, nil
}

// scan returns the names of the string keys that match one of patterns,
// on every master of a Cluster (or shard of a Ring), each name once.
func (s *Store) scan(ctx context.Context, patterns []string) ([]string, error) {
	var (
		mu    sync.Mutex
		names []string
	)
	each := func(ctx context.Context, c *redis.Client) error {
		for _, pattern := range patterns {
			var cursor uint64
			for {
				keys, next, err := c.ScanType(ctx, cursor, pattern, scanCount, "string").Result()
				if err != nil {
					return err
				}
				mu.Lock()
				names = append(names, keys...)
				mu.Unlock()
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		return nil
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, each)
	case *redis.Ring:
		err = c.ForEachShard(ctx, each)
	case *redis.Client:
		err = each(ctx, c)
	default:
		return nil, fmt.Errorf("%w: cannot scan the keys of a %T", errors.ErrUnsupported, s.rdb)
	}
	slices.Sort(names)
	return slices.Compact(names), err
}

// globEscape escapes the characters SCAN's MATCH gives a meaning to.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// joinContext joins ctx's error to err when ctx ended and err does not
// already say so.
func joinContext(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(err, backend.ContextError(ctx))
	}
	return err
}
