package consulbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
	hide "github.com/baton-go/baton/internal/redact"
)

// DefaultPrefix is the KV prefix used when none is given.
const DefaultPrefix = "baton"

// DefaultSessionTTLMin is Consul's own session_ttl_min: the shortest
// session TTL a server accepts unless it was configured otherwise.
const DefaultSessionTTLMin = 10 * time.Second

// MaxSessionTTL is the longest session TTL Consul accepts.
const MaxSessionTTL = 24 * time.Hour

// grantAttempts bounds how often Acquire reads and tries again when
// another client changed the key's fencing counter between its read and
// its write.
const grantAttempts = 16

// Store is a backend.Store on Consul's KV store and sessions. Create it
// with New; call Close when done. The client is not closed by Close.
type Store struct {
	kv      *api.KV
	raw     *api.Raw
	session *api.Session
	txn     *api.Txn
	addr    string // the agent's address, for errors

	prefix    string
	ttlMin    time.Duration
	guard     time.Duration // WithRestartGuard; negative: WithoutRestartGuard
	lockDelay time.Duration
	now       func() time.Time

	counterKeep time.Duration // WithCounterKeep
	keep        keepers

	afterLook func() // tests: runs between a release's, dequeue's or break's read and its write

	mu       sync.Mutex
	done     bool
	watches  sync.WaitGroup // the watches' goroutines
	keeps    sync.WaitGroup // endKeep's timers that have not ended
	cleanups sync.WaitGroup // destroyLater
	timers   map[*time.Timer]struct{}
	known    map[string]*known          // what the store knows of leases it holds, by key (known.go)
	joins    map[string]joined          // where waiters\' joins left their places (queue.go)
	idle     map[time.Duration][]string // idle sessions by TTL (sessions.go)
	base     context.Context            // the watches' contexts derive from it
	closeFn  context.CancelFunc         // ends base: Close
}

// Option configures a Store.
type Option func(*Store) error

// WithPrefix sets the KV prefix under which the store keeps its data
// (default "baton"). Stores with different prefixes never see each
// other's leases. The prefix holds only letters, digits and - _ . : /
// (backend.ValidateKeyPrefix), and neither starts nor ends with /.
func WithPrefix(prefix string) Option {
	return func(s *Store) error {
		if err := backend.ValidateKeyPrefix(prefix); err != nil {
			return fmt.Errorf("consulbackend: WithPrefix: %w", err)
		}
		if strings.HasPrefix(prefix, "/") || strings.HasSuffix(prefix, "/") {
			return fmt.Errorf("consulbackend: WithPrefix: %w: the key prefix %q must neither start nor end with /", backend.ErrInvalidArgument, prefix)
		}
		s.prefix = prefix
		return nil
	}
}

// WithSessionTTLMin tells the store the shortest session TTL the Consul
// servers accept: their session_ttl_min, 10 s unless they were configured
// otherwise. A lease or keep time shorter than this is refused with
// ErrInvalidArgument before anything is sent, instead of failing on the
// server.
func WithSessionTTLMin(d time.Duration) Option {
	return func(s *Store) error {
		if d < time.Millisecond || d > MaxSessionTTL {
			return fmt.Errorf("consulbackend: %w: session TTL minimum %v must be in [1ms, %v]", backend.ErrInvalidArgument, d, MaxSessionTTL)
		}
		s.ttlMin = d
		return nil
	}
}

// WithLockDelay sets the lock-delay of the store's sessions (default 0).
// When Consul invalidates a session that holds a lease (its TTL ran out,
// or an operator destroyed it), it refuses the key to everyone for this
// long afterwards, on top of the session's TTL: extra time for a holder
// that was paused to notice that its lease ended. Releases are not
// delayed. At most 60 s (Consul's maximum).
func WithLockDelay(d time.Duration) Option {
	return func(s *Store) error {
		if d < 0 || d > time.Minute {
			return fmt.Errorf("consulbackend: %w: lock delay %v must be in [0, 1m]", backend.ErrInvalidArgument, d)
		}
		s.lockDelay = d
		return nil
	}
}

// StoreName returns "consul": the kind of store, for logs
// (backend.StoreName).
func (s *Store) StoreName() string { return "consul" }

