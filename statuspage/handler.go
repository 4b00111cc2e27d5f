package statuspage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
)

// Default settings of a Handler.
const (
	// DefaultTimeout bounds each store read of a request.
	DefaultTimeout = 2 * time.Second
	// DefaultRefresh is how often the page reloads itself, and how long
	// one read of the store serves every request.
	DefaultRefresh = 5 * time.Second
	// DefaultMaxLocks and DefaultMaxMembers bound the locks and the
	// members a status lists; it says how many more there are.
	DefaultMaxLocks   = 50
	DefaultMaxMembers = 50
)

// waitersShown bounds the waiters listed per lock; Lock.WaitersMore says
// when there are more.
const waitersShown = 5

var _ http.Handler = (*Handler)(nil)

// Handler serves the health and status of one instance of a service:
// /healthz, /status and the page. Create it with New. It starts no
// goroutine. /status and the page answer from one snapshot of the store,
// read at most once per refresh interval however many requests come
// (requests that come during the read share it); /healthz reads the role
// key on each request.
type Handler struct {
	store      backend.Store
	el         *role.Elector
	id         instanceid.ID // el's instance
	roleKey    string        // el's role key
	events     *Events
	prefix     string
	timeout    time.Duration
	refresh    time.Duration
	maxLocks   int
	maxMembers int
	now        func() time.Time
	snaps      snapshots
}

// Option configures a Handler.
type Option func(*Handler)

// WithEvents makes the page list the recent transitions and skipped jobs
// that ev records (see Events). Without it those lists are empty.
func WithEvents(ev *Events) Option {
	return func(h *Handler) { h.events = ev }
}

// WithLockPrefix sets the prefix of the lease keys the page lists as
// locks (default: the service's, backend.AppKey(tenant, app) + ":", which
// covers its synclock locks and schedlock job locks). The role key is
// never listed among them. New refuses the empty prefix, which would list
// the leases of every tenant and app that shares the store; a prefix
// outside the service's own keys is the caller's choice, and the page
// lists what is under it.
func WithLockPrefix(prefix string) Option {
	return func(h *Handler) { h.prefix = prefix }
}

// WithTimeout bounds each store read of a request (default
// DefaultTimeout).
func WithTimeout(d time.Duration) Option {
	return func(h *Handler) { h.timeout = d }
}

// WithRefresh sets how often the page reloads itself in the browser
// (default DefaultRefresh), which is also how long one read of the store
// serves /status and the page; 0 turns reloading off, and the read then
// serves for DefaultRefresh.
func WithRefresh(d time.Duration) Option {
	return func(h *Handler) { h.refresh = d }
}

// WithLimits bounds how many locks and how many members a status lists
// (defaults DefaultMaxLocks and DefaultMaxMembers; each at least 1). It
// counts the rest (Status.LocksMore, Status.MembersMore), so that the
// response and the store reads behind it stay small however many keys
// the store holds.
func WithLimits(locks, members int) Option {
	return func(h *Handler) { h.maxLocks, h.maxMembers = locks, members }
}

// New returns a Handler for the instance that el elects for, on store,
// the store el was made with (or another client of the same data): the
// page reads the role key, the members and the locks from it. Locks are
// listed when store implements backend.Inspector (redisbackend,
// consulbackend and membackend do).
func New(store backend.Store, el *role.Elector, opts ...Option) (*Handler, error) {
	if store == nil || el == nil {
		return nil, errors.New("statuspage: New needs the store and the elector")
	}
	st := el.Status()
	id, err := instanceid.Parse(st.Instance) // an elector's own ID always parses
	if err != nil {
		return nil, fmt.Errorf("statuspage: the elector's instance: %w", err)
	}
	h := &Handler{
		store:      store,
		el:         el,
		id:         id,
		roleKey:    st.Key,
		prefix:     backend.AppKey(id.Tenant, id.App) + ":",
		timeout:    DefaultTimeout,
		refresh:    DefaultRefresh,
		maxLocks:   DefaultMaxLocks,
		maxMembers: DefaultMaxMembers,
		now:        time.Now,
	}
	for _, o := range opts {
		o(h)
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	h.snaps.maxAge = h.refresh
	if h.refresh == 0 {
		h.snaps.maxAge = DefaultRefresh
	}
	return h, nil
}

func (h *Handler) validate() error {
	if h.timeout <= 0 {
		return fmt.Errorf("statuspage: %w: timeout %v must be positive", backend.ErrInvalidArgument, h.timeout)
	}
	if h.refresh < 0 {
		return fmt.Errorf("statuspage: %w: refresh %v must not be negative", backend.ErrInvalidArgument, h.refresh)
	}
	if h.maxLocks < 1 || h.maxMembers < 1 {
		return fmt.Errorf("statuspage: %w: WithLimits(%d, %d): a status lists at least 1 lock and 1 member", backend.ErrInvalidArgument, h.maxLocks, h.maxMembers)
	}
	if h.prefix == "" {
		return fmt.Errorf("statuspage: %w: WithLockPrefix(\"\") would list the leases of every tenant and app that shares the store; leave the option out to list this service's", backend.ErrInvalidArgument)
	}
	if err := backend.ValidatePrefix(h.prefix); err != nil {
		return fmt.Errorf("statuspage: lock %w", err)
	}
	return nil
}

// ServeHTTP serves, by the end of the request's path:
//
//	.../healthz   200 "ok", or 503 with one problem per line
//	.../status    the Status as JSON (200, or 503 when not healthy)
//	.../          the status page (HTML)
//
// Mount it under a path that ends in a slash, such as
// mux.Handle("/baton/", http.StripPrefix("/baton", h)): the page links
// to status and healthz relative to itself. Other paths get 404, methods
// other than GET and HEAD 405. HEAD of /status and the page reads
// nothing: it answers with the code of the last status read (200 before
// the first). Every response says X-Content-Type-Options: nosniff and
// Cache-Control: no-store.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	switch p := r.URL.Path; {
	case strings.HasSuffix(p, "/healthz") || p == "healthz":
		h.serveHealth(w, r)
	case strings.HasSuffix(p, "/status") || p == "status":
		h.serveStatus(w, r)
	case p == "" || strings.HasSuffix(p, "/"):
		h.servePage(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (h *Handler) serveHealth(w http.ResponseWriter, r *http.Request) {
	problems, _ := h.health(r.Context())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(problems) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, strings.Join(problems, "\n"))
		return
	}
	fmt.Fprintln(w, "ok")
}

func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodHead {
		if s, ok := h.snaps.latest(); ok && !s.Healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		return
	}
	s := h.Status(r.Context())
	body, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		http.Error(w, "statuspage: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if !s.Healthy {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	w.Write(append(body, '\n'))
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		return
	}
	s := h.Status(r.Context())
	var buf bytes.Buffer
	if err := page.Execute(&buf, pageData{Status: s, Refresh: refreshSeconds(h.refresh), Prefix: h.prefix}); err != nil {
		http.Error(w, "statuspage: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}
