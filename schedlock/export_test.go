package schedlock

import (
	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/role"
)

// Test hooks: the tests drive the gate behind a job option as gocron
// does (Lock, then the returned lock's Unlock), and run it with Run.

// WithClock runs a gate's runs on c instead of the real clock.
var WithClock = withClock

// Gate is the gocron.Locker behind a job option.
type Gate = gate

// Role is a gate's role condition, for tests that run a case per role.
type Role = cond

const (
	Any    = anyRole
	Master = masterOnly
	Slave  = slaveOnly
)

func (c cond) String() string {
	return map[cond]string{anyRole: "any-role", masterOnly: "master-only", slaveOnly: "slave-only"}[c]
}

// NewGate returns the gate behind MasterOnly(el, opts...) or
// SlaveOnly(el, opts...), or for Any the one Locked builds (opts carry
// its WithLock), found as Run finds it.
func NewGate(r Role, el *role.Elector, opts ...Option) (*Gate, error) {
	switch r {
	case Master:
		return gateOf(MasterOnly(el, opts...))
	case Slave:
		return gateOf(SlaveOnly(el, opts...))
	}
	return gateOf(option(r, el, opts))
}

// Job returns a job option that installs g, for Run and gocron.
func (g *gate) Job() gocron.JobOption {
	return install(g, nil, gocron.WithDistributedJobLocker, gocron.WithTags)
}

// LockKey returns the store key of the gate's job lock, "" without one.
func (g *gate) LockKey() string {
	if g.lock == nil {
		return ""
	}
	return g.lock.key
}