// New returns a Store that talks to the Consul agent cfg describes
// (address, datacenter, ACL token, TLS; nil means api.DefaultConfig, which
// reads CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN and the like). The store makes
// its own client from a copy of cfg, so its long-polling watches never
// hold connections of a client the caller uses. It does not talk to
// Consul until it is used.
func New(cfg *api.Config, opts ...Option) (*Store, error) {
	if cfg == nil {
		cfg = api.DefaultConfig()
	}
	c := *cfg
	if err := checkAddress(c.Address); err != nil {
		return nil, err
	}
	client, err := api.NewClient(&c)
	if err != nil {
		return nil, fmt.Errorf("consulbackend: %w: client for the agent at %s: %v", backend.ErrInvalidArgument, c.Address, err)
	}
	s := &Store{
		kv:          client.KV(),
		raw:         client.Raw(),
		session:     client.Session(),
		txn:         client.Txn(),
		prefix:      DefaultPrefix,
		ttlMin:      DefaultSessionTTLMin,
		counterKeep: DefaultCounterKeep,
		now:         time.Now,
		timers:      make(map[*time.Timer]struct{}),
		idle:        make(map[time.Duration][]string),
		known:       make(map[string]*known),
		joins:       make(map[string]joined),
	}
	s.base, s.closeFn = context.WithCancel(context.Background())
	s.addr = c.Address
	if c.Scheme != "" {
		s.addr = c.Scheme + "://" + c.Address
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// checkAddress refuses an agent address that holds credentials, which
// the Consul client would take for part of the host, and which messages
// would show; the error shows the address with the password redacted.
func checkAddress(addr string) error {
	if !hide.HasUserinfo(addr) {
		return nil
	}
	return fmt.Errorf("consulbackend: %w: the agent's address %q holds credentials: write it without them, and give the ACL token in "+
		"api.Config.Token (config key consul.token) or HTTP basic auth in api.Config.HttpAuth", backend.ErrInvalidArgument, hide.Userinfo(addr))
}

// Close ends the store's watches and waits for their goroutines, and
// destroys its idle sessions (sessions.go). Leases the store granted are
// left to their sessions' TTLs, kept job locks included (see Release). It
// is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	s.done = true
	s.closeFn()
	for t := range s.timers {
		if t.Stop() {
			s.keeps.Done()
		}
	}
	clear(s.timers)
	clear(s.known)
	clear(s.joins)
	s.mu.Unlock()
	s.watches.Wait()
	s.keeps.Wait()
	s.cleanups.Wait()
	s.dropIdle()
	return nil
}

// Prefix returns the KV prefix of the store.
func (s *Store) Prefix() string { return s.prefix }

// LeaseKey returns the Consul KV key that holds the lease on key.
func (s *Store) LeaseKey(key string) string { return s.prefix + "/lease/" + key }

// FenceKey returns the Consul KV key that holds key's fencing counter.
func (s *Store) FenceKey(key string) string { return s.prefix + "/fence/" + key }

// record is the JSON value of a lease key.
type record struct {
	Owner string `json:"owner"`
	Token uint64 `json:"token"`
	// TTLMillis is the TTL the lease was last given (or the keep time).
	TTLMillis int64 `json:"ttl_ms"`
	// Kept marks a lease released with a keep time: it can no longer be
	// renewed.
	Kept bool `json:"kept,omitempty"`
	// Next and Released tell the holder of a lease handed over to it who
	// waits behind it, and the counter's release mark (see known.go).
	Next     []nextPlace `json:"next,omitempty"`
	Released uint64      `json:"released,omitempty"`
	// Mark changes with every renewal (and with a waiter that joins the
	// line while the key has no counter, see joinLine): Consul skips a
	// write that changes nothing, and these writes must change the key's
	// index, so that watchers see the renewal and a release that read the
	// line before the join retries.
	Mark uint64 `json:"mark,omitempty"`
}

// marked returns r with the next Mark.
func (r record) marked() record {
	r.Mark++
	return r
}

func (r record) lease(key string) backend.Lease {
	return backend.Lease{Key: key, Owner: r.Owner, Token: r.Token, TTL: time.Duration(r.TTLMillis) * time.Millisecond}
}

// entry is a lease key as read: its record and the KV indexes.
type entry struct {
	rec     record
	session string
	index   uint64 // ModifyIndex
}

func (s *Store) decodeRecord(key string, p *api.KVPair) (record, error) {
	var r record
	if err := json.Unmarshal(p.Value, &r); err != nil {
		return record{}, fmt.Errorf("consulbackend: lease of %q at %s: %w: not a baton lease: %s", key, backend.Printable(p.Key), backend.ErrCorrupt, backend.Printable(err.Error()))
	}
	if err := backend.ValidateOwner(r.Owner); err != nil || r.Token == 0 || r.Token > backend.MaxToken ||
		r.TTLMillis <= 0 || r.TTLMillis > backend.MaxTTL.Milliseconds() {
		return record{}, fmt.Errorf("consulbackend: lease of %q at %s: %w: owner %q, token %d, ttl %d ms is not a baton lease",
			key, backend.Printable(p.Key), backend.ErrCorrupt, r.Owner, r.Token, r.TTLMillis)
	}
	if err := s.checkNext(r.Next); err != nil {
		return record{}, fmt.Errorf("consulbackend: lease of %q at %s: %w: %s", key, backend.Printable(p.Key), backend.ErrCorrupt, backend.Printable(err.Error()))
	}
	return r, nil
}

// encodeJSON encodes one of the store's records (a lease, a place in
// line).
func encodeJSON(r any) []byte {
	b, _ := json.Marshal(r) // structs of strings, numbers and bools cannot fail
	return b
}

// parseCounter reads a fencing counter's value.
func parseCounter(key string, p *api.KVPair) (uint64, error) {
	if p == nil {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(p.Value), 10, 64)
	if err != nil || n > backend.MaxToken {
		return 0, fmt.Errorf("consulbackend: fencing counter of %q at %s: %w: %.40q is not a token", key, backend.Printable(p.Key), backend.ErrCorrupt, p.Value)
	}
	return n, nil
}

func (s *Store) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *Store) begin(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("consulbackend: %s %q: %w", op, key, backend.ContextError(ctx))
	}
	if s.closed() {
		return fmt.Errorf("consulbackend: %s %q: %w", op, key, backend.ErrClosed)
	}
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("consulbackend: %s: %w", op, err)
	}
	return nil
}

