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

// scanCount is the COUNT hint of each SCAN call of Leases and
// LeasesUpTo: about how many slots of the server's key table one call
// visits, which bounds how long it holds the server (some 0.1 to 0.5 ms
// on a server with 200,000 keys).
const scanCount = 250

// scanBudget is how many SCAN calls LeasesUpTo makes at most for each
// pattern on each server: it visits about scanBudget * scanCount slots of
// the key table (10,000), whatever the number of keys, and then stops.
const scanBudget = 40

// Leases implements backend.Inspector. It walks the server's keys with
// SCAN (MATCH on the prefix, TYPE string), on every master of a Cluster,
// skips the keys a store writes beside its leases (counters, lines,
// markers, mailboxes; member groups are not strings), and reads each
// lease and its line with one read-only script. Its cost therefore grows
// with the number of keys on the server, not only with the leases
// listed: it is for operators' tools, not for a page read again and
// again (LeasesUpTo is).
// A key under the prefix that holds a string baton did not write makes it
// fail with backend.ErrCorrupt naming the key.
//
// A lease key written as a bare hash tag ("{invoice:42}") is the same
// Redis key as the same key without braces ("invoice:42"), and is listed
// without them unless prefix begins with a brace.
func (s *Store) Leases(ctx context.Context, prefix string) ([]backend.LeaseInfo, error) {
	l, err := s.list(ctx, "leases", prefix, 0, -1)
	return l.Leases, err
}

// LeasesUpTo implements backend.Inspector as Leases does, with its work
// bounded: Redis keeps no index of keys by prefix, so it makes at most
// scanBudget SCAN calls per pattern and server (each visits about
// scanCount slots of the key table, whichever keys they hold), takes the
// first limit lease keys by name among those it found, and reads them
// and at most waiters places of each one's line with one pipeline of
// read-only scripts (one place more tells whether more wait). More counts the other lease keys it found (by name:
// it does not read them); Partial says the scan stopped before the end of
// the key table, as it does on a server with more than about
// scanBudget * scanCount (10,000) keys, so that leases under the prefix may be
// missing from the list and from More. Its cost is a constant number of
// calls, whatever the number of keys.
func (s *Store) LeasesUpTo(ctx context.Context, prefix string, limit, waiters int) (backend.LeaseList, error) {
	if err := backend.ValidateLeaseLimits(limit, waiters); err != nil {
		return backend.LeaseList{}, fmt.Errorf("redisbackend: leases up to: %w", err)
	}
	return s.list(ctx, "leases up to", prefix, limit, waiters)
}

// list lists the leases under prefix: all of them (limit 0), or at most
// limit after a bounded scan; each with at most waiters places in line
// read (-1: all).
func (s *Store) list(ctx context.Context, op, prefix string, limit, waiters int) (backend.LeaseList, error) {
	if err := ctx.Err(); err != nil {
		return backend.LeaseList{}, fmt.Errorf("redisbackend: %s %q: %w", op, prefix, backend.ContextError(ctx))
	}
	if s.closed() {
		return backend.LeaseList{}, fmt.Errorf("redisbackend: %s %q: %w", op, prefix, backend.ErrClosed)
	}
	if err := backend.ValidatePrefix(prefix); err != nil {
		return backend.LeaseList{}, fmt.Errorf("redisbackend: %s: %w", op, err)
	}
	budget := 0
	if limit > 0 {
		budget = scanBudget
	}
	names, partial, err := s.scan(ctx, s.scanPatterns(prefix), budget)
	if err != nil {
		return backend.LeaseList{}, fmt.Errorf("redisbackend: %s %q: scanning for keys: %w", op, prefix, s.aclError(joinContext(ctx, err)))
	}
	keys := s.leaseNames(names, prefix)
	out := backend.LeaseList{Partial: partial}
	if limit > 0 && len(keys) > limit {
		keys, out.More = keys[:limit], len(keys)-limit
	}
	out.Leases, err = s.inspectAll(ctx, keys, waiters)
	return out, err
}

// leaseNames returns the lease keys beginning with prefix stored in the
// Redis keys names, sorted, each once.
func (s *Store) leaseNames(names []string, prefix string) []string {
	var keys []string
	for _, name := range names {
		if key, ok := s.leaseName(name, prefix); ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
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

// inspectBatch is how many scripts inspectAll sends in one pipeline.
const inspectBatch = 500

// inspectAll reads the leases on keys, each with at most places places
// of its line (-1: all), in pipelines of read-only scripts; free keys are
// left out.
func (s *Store) inspectAll(ctx context.Context, keys []string, places int) ([]backend.LeaseInfo, error) {
	var out []backend.LeaseInfo
	for batch := range slices.Chunk(keys, inspectBatch) {
		infos, err := s.inspectBatch(ctx, batch, places)
		if err != nil {
			return nil, err
		}
		out = append(out, infos...)
	}
	return out, nil
}

// inspectBatch is inspectAll for one pipeline.
func (s *Store) inspectBatch(ctx context.Context, keys []string, places int) ([]backend.LeaseInfo, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	for i, key := range keys {
		cmds[i] = s.scripts.inspect.send(ctx, pipe, s.leaseKeys(key), scriptArgs(s.settings, places)...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	var out []backend.LeaseInfo
	for i, key := range keys {
		res, err := cmds[i].Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			res, err = s.run(ctx, s.scripts.inspect, key, places).Result() // loads the script
		}
		if err != nil {
			return nil, s.transport("leases", key, ctx, err)
		}
		info, held, err := s.parseInspect(key, res)
		if err != nil {
			return nil, err
		}
		if held {
			out = append(out, info)
		}
	}
	return out, nil
}

// parseInspect reads the inspect script's reply for key: the holder's
// fields, 1 if places in line were left unread (else 0), then the live waiters
// among those read; held is false when the key is free.
func (s *Store) parseInspect(key string, res any) (info backend.LeaseInfo, held bool, err error) {
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
	var more int64 = -1
	if len(arr) > 4 {
		more, _ = arr[4].(int64)
	}
	if more != 0 && more != 1 {
		return backend.LeaseInfo{}, false, fmt.Errorf("redisbackend: leases %q: %w: script reply %v does not say whether places in line were left unread", key, backend.ErrCorrupt, arr)
	}
	info.MoreWaiting = more == 1
	for _, w := range arr[5:] {
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
// With a budget above 0 it makes at most budget SCAN calls per pattern
// and server; partial then says that one of them stopped before the end.
func (s *Store) scan(ctx context.Context, patterns []string, budget int) (names []string, partial bool, err error) {
	var mu sync.Mutex
	each := func(ctx context.Context, c *redis.Client) error {
		for _, pattern := range patterns {
			var cursor uint64
			for calls := 1; ; calls++ {
				keys, next, err := c.ScanType(ctx, cursor, pattern, scanCount, "string").Result()
				if err != nil {
					return err
				}
				mu.Lock()
				names = append(names, keys...)
				stop := next != 0 && calls == budget
				partial = partial || stop
				mu.Unlock()
				if cursor = next; cursor == 0 || stop {
					break
				}
			}
		}
		return nil
	}
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, each)
	case *redis.Ring:
		err = c.ForEachShard(ctx, each)
	case *redis.Client:
		err = each(ctx, c)
	default:
		return nil, false, fmt.Errorf("%w: cannot scan the keys of a %T", errors.ErrUnsupported, s.rdb)
	}
	return names, partial, err
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
