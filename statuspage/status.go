package statuspage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/role"
)

// Status is what /status serves as JSON and the page shows: one
// instance's view of its service. Durations are whole milliseconds.
type Status struct {
	// Service is the tenant and app the instance serves.
	Service Service `json:"service"`
	// Instance is this instance's own view.
	Instance Instance `json:"instance"`
	// Healthy is false when Problems is not empty; /healthz then answers
	// 503.
	Healthy bool `json:"healthy"`
	// Problems say why this instance is not healthy: the elector is not
	// running, another live process claims its instance ID, or the store
	// cannot be reached.
	Problems []string `json:"problems,omitempty"`
	// Master is the service's master as the store has it, nil when
	// nobody holds the role or the store could not be read.
	Master *Master `json:"master"`
	// Members are the live instances of the service, sorted by owner: at
	// most the handler's limit (WithLimits), this instance and the master
	// among them when they are live.
	Members []Member `json:"members"`
	// MembersMore is how many more live members there are.
	MembersMore int `json:"members_more"`
	// MembersError says why Members could not be read, if so.
	MembersError string `json:"members_error,omitempty"`
	// Locks are the leases held under the page's lock prefix (the role
	// key aside), sorted by key: at most the handler's limit
	// (WithLimits).
	Locks []Lock `json:"locks"`
	// LocksMore is how many more held locks the store saw (by their
	// keys' names; a few may have just been freed). When LocksPartial is
	// true the store stopped looking before it had seen every key, to
	// bound its work (on Redis, a server with more than some ten thousand
	// keys): there may be more locks than LocksMore, and the listed ones
	// are those it came across.
	LocksMore    int  `json:"locks_more"`
	LocksPartial bool `json:"locks_partial"`
	// LocksError says why Locks could not be read, if so (for instance, a
	// store that does not implement backend.Inspector).
	LocksError string `json:"locks_error,omitempty"`
	// Transitions are recent role transitions and lock troubles seen by
	// this process, newest first (see Events).
	Transitions []Event `json:"transitions"`
	// Jobs are recent skipped jobs and job troubles seen by this process,
	// newest first (see Events).
	Jobs []Event `json:"jobs"`
	// GeneratedAt is when the status was read, on this process's clock.
	GeneratedAt time.Time `json:"generated_at"`
}

// Service names the service.
type Service struct {
	Tenant string `json:"tenant"`
	App    string `json:"app"`
}

// Instance is this instance's view, from role.Elector.Status.
type Instance struct {
	// ID is the instance ID.
	ID string `json:"id"`
	// Role is "master", "slave", "disabled" (the role feature is off) or
	// "stopped" (the elector does not run).
	Role string `json:"role"`
	// Since is when this instance last became master or slave; absent
	// when it has not yet (a slave that never saw a change of role).
	Since time.Time `json:"since,omitzero"`
	// Epoch is the highest role epoch this instance has seen.
	Epoch uint64 `json:"epoch"`
	// LastError is the elector's last store error, and LastErrorAt when
	// it happened; empty if none.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// Duplicate is the owner string of another live process that claims
	// this instance's ID, if the elector has seen one lately
	// (role.Status.Duplicate).
	Duplicate string `json:"duplicate,omitempty"`
	// RecoveringUntil is, while the store refuses the role to everyone
	// because it may have lost leases their holders still use (its
	// restart guard: it restarted without its data, lost it, or is new
	// to baton), when it said it grants the role again
	// (role.Status.RecoveringUntil), and RecoveringMillis how long that
	// is after GeneratedAt; both absent otherwise. Nobody is master
	// until then; the instance is not unhealthy for it.
	RecoveringUntil  *time.Time `json:"recovering_until,omitempty"`
	RecoveringMillis int64      `json:"recovering_ms,omitempty"`
}

// Master is the holder of the role key. batonctl's --output json shows
// the master in this shape too (MasterOf makes both).
type Master struct {
	// ID is the master's instance ID; Owner adds its process nonce.
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// Key is the role key, and StoreKey the key that holds it in the
	// store (see StoreKey): the Redis key with its prefix, or the Consul
	// KV path; absent when the store does not say.
	Key      string `json:"key"`
	StoreKey string `json:"store_key,omitempty"`
	// Epoch is the tenure's fencing token.
	Epoch uint64 `json:"epoch"`
	// LeaseMillis is what is left of the role key's lease (on Consul, the
	// TTL it was last given).
	LeaseMillis int64 `json:"lease_ms"`
	// Since is when this instance learned that the master took over, nil
	// if it did not see that happen (it started later, or keeps no
	// Events).
	Since *time.Time `json:"since,omitempty"`
	// HeldAtLeastMillis is a lower bound of the tenure's length read from
	// the epoch, which is at least the store's clock in µs when the
	// tenure began (see backend.Inspector); 0 when the epoch tells
	// nothing (it lies ahead of this process's clock).
	HeldAtLeastMillis int64 `json:"held_at_least_ms,omitempty"`
}