// validateSessionTTL checks a ttl or keep time against what Consul's
// sessions can hold.
func (s *Store) validateSessionTTL(what string, d time.Duration) error {
	if err := backend.ValidateTTL(what, d); err != nil {
		return err
	}
	if d = backend.RoundUpMillis(d); d < s.ttlMin || d > MaxSessionTTL {
		return fmt.Errorf("%w: %s %v is outside what a Consul session can hold, [%v, %v]: a lease on Consul lasts at least the servers' session_ttl_min (WithSessionTTLMin)",
			backend.ErrInvalidArgument, what, d, s.ttlMin, MaxSessionTTL)
	}
	return nil
}

// Acquire implements backend.Store.
//
// It reads the key and its fencing counter, creates a session with the
// lease's TTL, and in one transaction moves the counter to the new token
// (only if nobody changed it since the read) and locks the key with the
// session. A refused grant destroys the session.
func (s *Store) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if err := s.begin(ctx, "acquire", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), s.validateSessionTTL("ttl", ttl), backend.ValidateFloor(floor)); err != nil {
		return backend.Lease{}, fmt.Errorf("consulbackend: acquire: %w", err)
	}
	ttl = backend.RoundUpMillis(ttl)
	for attempt := range grantAttempts {
		l, retry, err := s.grant(ctx, key, owner, ttl, floor)
		if !retry {
			return l, err
		}
		// Another client changed the key or its counter between this
		// read and this write: a grant, or a release marking the
		// counter. Look again, after a short random pause once it has
		// happened a few times, so that racing clients spread out.
		if !backoff(ctx, attempt) {
			return backend.Lease{}, fmt.Errorf("consulbackend: acquire %q: %w", key, backend.ContextError(ctx))
		}
	}
	// Every attempt lost the counter to another client: the key is
	// very likely held now; say by whom.
	cur, err := s.read(ctx, "acquire", key)
	if err != nil {
		return backend.Lease{}, err
	}
	if cur == nil {
		return backend.Lease{}, fmt.Errorf("consulbackend: acquire %q: the key or its fencing counter changed under %d attempts in a row; try again", key, grantAttempts)
	}
	return backend.Lease{}, &backend.HeldError{Holder: cur.rec.lease(key)}
}

