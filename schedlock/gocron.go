package schedlock

import (
	"context"
	"fmt"
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
// master: before every run the gate checks el.IsMaster (a clock read, no
// I/O) and skips the run with ErrNotMaster (ErrDisabled when the role is
// disabled). The job gets the tag "master-only".
//
// opts add a job lock (WithLock) — so that a run also needs the lock:
// MasterOnly(el, WithLock(store, "nightly-export", 10*time.Minute,
// 30*time.Second)) — and a logger, an observer, a store timeout. A job has
// one distributed locker, so give it one schedlock option with every
// condition; a second one makes NewJob fail with ErrConflict. Bad
// arguments make NewJob fail with an error wrapping ErrInvalid.
func MasterOnly(el *role.Elector, opts ...Option) gocron.JobOption {
	g, err := NewGate(Master, el, opts...)
	return install(g, err, gocron.WithDistributedJobLocker, gocron.WithTags)
}

// SlaveOnly returns a gocron job option that runs the job only on slaves:
// before every run the gate checks that el runs, the role is enabled, this
// instance is not the master and has seen another instance hold the role;
// otherwise it skips the run with ErrNotSlave (ErrDisabled when the role
// is disabled). The job gets the tag "slave-only". opts are as for
// MasterOnly; SlaveOnly(el, WithLock(...)) runs the job once per fire
// among the slaves.
func SlaveOnly(el *role.Elector, opts ...Option) gocron.JobOption {
	g, err := NewGate(Slave, el, opts...)
	return install(g, err, gocron.WithDistributedJobLocker, gocron.WithTags)
}

// AnyRole returns a gocron job option that gates the job by opts alone,
// whatever this instance's role: with WithLock it is Locked; without, the
// job runs everywhere, which overrides a scheduler-wide locker
// (gocron.WithDistributedLocker) for this job.
func AnyRole(opts ...Option) gocron.JobOption {
	g, err := NewGate(Any, nil, opts...)
	return install(g, err, gocron.WithDistributedJobLocker, gocron.WithTags)
}

// Locked returns a gocron job option that gives the job a ShedLock-style
// lock (see WithLock): each fire runs on at most one instance, the others
// skip with ErrLocked. It is AnyRole(WithLock(store, name, lockAtMostFor,
// lockAtLeastFor), opts...). The lock key's namespace and the owner come
// from WithInstance: without it NewJob fails with an error wrapping
// ErrInvalid that says so — pass schedlock.WithInstance(id) among opts. Zero durations take the defaults
// of WithDefaults. To combine the lock with a role use MasterOnly(el,
// WithLock(...)) or SlaveOnly(el, WithLock(...)).
func Locked(store backend.Store, name string, lockAtMostFor, lockAtLeastFor time.Duration, opts ...Option) gocron.JobOption {
	return AnyRole(append([]Option{WithLock(store, name, lockAtMostFor, lockAtLeastFor)}, opts...)...)
}

// JobOption returns the gocron job option that installs g on a job, as
// MasterOnly and the others do, for a gate built with NewGate (and perhaps
// also used with Run).
func (g *Gate) JobOption() gocron.JobOption {
	if g == nil {
		return install(nil, fmt.Errorf("%w: nil gate", ErrInvalid), gocron.WithDistributedJobLocker, gocron.WithTags)
	}
	return install(g, nil, gocron.WithDistributedJobLocker, gocron.WithTags)
}

// Task returns a gocron task that runs fn with the context of Context: one
// cancelled when the run loses its mastership, slave role or job lock, and
// that Assert, Extend, Epoch, Token and Fire accept, for this run alone
// on every goroutine it is handed to, however the job's runs overlap.
// Name the job with
// gocron.WithName: gocron names a job after its task function, which is
// this wrapper for every Task. A task written as func(ctx
// context.Context) that calls Context itself keeps its own name.
func Task(fn func(ctx context.Context) error) gocron.Task {
	if fn == nil {
		return gocron.NewTask(nil)
	}
	return gocron.NewTask(func(ctx context.Context) error {
		ctx, cancel := Context(ctx)
		defer cancel()
		return fn(ctx)
	})
}

// install returns a gocron job option (O) that makes g the job's
// distributed locker and adds g's role tag to the job's tags. gocron's
// option type is a function of an unexported job type (P), which the type
// parameters name without spelling it; reading the job's current locker,
// tags and name (to refuse a second locker and to add rather than replace
// tags) uses reflection and degrades to replacing if gocron's fields
// change. A gate error (gerr) is returned when the option is applied, so
// NewJob reports it.
func install[O ~func(P, time.Time) error, P any](g *Gate, gerr error, useLocker func(gocron.Locker) O, setTags func(...string) O) O {
	return func(j P, now time.Time) error {
		if gerr != nil {
			return gerr
		}
		if hasLocker(j) {
			return fmt.Errorf("%w: job %q: a gocron job has one locker, so give it one schedlock option with every condition, such as MasterOnly(el, WithLock(store, name, lockAtMostFor, lockAtLeastFor))",
				ErrConflict, jobName(j))
		}
		if err := useLocker(g)(j, now); err != nil {
			return err
		}
		if id, ok := jobID(j); ok {
			g.fires.installed(id)
		}
		if g.role == Any {
			return nil
		}
		tags := jobTags(j)
		if tag := g.role.String(); !slices.Contains(tags, tag) {
			tags = append(tags, tag)
		}
		return setTags(tags...)(j, now)
	}
}

// jobField returns the named field of gocron's job value behind j.
func jobField(j any, name string) (reflect.Value, bool) {
	v := reflect.ValueOf(j)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return reflect.Value{}, false
	}
	v = v.Elem()
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.FieldByName(name)
	return f, f.IsValid()
}

func hasLocker(j any) bool {
	f, ok := jobField(j, "locker")
	return ok && f.Kind() == reflect.Interface && !f.IsNil()
}

func jobTags(j any) []string {
	f, ok := jobField(j, "tags")
	if !ok || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.String {
		return nil
	}
	tags := make([]string, 0, f.Len()+1)
	for i := range f.Len() {
		tags = append(tags, f.Index(i).String())
	}
	return tags
}

// jobID returns the job's ID (a UUID, 16 bytes).
func jobID(j any) ([16]byte, bool) {
	var id [16]byte
	f, ok := jobField(j, "id")
	if !ok || f.Kind() != reflect.Array || f.Len() != len(id) || f.Type().Elem().Kind() != reflect.Uint8 {
		return id, false
	}
	for i := range id {
		id[i] = byte(f.Index(i).Uint())
	}
	return id, true
}

func jobName(j any) string {
	f, ok := jobField(j, "name")
	if !ok || f.Kind() != reflect.String {
		return ""
	}
	return f.String()
}
