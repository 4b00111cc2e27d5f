package consulbackend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// DefaultPrefix is the KV prefix used when none is given.
const DefaultPrefix = "baton"

// DefaultSessionTTLMin is Consul's own session_ttl_min: the shortest
// session TTL a server accepts unless it was configured otherwise.
const DefaultSessionTTLMin = 10 * time.Second

// MaxSessionTTL is the longest session TTL Consul accepts.
const MaxSessionTTL = 24 * time.Hour

var _ backend.Store = (*Store)(nil)

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
	lookups  sync.WaitGroup // lookAhead
	timers   map[*time.Timer]struct{}
	known    map[string]*known          // what the store knows of leases it holds, by key (known.go)
	joins    map[string]joined          // where waiters' joins left their places (join.go)
	lines    map[string]lineHint        // who waits behind a key this store handed over (join.go)
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
	// The store's replies are a few kilobytes at most: compressing them
	// costs the agent and the client more time than it saves.
	client.AddHeader("Accept-Encoding", "identity")
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
		lines:       make(map[string]lineHint),
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
	if !backend.HasUserinfo(addr) {
		return nil
	}
	return fmt.Errorf("consulbackend: %w: the agent's address %q holds credentials: write it without them, and give the ACL token in "+
		"api.Config.Token (config key consul.token) or HTTP basic auth in api.Config.HttpAuth", backend.ErrInvalidArgument, backend.HideUserinfo(addr))
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
	clear(s.lines)
	s.mu.Unlock()
	s.watches.Wait()
	s.keeps.Wait()
	s.cleanups.Wait()
	s.lookups.Wait()
	s.dropIdle()
	return nil
}

// Prefix returns the KV prefix of the store.
func (s *Store) Prefix() string { return s.prefix }

// LeaseKey returns the Consul KV key that holds the lease on key.
func (s *Store) LeaseKey(key string) string { return s.prefix + "/lease/" + key }

// FenceKey returns the Consul KV key that holds key's fencing counter.
func (s *Store) FenceKey(key string) string { return s.prefix + "/fence/" + key }

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

// txnRetry sorts out the answer to a write transaction: an error, a
// refusal because what it checked changed (retry), or success.
func (s *Store) txnRetry(op, key string, ctx context.Context, ok bool, resp *api.TxnResponse, err error) (retry bool, _ error) {
	switch {
	case err != nil:
		return false, s.transport(op, key, ctx, err)
	case ok:
		return false, nil
	case resp == nil || len(resp.Errors) == 0:
		return false, s.txnFailed(op, key, resp)
	}
	return true, nil
}