// grant makes one attempt of Acquire. retry reports that another
// client changed the counter or took the key between the read and the
// write, so the caller should read again.
func (s *Store) grant(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (l backend.Lease, retry bool, err error) {
	st, err := s.look(ctx, "acquire", key, false)
	if err != nil {
		return backend.Lease{}, false, err
	}
	if st.lease != nil {
		return backend.Lease{}, false, &backend.HeldError{Holder: st.lease.rec.lease(key)}
	}
	l, _, retry, err = s.take(ctx, "acquire", key, st, owner, ttl, floor, nil, "", record{}, nil)
	return l, retry, err
}

// take grants key to owner: it moves the counter st read to the next
// token and locks the key with a session of ttl, in one transaction with
// the extra operations that holds only if the key and its counter are as
// st read them. The session is sess, one the waiter owner made for its
// lease when it joined the line, or, if sess is empty or Consul ended it,
// one of the store's (sessionFor). A lease st found on the key (its
// holder's release handing the key over, or a lease key without a
// session) is replaced. retry reports that something changed since the
// read; a session of the store's is then kept idle.
//
// carry's Next and Released (see known.go) are written into the lease.
// It also returns what it wrote.
//
// With to, the place of the waiter owner, that place is marked handed
// (handPlace) instead of being left or deleted.
func (s *Store) take(ctx context.Context, op, key string, st *state, owner string, ttl time.Duration, floor uint64, extra api.TxnOps, sess string, carry record, to *place) (l backend.Lease, w *known, retry bool, err error) {
	var guardOps api.TxnOps
	if st.fenceKV == nil && s.guard >= 0 {
		// No counter: a new key, or a Consul that lost its data.
		var err error
		if guardOps, err = s.guardFresh(ctx, key, owner, ttl, st.bootedKV, st.recoveringKV); err != nil {
			return backend.Lease{}, nil, false, err
		}
	}
	counter, err := parseCounter(key, st.fenceKV)
	if err != nil {
		return backend.Lease{}, nil, false, err
	}
	token, err := s.nextToken(key, counter, floor)
	if err != nil {
		return backend.Lease{}, nil, false, err
	}
	keeper, err := s.counterKeeper(ctx, op, key, token, ttl)
	if err != nil {
		return backend.Lease{}, nil, false, err
	}
	rec := record{Owner: owner, Token: token, TTLMillis: ttl.Milliseconds(), Next: carry.Next, Released: carry.Released}
	ops := s.setCounter(key, st.fenceKV, token, keeper, st.lease == nil)
	if st.fenceKV == nil && st.bootedKV != nil {
		// The guard let a key without a counter through because the
		// store had not lost its data: grant only if that still holds.
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.BootedKey(key), Index: st.bootedKV.ModifyIndex}})
	}
	if st.leaseKV != nil {
		// Replace the lease key only as it was read.
		ops = append(ops,
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: st.leaseKV.ModifyIndex}},
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.LeaseKey(key)}})
	}
	ops = append(append(ops, guardOps...), extra...)
	for {
		own := sess == ""
		if own {
			if sess, err = s.sessionFor(ctx, op, key, ttl); err != nil {
				return backend.Lease{}, nil, false, err
			}
		}
		all := ops[:len(ops):len(ops)]
		if to != nil {
			all = append(all, s.handPlace(key, to.owner, to.index, to.rec, to.session, token, sess, carry)...)
		}
		all = append(all, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.LeaseKey(key), Value: encodeJSON(rec), Session: sess}})
		ok, resp, _, err := s.txn.Txn(all, s.queryOpts(ctx))
		if err == nil && ok {
			return rec.lease(key), s.written(key, rec, sess, resp.Results), false, nil
		}
		if err != nil {
			if own {
				s.destroyLater(sess) // the grant may have been made: end it
			}
			return backend.Lease{}, nil, false, s.transport(op, key, ctx, err)
		}
		if own {
			s.putIdle(ttl, sess)
		}
		if len(resp.Errors) == 0 {
			return backend.Lease{}, nil, false, s.txnFailed(op, key, resp)
		}
		ended := false
		for _, e := range resp.Errors {
			// The keeper session ended (Consul lost its data, or an
			// operator destroyed it): make another.
			s.keeperEnded(keeper, e.What)
			if !own && strings.Contains(e.What, sess) {
				ended = true
			}
			if strings.Contains(e.What, "lock delay") {
				// The key's last session was invalidated while it held
				// the key: Consul refuses it to everyone for the
				// session's lock-delay.
				return backend.Lease{}, nil, false, &backend.HeldError{Holder: backend.Lease{Key: key, TTL: max(s.lockDelay, time.Second)}, Recovering: true}
			}
		}
		if !ended {
			return backend.Lease{}, nil, true, nil
		}
		// The waiter's session ended while it waited (it waited longer
		// than its ttl allows without asking again): use the store's.
		sess = ""
	}
}

