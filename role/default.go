package role

import (
	"log/slog"
	"runtime"
	"sync/atomic"
)

var (
	defaultElector atomic.Pointer[Elector]
	// noDefaultLogged is set once IsMaster has logged that no default is
	// registered; SetDefault clears it.
	noDefaultLogged atomic.Bool
)

// SetDefault makes el the elector that the package-level IsMaster uses,
// for code (HTTP handlers) that cannot be handed the elector. Pass nil to
// clear it.
func SetDefault(el *Elector) {
	defaultElector.Store(el)
	noDefaultLogged.Store(false)
}

// IsMaster reports whether this instance is master according to the
// elector set by SetDefault. With none set it reports false, and the first
// such call (the first after each SetDefault) logs an error through
// slog.Default naming the caller and role.SetDefault, so that a service
// that forgot to register its elector does not run as a silent slave.
func IsMaster() bool {
	if el := defaultElector.Load(); el != nil {
		return el.IsMaster()
	}
	if noDefaultLogged.CompareAndSwap(false, true) {
		pc, _, _, _ := runtime.Caller(1) // from a caller's frame it never fails
		slog.Error("role: IsMaster called with no default elector: it reports false (slave) until role.SetDefault(el) registers the service's elector",
			"caller", runtime.FuncForPC(pc).Name())
	}
	return false
}