// Member is one live instance of the service, in /status and in
// batonctl's --output json (MemberOf makes both).
type Member struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// Master and Self say whether the member holds the role key and
	// whether it is this instance (always false in batonctl, which is no
	// instance).
	Master bool `json:"master"`
	Self   bool `json:"self"`
	// StartedAt is when the member's elector started, on its clock.
	StartedAt time.Time `json:"started_at,omitzero"`
	// LastHeartbeatMillis is how long ago the store received its last
	// heartbeat (Consul cannot tell: 0).
	LastHeartbeatMillis int64 `json:"last_heartbeat_ms"`
	// TTLMillis is how long the member stays listed without another
	// heartbeat; absent when the store does not say.
	TTLMillis int64 `json:"ttl_ms,omitempty"`
}

// Lock is one held lease under the page's lock prefix, in /status and
// in batonctl's --output json (LockOf makes both).
type Lock struct {
	// Key is the lease key; Kind is "lock" (synclock), "job" (schedlock)
	// or "other", and Name the key without the service's prefix and kind.
	Key  string `json:"key"`
	Kind string `json:"kind"`
	Name string `json:"name"`
	// StoreKey is the key that holds the lease in the store (see
	// StoreKey); absent when the store does not say.
	StoreKey string `json:"store_key,omitempty"`
	// Holder is the holder's instance ID (its owner string without the
	// process nonce); Owner is the owner string as stored.
	Holder string `json:"holder"`
	Owner  string `json:"owner"`
	// Token is the grant's fencing token.
	Token uint64 `json:"token"`
	// LeaseMillis is what is left of the lease (on Consul, the TTL it was
	// last given).
	LeaseMillis int64 `json:"lease_ms"`
	// HeldAtLeastMillis is a lower bound of how long the lease has been
	// held, read from its token; stores do not record when a lease was
	// granted. 0 when the token tells nothing.
	HeldAtLeastMillis int64 `json:"held_at_least_ms,omitempty"`
	// Waiters are the instances in the key's waiting line, first first
	// (see WaiterNames): at most a few on the page; WaitersMore says that
	// more wait.
	Waiters     []string `json:"waiters"`
	WaitersMore bool     `json:"waiters_more,omitempty"`
}

// health returns the problems that make this instance unhealthy, reading
// the role key once to see that the store answers; master is what it
// read, nil if the key is free or could not be read.
func (h *Handler) health(ctx context.Context) (problems []string, master *backend.Lease) {
	st := h.el.Status()
	if !st.Running {
		problems = append(problems, "the elector is not running")
	}
	if st.Duplicate != "" {
		problems = append(problems, fmt.Sprintf("duplicate instance ID: another live process (%s) claims %s; instance IDs must be unique (give one of them another host or port). If no such process runs, delete its entry: %s", st.Duplicate, st.Instance, st.DuplicateEntry))
	}
	rctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	l, err := h.store.Get(rctx, h.roleKey)
	switch {
	case err == nil:
		master = &l
	case errors.Is(err, backend.ErrAuth):
		problems = append(problems, "store refused the credentials: "+err.Error())
	case !errors.Is(err, backend.ErrNotFound):
		problems = append(problems, "store unreachable: "+err.Error())
	}
	return problems, master
}

// Status returns the status of the service as this instance sees it:
// its elector's view, the role key, the members, the locks and the
// recent events, as read at GeneratedAt, at most the refresh interval
// ago (WithRefresh). When the last read is older, Status reads again;
// calls that come during that read wait for it and share it. Each read
// asks the store three times (the role key, the members, the locks),
// each bounded by the handler's timeout and by its limits (WithLimits),
// not by ctx, which only bounds the wait; a part that cannot be read
// says why in the Status.
func (h *Handler) Status(ctx context.Context) Status {
	s, ok := h.snaps.get(ctx, h.read)
	if !ok {
		s = h.local(h.now(), []string{"the request ended before the status was read: " + backend.ContextError(ctx).Error()})
	}
	return s
}

// local returns the part of a Status that needs no store: the service,
// this instance's view and the recent events, with problems.
func (h *Handler) local(now time.Time, problems []string) Status {
	id := h.id
	s := Status{
		Service:     Service{Tenant: id.Tenant, App: id.App},
		Instance:    instanceOf(h.el.Status(), now),
		Healthy:     len(problems) == 0,
		Problems:    problems,
		Members:     []Member{},
		Locks:       []Lock{},
		Transitions: []Event{},
		Jobs:        []Event{},
		GeneratedAt: now,
	}
	if h.events != nil {
		s.Transitions, s.Jobs = h.events.Transitions(), h.events.Jobs()
	}
	return s
}

// read reads a new Status from the elector and the store.
func (h *Handler) read(ctx context.Context) Status {
	now := h.now()
	problems, held := h.health(ctx)
	s := h.local(now, problems)
	master := ""
	if held != nil {
		s.Master = h.masterOf(*held, h.el.Status(), s.Transitions, now)
		master = held.Owner
	}
	h.readMembers(ctx, &s, master)
	h.readLocks(ctx, &s, held != nil)
	return s
}