// backoff pauses before attempt+1 of a write that lost a race: not at
// first, then for a random time that grows with attempt, so that racing
// clients spread out. It reports false if ctx ended first.
func backoff(ctx context.Context, attempt int) bool {
	if attempt < 2 {
		return true
	}
	return sleepCtx(ctx, time.Duration(mrand.Int64N(int64(min(time.Millisecond<<attempt, 50*time.Millisecond)))))
}

// nextToken is the fencing rule (backend.FenceToken) on this client's
// clock: max(counter, floor, the clock in µs) + 1, refused for a floor at
// or beyond the clock's backend.TokenLimit (ErrFloorAhead), a counter
// beyond it or at the largest token (ErrCorrupt).
func (s *Store) nextToken(key string, counter, floor uint64) (uint64, error) {
	t, err := backend.FenceToken(key, s.FenceKey(key), counter, floor, s.now().UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("consulbackend: acquire: %w", err)
	}
	return t, nil
}

// present returns p unless it is the empty pair of a get-or-empty read of
// a missing key.
func present(p *api.KVPair) *api.KVPair {
	if p == nil || p.ModifyIndex == 0 {
		return nil
	}
	return p
}

// createSession creates the session of one lease (or place in line, or
// member), named after whom it is for: TTL ttl, the store's lock-delay,
// keys deleted when it ends, and no health checks, so that only its TTL
// (or a release) ends it, never a flapping agent.
func (s *Store) createSession(ctx context.Context, op, key, whom string, ttl time.Duration) (string, error) {
	return s.newSession(ctx, op, key, whom, ttl, s.lockDelay)
}

// newSession is createSession with the given lock-delay.
func (s *Store) newSession(ctx context.Context, op, key, whom string, ttl, lockDelay time.Duration) (string, error) {
	// The body is written out here because the client's helpers leave
	// out a zero LockDelay, which the agent reads as its default of 15 s.
	body := map[string]any{
		"Name":       "baton " + whom,
		"TTL":        ttl.String(),
		"Behavior":   api.SessionBehaviorDelete,
		"LockDelay":  lockDelay.String(),
		"NodeChecks": []string{},
	}
	var out struct{ ID string }
	if _, err := s.raw.Write("/v1/session/create", body, &out, s.writeOpts(ctx)); err != nil {
		return "", s.transport(op, key, ctx, fmt.Errorf("create session: %w", err))
	}
	if out.ID == "" {
		return "", fmt.Errorf("consulbackend: %s %q: the agent at %s created a session without an ID", op, key, s.addr)
	}
	return out.ID, nil
}

// destroyLater ends sessions that no longer hold anything (a released
// lease's, a place's that left the line), off the caller's path. Close
// waits for it.
func (s *Store) destroyLater(ids ...string) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		for _, id := range ids {
			s.destroySession(context.Background(), id)
		}
		return
	}
	s.cleanups.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.cleanups.Done()
		for _, id := range ids {
			s.destroySession(context.Background(), id)
		}
	}()
}

