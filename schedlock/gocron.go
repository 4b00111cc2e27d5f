package schedlock

import (
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/role"
)

// The elector is also a gocron.Elector, for schedulers whose every job is
// master-only (gocron.WithDistributedElector); see the package doc.
var _ gocron.Elector = (*role.Elector)(nil)

// MasterOnly returns a gocron job option that runs the job only on the
// master: before every run the gate checks el's tenure (a clock read, no
// I/O) and skips the run with ErrNotMaster. The job gets the tag
// "master-only". opts may add a job lock (WithLock, with WithScheduler),
// a logger and an observer. A second locker, or bad arguments, make
// NewJob fail with an error wrapping backend.ErrInvalidArgument.
func MasterOnly(el *role.Elector, opts ...Option) gocron.JobOption {
	return option(masterOnly, el, opts)
}

// SlaveOnly returns a gocron job option that runs the job only on slaves
// (see the package doc, Gates) and skips the run with ErrNotSlave
// otherwise. The job gets the tag "slave-only". opts are as for
// MasterOnly.
func SlaveOnly(el *role.Elector, opts ...Option) gocron.JobOption {
	return option(slaveOnly, el, opts)
}

// Locked returns a gocron job option that gives the job a ShedLock-style
// job lock named name in store: each fire runs on at most one instance,
// and a run that finds the lock held is skipped with ErrLocked, not
// delayed. A run takes the lock for lockAtMostFor and, when it ends, keeps
// it until lockAtLeastFor after its start, by the store's clock.
// WithInstance and WithScheduler are required (see the package doc).
//
// lockAtMostFor must be a lease a store holds, 1ms to 365 days, and not
// less than lockAtLeastFor, which may be 0; set it well above the job's
// longest run. Zero durations take those of a Defaults option; durations
// written as text ("PT10M") are read by config.ParseDuration. With a
// role: MasterOnly(el, WithLock(...)) or SlaveOnly(el, WithLock(...)).
func Locked(store backend.Store, name string, lockAtMostFor, lockAtLeastFor time.Duration, opts ...Option) gocron.JobOption {
	return option(anyRole, nil, append([]Option{WithLock(store, name, lockAtMostFor, lockAtLeastFor)}, opts...))
}

// option builds the gate of condition r and the job option installing it.
func option(r cond, el *role.Elector, opts []Option) gocron.JobOption {
	g, err := newGate(r, el, opts...)
	return install(g, err, gocron.WithDistributedJobLocker, gocron.WithTags)
}

// install returns a gocron job option (O) that makes g the job's
// distributed locker and adds g's role tag to the job's tags. O is a
// function of gocron's unexported job type (P), which the type parameters
// name without spelling it; the job's locker, tags, ID and name are read
// by reflection, degrading to replacing if gocron's fields change. A gate
// error (gerr) is returned when the option is applied, so NewJob reports
// it. Applied to a nil job (gateOf), the option returns its gate instead.
func install[O ~func(P, time.Time) error, P any](g *gate, gerr error, useLocker func(gocron.Locker) O, setTags func(...string) O) O {
	return func(j P, now time.Time) error {
		if reflect.ValueOf(&j).Elem().IsZero() {
			return &gateCarrier{g: g, err: gerr}
		}
		if err := g.installable(j, gerr); err != nil {
			return err
		}
		if err := useLocker(g)(j, now); err != nil {
			return err
		}
		if id, ok := jobID(j); ok {
			g.fires.installed(id)
		}
		if g.role == anyRole {
			return nil
		}
		tags := jobTags(j)
		if tag := string(g.role); !slices.Contains(tags, tag) {
			tags = append(tags, tag)
		}
		return setTags(tags...)(j, now)
	}
}

// installable says why g cannot be the locker of gocron job j, if so.
func (g *gate) installable(j any, gerr error) error {
	switch {
	case gerr != nil:
		return gerr
	case hasLocker(j):
		return invalid("job %q already has a distributed locker: a gocron job has one, so give it one schedlock option with every condition, "+
			"such as MasterOnly(el, WithLock(store, name, lockAtMostFor, lockAtLeastFor), WithScheduler(s))", jobName(j))
	case g.lock != nil && g.fires.sched == nil:
		return invalid("job %q: job lock %q needs the scheduler, to run each fire once however late an instance starts it: "+
			"pass schedlock.WithScheduler(s) among its options", jobName(j), g.lock.name)
	}
	return nil
}

// gateCarrier carries a job option's gate out of the option (gateOf).
type gateCarrier struct {
	g   *gate
	err error
}

func (c *gateCarrier) Error() string { return "schedlock: a job option's gate" }

// gateOf returns the gate behind job, a MasterOnly, SlaveOnly or Locked
// option, by applying job to a nil gocron job: this package's options
// answer with their gate, gocron's refuse (or panic, recovered).
func gateOf(job gocron.JobOption) (g *gate, err error) {
	err = invalid("Run needs a job option made by schedlock.MasterOnly, SlaveOnly or Locked")
	if job == nil {
		return nil, err
	}
	defer func() { _ = recover() }()
	var c *gateCarrier
	if errors.As(job(nil, time.Time{}), &c) {
		return c.g, c.err
	}
	return nil, err
}

// jobField returns the named field of gocron's job value behind j, if it
// is of kind k.
func jobField(j any, name string, k reflect.Kind) (reflect.Value, bool) {
	v := reflect.ValueOf(j)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.Elem().FieldByName(name)
	return f, f.IsValid() && f.Kind() == k
}

func hasLocker(j any) bool {
	f, ok := jobField(j, "locker", reflect.Interface)
	return ok && !f.IsNil()
}

func jobTags(j any) []string {
	f, ok := jobField(j, "tags", reflect.Slice)
	if !ok || f.Type().Elem().Kind() != reflect.String {
		return nil
	}
	tags := make([]string, 0, f.Len()+1)
	for i := range f.Len() {
		tags = append(tags, f.Index(i).String())
	}
	return tags
}

// jobID returns the job's ID (a UUID, 16 bytes).
func jobID(j any) (id [16]byte, ok bool) {
	f, ok := jobField(j, "id", reflect.Array)
	if !ok || f.Len() != len(id) || f.Type().Elem().Kind() != reflect.Uint8 {
		return id, false
	}
	copy(id[:], f.Bytes())
	return id, true
}

func jobName(j any) string {
	f, ok := jobField(j, "name", reflect.String)
	if !ok {
		return ""
	}
	return f.String()
}