// readMembers fills in the members: at most h.maxMembers, this instance
// and the master among them when they are live. master is the role
// key's owner, "" if none.
func (h *Handler) readMembers(ctx context.Context, s *Status, master string) {
	mctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	ml, ok := h.store.(backend.MemberLister)
	if !ok {
		h.readAllMembers(mctx, s)
		return
	}
	id := h.id.String()
	first := []string{id}
	if master != "" {
		first = append(first, ownerID(master))
	}
	list, err := ml.MembersUpTo(mctx, backend.AppKey(h.id.Tenant, h.id.App, memberGroup), h.maxMembers, first...)
	if err != nil {
		s.MembersError = fmt.Sprintf("listing the members of %s/%s: %v", s.Service.Tenant, s.Service.App, err)
		return
	}
	dup := h.el.Status().Duplicate
	s.MembersMore = list.More
	for _, m := range list.Members {
		mb := MemberOf(m, master)
		mb.Self = m.Identity == id && m.Name != dup
		s.Members = append(s.Members, mb)
	}
}

// memberGroup is the last part of the key of the member group that
// role.Elector heartbeats in (backend.AppKey(tenant, app, memberGroup));
// TestStatus fails if the two part ways.
const memberGroup = "members"

// readAllMembers is readMembers for a store that cannot list a bounded
// part of a group: it reads them all (role.Elector.Members) and keeps
// this instance, the master and the first others by owner.
func (h *Handler) readAllMembers(ctx context.Context, s *Status) {
	members, err := h.el.Members(ctx)
	if err != nil {
		s.MembersError = err.Error()
	}
	keep := func(m role.Member) bool { return m.Self || m.Master }
	shown := slices.DeleteFunc(slices.Clone(members), func(m role.Member) bool { return !keep(m) })
	for _, m := range members {
		if len(shown) >= h.maxMembers {
			break
		}
		if !keep(m) {
			shown = append(shown, m)
		}
	}
	shown = shown[:min(len(shown), h.maxMembers)]
	slices.SortFunc(shown, func(a, b role.Member) int { return strings.Compare(a.Owner, b.Owner) })
	s.MembersMore = len(members) - len(shown)
	for _, m := range shown {
		s.Members = append(s.Members, Member{
			ID: m.ID, Owner: m.Owner, Master: m.Master, Self: m.Self,
			StartedAt: m.StartedAt, LastHeartbeatMillis: m.LastSeen.Milliseconds(),
		})
	}
}

// readLocks fills in the locks: at most h.maxLocks, the role key left
// out. roleHeld says whether the role key is held, and so may be among
// the keys the store counted but did not list.
func (h *Handler) readLocks(ctx context.Context, s *Status, roleHeld bool) {
	in, ok := h.store.(backend.Inspector)
	if !ok {
		s.LocksError = fmt.Sprintf("the store (%T) cannot list its locks: it does not implement backend.Inspector", h.store)
		return
	}
	// One more than shown: the role key may take a place.
	lctx, cancel := context.WithTimeout(ctx, h.timeout)
	list, err := in.LeasesUpTo(lctx, h.prefix, h.maxLocks+1, waitersShown)
	cancel()
	if err != nil {
		s.LocksError = err.Error()
	}
	now := s.GeneratedAt
	listedRole := false
	for _, l := range list.Leases {
		switch {
		case l.Key == h.roleKey:
			listedRole = true
		case len(s.Locks) == h.maxLocks:
			s.LocksMore++
		default:
			s.Locks = append(s.Locks, LockOf(h.store, l, h.prefix, now))
		}
	}
	s.LocksMore += list.More
	if roleHeld && !listedRole && list.More > 0 && strings.HasPrefix(h.roleKey, h.prefix) {
		s.LocksMore-- // the role key, counted among the keys not read
	}
	s.LocksPartial = list.Partial
}

// instanceOf is this instance's view, from its elector's status st read at now.
func instanceOf(st role.Status, now time.Time) Instance {
	in := Instance{ID: st.Instance, Role: "slave", Since: st.Since, Epoch: st.Epoch, Duplicate: st.Duplicate}
	switch {
	case !st.Enabled:
		in.Role = "disabled"
	case !st.Running:
		in.Role = "stopped"
	case st.IsMaster:
		in.Role = "master"
	}
	if st.LastError != nil {
		at := st.LastErrorAt
		in.LastError, in.LastErrorAt = st.LastError.Error(), &at
	}
	if left := st.RecoveringUntil.Sub(now); !st.RecoveringUntil.IsZero() && left > 0 {
		until := st.RecoveringUntil
		in.RecoveringUntil, in.RecoveringMillis = &until, max(left.Milliseconds(), 1)
	}
	return in
}

// masterOf describes the role lease l (MasterOf) with when this
// instance saw its tenure begin: its own tenure start when it is the
// master, or else when it saw the master change to l's holder (the
// newest such event).
func (h *Handler) masterOf(l backend.Lease, st role.Status, transitions []Event, now time.Time) *Master {
	m := MasterOf(h.store, l, now)
	if st.IsMaster && m.ID == st.Instance {
		since := st.Since
		m.Since = &since
		return m
	}
	for _, e := range transitions {
		if e.Kind == "master" && e.Subject == m.ID {
			since := e.Time
			m.Since = &since
			break
		}
	}
	return m
}