// destroySession ends a session the store no longer needs, also after ctx
// ended; a failure leaves it to its TTL.
func (s *Store) destroySession(ctx context.Context, id string) {
	if id == "" {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.session.Destroy(id, (&api.WriteOptions{}).WithContext(dctx))
}

// read returns the lease on key, or nil if it is free.
func (s *Store) read(ctx context.Context, op, key string) (*entry, error) {
	p, _, err := s.kv.Get(s.LeaseKey(key), s.queryOpts(ctx))
	if err != nil {
		return nil, s.transport(op, key, ctx, err)
	}
	return s.entry(key, p)
}

// entry decodes the lease key p of key, or returns nil if it holds no
// lease (absent, or its session ended).
func (s *Store) entry(key string, p *api.KVPair) (*entry, error) {
	if p == nil || p.Session == "" {
		return nil, nil
	}
	rec, err := s.decodeRecord(key, p)
	if err != nil {
		return nil, err
	}
	if now := s.now().UnixMicro(); backend.TokenAhead(rec.Token, now) {
		return nil, fmt.Errorf("consulbackend: lease of %q at %s: %w: token %d is more than %v ahead of the clock (%d µs): no grant made it (forged, or written by a process whose clock was ahead); delete the key",
			key, p.Key, backend.ErrCorrupt, rec.Token, backend.MaxTokenLead, now)
	}
	return &entry{rec: rec, session: p.Session, index: p.ModifyIndex}, nil
}

// Renew implements backend.Store. It renews the lease's session, which
// Consul then keeps for at least ttl, and rewrites the lease key with its next mark,
// so that watchers see the renewal (EventRenewed). A lease cannot change
// its TTL on Consul: a ttl other than the one granted moves the lease to
// a new session with that TTL.
func (s *Store) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if err := s.begin(ctx, "renew", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), s.validateSessionTTL("ttl", ttl)); err != nil {
		return backend.Lease{}, fmt.Errorf("consulbackend: renew: %w", err)
	}
	ttl = backend.RoundUpMillis(ttl)
	s.forget(key) // the lease changes: its release reads it first
	cur, err := s.read(ctx, "renew", key)
	if err != nil {
		return backend.Lease{}, err
	}
	if cur == nil || cur.rec.Owner != owner || cur.rec.Kept {
		return backend.Lease{}, notHeld(key, owner, cur)
	}
	if cur.rec.TTLMillis != ttl.Milliseconds() {
		moved, err := s.move(ctx, "renew", key, cur, record{Owner: owner, Token: cur.rec.Token, TTLMillis: ttl.Milliseconds()}, ttl)
		if err != nil {
			return backend.Lease{}, err
		}
		return moved.rec.lease(key), nil
	}
	entries, _, err := s.session.Renew(cur.session, s.writeOpts(ctx))
	if err != nil {
		return backend.Lease{}, s.transport("renew", key, ctx, fmt.Errorf("renew session: %w", err))
	}
	if entries == nil {
		// The session ended between the read and the renewal: the
		// lease is gone (or going) with it.
		return backend.Lease{}, notHeld(key, owner, nil)
	}
	// Rewrite the lease with its next mark (Consul skips a write that
	// changes nothing), so that watchers learn of the renewal
	// (EventRenewed) and count their wait from it: a session renewal
	// alone changes nothing they can see.
	ok, resp, _, err := s.txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: cur.index}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.LeaseKey(key), Value: encodeJSON(cur.rec.marked()), Session: cur.session}},
	}, s.queryOpts(ctx))
	if err != nil {
		return backend.Lease{}, s.transport("renew", key, ctx, err)
	}
	if !ok {
		if len(resp.Errors) == 0 {
			return backend.Lease{}, s.txnFailed("renew", key, resp)
		}
		// The lease changed since it was read (released, moved, or a
		// racing renewal of the same owner rewrote it): judge by what
		// is there now.
		now, err := s.read(ctx, "renew", key)
		if err != nil {
			return backend.Lease{}, err
		}
		if now == nil || now.rec.Owner != owner || now.rec.Kept || now.session != cur.session {
			return backend.Lease{}, notHeld(key, owner, now)
		}
	}
	return cur.rec.lease(key), nil
}

// move puts the lease cur on a new session of ttl with the record rec, in
// one transaction that fails if the lease changed since it was read, and
// destroys the old session. It serves a Renew with another ttl and a
// Release with a keep time.
func (s *Store) move(ctx context.Context, op, key string, cur *entry, rec record, ttl time.Duration) (*entry, error) {
	sess, err := s.createSession(ctx, op, key, rec.Owner, ttl)
	if err != nil {
		return nil, err
	}
	ok, resp, _, err := s.txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: cur.index}},
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: s.LeaseKey(key), Session: cur.session}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.LeaseKey(key)}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.LeaseKey(key), Value: encodeJSON(rec), Session: sess}},
	}, s.queryOpts(ctx))
	if err != nil || !ok {
		s.destroySession(ctx, sess)
		if err != nil {
			return nil, s.transport(op, key, ctx, err)
		}
		if len(resp.Errors) == 0 {
			return nil, s.txnFailed(op, key, resp)
		}
		// The lease changed or ended since it was read.
		now, err := s.read(ctx, op, key)
		if err != nil {
			return nil, err
		}
		return nil, notHeld(key, rec.Owner, now)
	}
	s.destroySession(ctx, cur.session)
	moved := &entry{rec: rec, session: sess}
	for _, r := range resp.Results {
		if r.KV != nil && r.KV.Key == s.LeaseKey(key) && r.KV.Session == sess {
			moved.index = r.KV.ModifyIndex
		}
	}
	return moved, nil
}

