package role

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/internal/lease"
)

// Elector takes part in the election of one service's master. Create it
// with NewElector, then call Run in a goroutine you own. All methods are
// safe for concurrent use.
type Elector struct {
	store  backend.Store
	id     instanceid.ID
	idText string
	owner  string // idText + "#" + per-process nonce
	key    string // the role key
	group  string // the member list
	cfg    Config

	clock  clock.Clock
	logger *slog.Logger
	ev     events // the callbacks and their queue

	terms   lease.Terms                  // the role key's lease terms (internal/lease)
	held    atomic.Pointer[lease.Holder] // the current tenure's holding, nil between tenures; stored under mu
	epoch   lease.Floor                  // highest role token seen: own tenure's while master
	running atomic.Bool

	mu          sync.Mutex // guards the fields below
	master      string     // last known master's instance ID
	since       time.Time
	lastErr     error
	lastErrAt   time.Time
	duplicate   string    // owner string of another live process with our ID
	duplicateAt time.Time // when it was last seen
	recovering  time.Time // until when the store's restart guard grants no role; see Status

	announcer Announcer     // WithAnnouncer
	kick      chan struct{} // tells the announcer, if any, the role changed
}

// NewElector returns an elector for the instance id on store. It checks
// the configuration and the ID, and starts nothing: call Run.
func NewElector(store backend.Store, id instanceid.ID, cfg Config, opts ...Option) (*Elector, error) {
	if store == nil {
		return nil, errors.New("role: nil store: pass a backend such as redisbackend.New(client)")
	}
	if err := id.Validate(); err != nil {
		return nil, fmt.Errorf("role: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var nonce [6]byte
	rand.Read(nonce[:]) // never fails (crypto/rand)
	e := &Elector{
		store:  store,
		id:     id,
		idText: id.String(),
		key:    backend.AppKey(id.Tenant, id.App, "role"),
		group:  backend.AppKey(id.Tenant, id.App, "members"),
		kick:   make(chan struct{}, 1),
		cfg:    cfg.WithDefaults(),
		clock:  clock.Real,
		logger: slog.Default(),
	}
	e.owner = e.idText + "#" + hex.EncodeToString(nonce[:])
	for _, o := range opts {
		o(e)
	}
	if err := backend.ValidateKey(e.key); err != nil {
		return nil, fmt.Errorf("role: tenant %q and app %q do not make a usable key: %w", id.Tenant, id.App, err)
	}
	if err := backend.ValidateOwner(e.owner); err != nil {
		return nil, fmt.Errorf("role: instance ID %q is not usable as an owner: %w", e.idText, err)
	}
	e.terms = lease.Terms{Store: store, Alarm: lease.NewAlarm(e.clock), Margin: e.cfg.SafetyMargin, OpTimeout: e.cfg.OperationTimeout}
	e.logger = e.logger.With("app", id.App, "tenant", id.Tenant, "instance", e.idText, "backend", backend.StoreName(store))
	return e, nil
}

// IsMaster reports whether this instance is master now: whether its
// tenure's deadline (see the package doc) lies ahead on the local
// monotonic clock, so an instance that wakes from a long pause never
// reports a stale true, and nothing makes it true again once it has read
// false in a tenure. It does no I/O, takes no lock and does not allocate.
func (e *Elector) IsMaster() bool {
	h := e.held.Load()
	return h != nil && h.Left() > 0
}

// IsLeader reports mastership in the form gocron.Elector expects: nil
// when this instance is master, ErrNotMaster otherwise.
func (e *Elector) IsLeader(context.Context) error {
	if e.IsMaster() {
		return nil
	}
	return ErrNotMaster
}

// Tenure returns the context (the one OnElected gets) and epoch of this
// instance's current tenure, and ok=false when this instance is not
// master: from the tenure's deadline on, even while a late renewal is
// still out.
func (e *Elector) Tenure() (ctx context.Context, epoch uint64, ok bool) {
	if h := e.held.Load(); h != nil && h.Left() > 0 { // Left reads 0 before the context ends
		return h.Context(), h.Token(), true
	}
	return nil, 0, false
}

// IsMasterOf reports whether instanceID is the master of app (in this
// elector's tenant), reading the role key from the store.
func (e *Elector) IsMasterOf(ctx context.Context, app, instanceID string) (bool, error) {
	key := backend.AppKey(e.id.Tenant, app, "role")
	if err := backend.ValidateKey(key); err != nil {
		return false, fmt.Errorf("role: app %q: %w", app, err)
	}
	owner, err := e.roleOwner(ctx, key)
	if err != nil {
		return false, fmt.Errorf("role: reading the master of app %q: %w", app, err)
	}
	return owner != "" && ownerID(owner) == instanceID, nil
}

// roleOwner reads the owner string held at the role key key, "" if none.
func (e *Elector) roleOwner(ctx context.Context, key string) (string, error) {
	l, err := e.store.Get(ctx, key)
	if errors.Is(err, backend.ErrNotFound) {
		return "", nil
	}
	return l.Owner, err
}

// Run takes part in the election until ctx ends, then ends the tenure, if
// any, and releases the role key at once for another instance to take
// over. It returns once that is done and the callbacks queued have run.
// A second Run of one elector while the first runs returns an error at
// once. With the role disabled it writes nothing and waits for ctx.
func (e *Elector) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: elector for %s", errRunning, e.idText)
	}
	defer e.running.Store(false)
	if e.cfg.Disabled {
		e.logger.Info("role election disabled (scheduler-lock.enabled=false): this instance is never master")
		<-ctx.Done()
		return nil
	}
	defer e.ev.idle.Wait() // until every callback queued has run
	var presence sync.WaitGroup
	defer presence.Wait()
	presence.Go(func() { e.presence(ctx) }) // ctx has ended when the campaign returns
	if e.announcer != nil {
		presence.Go(func() { e.announce(ctx) })
	}
	c := campaign{e: e}
	c.loop(ctx)
	c.report(Event{Kind: EventStopped})
	return nil
}

// ownerID returns the instance ID part of a role owner string.
func ownerID(owner string) string {
	if i := strings.LastIndexByte(owner, '#'); i >= 0 {
		return owner[:i]
	}
	return owner
}

type epochKey struct{}

// EpochFromContext returns the epoch of the tenure whose OnElected context
// ctx is (or derives from).
func EpochFromContext(ctx context.Context) (uint64, bool) {
	v, ok := ctx.Value(epochKey{}).(uint64)
	return v, ok
}