// endKeep ends the kept lease e on key keepFor from now, unless it changed
// by then: a Consul session may outlive its TTL by as much again, and a
// job lock kept with lockAtLeastFor must not skip the next run for that.
// Should this process stop first (Close), the session's TTL ends it.
func (s *Store) endKeep(key string, e *entry, keepFor time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || e.index == 0 {
		return
	}
	s.keeps.Add(1)
	var timer *time.Timer
	timer = time.AfterFunc(keepFor, func() {
		defer s.keeps.Done()
		s.mu.Lock()
		delete(s.timers, timer)
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.base, 10*time.Second)
		defer cancel()
		pair := &api.KVPair{Key: s.LeaseKey(key), ModifyIndex: e.index}
		if ok, _, err := s.kv.DeleteCAS(pair, s.writeOpts(ctx)); err == nil && ok {
			s.destroySession(ctx, e.session)
		}
	})
	s.timers[timer] = struct{}{}
}

// Release implements backend.Store.
func (s *Store) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	if err := s.begin(ctx, "release", key); err != nil {
		return err
	}
	if err := backend.ValidateOwner(owner); err != nil {
		return fmt.Errorf("consulbackend: release: %w", err)
	}
	if keepFor > 0 {
		if err := s.validateSessionTTL("keepFor", keepFor); err != nil {
			return fmt.Errorf("consulbackend: release: %w", err)
		}
		keepFor = backend.RoundUpMillis(keepFor)
	}
	if keepFor <= 0 {
		if done, err := s.releaseKnown(ctx, key, owner); done {
			return err
		}
		return s.release(ctx, key, owner, 1)
	}
	s.forget(key)
	cur, err := s.read(ctx, "release", key)
	if err != nil {
		return err
	}
	if cur == nil || cur.rec.Owner != owner {
		return notHeld(key, owner, cur)
	}
	if cur.rec.Kept {
		return nil // released with a keep time already: nothing changes
	}
	rec := record{Owner: owner, Token: cur.rec.Token, TTLMillis: keepFor.Milliseconds(), Kept: true}
	kept, err := s.move(ctx, "release", key, cur, rec, keepFor)
	if err != nil {
		return err
	}
	s.endKeep(key, kept, keepFor)
	return nil
}

// release ends owner's lease on key at once. With a live waiter in the
// key's line it hands the key to the first one (handOver). Otherwise it
// deletes the key, then keeps its session idle (sessions.go); the fencing
// counter's flags record the released token, which tells a watcher that
// this deletion was a release, not an expiry.
func (s *Store) release(ctx context.Context, key, owner string, attempt int) error {
	st, err := s.look(ctx, "release", key, true)
	if err != nil {
		return err
	}
	cur := st.lease
	if cur == nil || cur.rec.Owner != owner {
		return notHeld(key, owner, cur)
	}
	if s.afterLook != nil {
		s.afterLook()
	}
	if w := st.first(); w != nil {
		retry, err := s.handOver(ctx, "release", key, st, w, nil, s.dropHanded(key, owner, st))
		switch {
		case retry:
			// The lease, its counter or the line changed since they
			// were read (a renewal, a waiter that moved its place):
			// nothing was handed over, and the lease still holds.
			return s.releaseAgain(ctx, key, owner, attempt)
		case err == nil:
			s.putIdle(millis(cur.rec.TTLMillis), cur.session)
			s.droppedHanded(owner, st)
			return nil
		case !errors.Is(err, backend.ErrHeld) && !errors.Is(err, backend.ErrCorrupt):
			return err
		}
		// The waiter cannot be granted the key (its floor is at the
		// largest token, or the store is recovering): free it, and the
		// waiter asks again.
	}
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: cur.index}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.LeaseKey(key)}},
	}
	if fence := st.fenceKV; fence != nil {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.FenceKey(key), Value: fence.Value, Flags: cur.rec.Token, Index: fence.ModifyIndex}})
	}
	ops = append(ops, s.dropHanded(key, owner, st)...)
	ok, resp, _, err := s.txn.Txn(ops, s.queryOpts(ctx))
	if retry, err := s.txnRetry("release", key, ctx, ok, resp, err); err != nil {
		return err
	} else if retry {
		// The lease, the counter or the line changed since they were
		// read (a racing release, a waiter that joined): look again.
		return s.releaseAgain(ctx, key, owner, attempt)
	}
	s.putIdle(millis(cur.rec.TTLMillis), cur.session)
	s.droppedHanded(owner, st)
	return nil
}

// releaseAgain is release's next attempt after a race.
func (s *Store) releaseAgain(ctx context.Context, key, owner string, attempt int) error {
	if attempt >= grantAttempts {
		return fmt.Errorf("consulbackend: release %q: the key changed under %d attempts in a row; try again", key, grantAttempts)
	}
	if !backoff(ctx, attempt) {
		return fmt.Errorf("consulbackend: release %q: %w", key, backend.ContextError(ctx))
	}
	return s.release(ctx, key, owner, attempt+1)
}

// Get implements backend.Store. The lease's TTL is the one it was last
// given: Consul cannot tell how much of a session's TTL is left.
func (s *Store) Get(ctx context.Context, key string) (backend.Lease, error) {
	if err := s.begin(ctx, "get", key); err != nil {
		return backend.Lease{}, err
	}
	cur, err := s.read(ctx, "get", key)
	if err != nil {
		return backend.Lease{}, err
	}
	if cur == nil {
		return backend.Lease{}, fmt.Errorf("consulbackend: get %q: %w", key, backend.ErrNotFound)
	}
	return cur.rec.lease(key), nil
}

func notHeld(key, owner string, cur *entry) error {
	e := &backend.NotHeldError{Key: key, Owner: owner}
	if cur != nil {
		e.Holder = cur.rec.lease(key)
	}
	return e
}

// queryOpts are the options of a read or transaction: bound to ctx.
func (s *Store) queryOpts(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{}).WithContext(ctx)
}

func (s *Store) writeOpts(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{}).WithContext(ctx)
}

// txnFailed reports a transaction Consul refused for a reason that names
// no operation (nothing baton sends should get one).
func (s *Store) txnFailed(op, key string, resp *api.TxnResponse) error {
	var what []string
	if resp != nil {
		for _, e := range resp.Errors {
			what = append(what, fmt.Sprintf("op %d: %s", e.OpIndex, e.What))
		}
	}
	if len(what) == 0 {
		// Consul leaves out of a transaction's reply the reads its
		// token may not make, and says nothing more.
		return fmt.Errorf("consulbackend: %s %q: the agent at %s left entries out of the transaction's reply: the ACL token may not read them "+
			"(check consul.token: its policy must cover the keys of the service, as consulbackend.ACLPolicy's does)", op, key, s.addr)
	}
	return fmt.Errorf("consulbackend: %s %q: the agent at %s refused the transaction: %s", op, key, s.addr, strings.Join(what, "; "))
}

// transport wraps an error from the client, naming the agent. When ctx
// ended, the context's error is joined so errors.Is finds it.
func (s *Store) transport(op, key string, ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, backend.ContextError(ctx))
	}
	hint := ""
	var se api.StatusError
	msg := err.Error()
	switch {
	case strings.Contains(msg, "ACL not found"):
		// The token is unknown: an authentication failure, which
		// retrying does not cure.
		return fmt.Errorf("consulbackend: %s %q on the agent at %s: %w: the agent does not know the ACL token (check consul.token, api.Config.Token): %w",
			op, key, s.addr, backend.ErrAuth, err)
	case errors.As(err, &se) && se.Code == 403, strings.Contains(msg, "Permission denied"):
		hint = " (the ACL token lacks key:write on the service's keys or session:write: check consul.token and consulbackend.ACLPolicy)"
	case ctx.Err() == nil && !errors.As(err, &se) && !strings.Contains(msg, "Failed request") && !strings.Contains(msg, "Unexpected response code"):
		hint = " (is the Consul agent running and reachable there?)"
	}
	return fmt.Errorf("consulbackend: %s %q on the agent at %s%s: %w", op, key, s.addr, hint, err)
}
