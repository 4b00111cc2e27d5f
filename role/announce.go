package role

import (
	"context"
)

// Announcer publishes this instance, and whether it is master, outside
// the store: for instance as a service in Consul's catalog with a tag
// "master" or "slave" (consulbackend.Service), so that tools which read
// the catalog see who is master. It is independent of the lease store: a
// Redis elector can announce itself in Consul.
//
// The elector calls it from a goroutine of its own, never from the one
// that renews the role, so a slow catalog cannot cost the mastership.
type Announcer interface {
	// Announce says that the instance runs and whether it is master now.
	// The elector calls it when it starts, at once after every change of
	// its role, and every heartbeat interval in between (which can pass
	// a health check); a call that fails is logged and made again at the
	// next interval. A master that can no longer renew announces itself
	// as a slave once its tenure has ended.
	Announce(ctx context.Context, master bool) error
	// Withdraw says that the instance stopped. The elector calls it once,
	// when it stops.
	Withdraw(ctx context.Context) error
}

// WithAnnouncer makes the elector announce itself with a (see Announcer).
func WithAnnouncer(a Announcer) Option {
	return func(e *Elector) { e.announcer = a }
}

// announce runs the Announcer until ctx ends, then withdraws.
func (e *Elector) announce(ctx context.Context) {
	a := e.announcer
	announced, was := false, false
	e.every(ctx, e.cfg.HeartbeatInterval, e.kick, func(actx context.Context) {
		master := e.IsMaster()
		err := a.Announce(actx, master)
		switch {
		case err != nil && ctx.Err() == nil:
			e.warn(err, "role: announcement failed", "master", master)
		case err == nil && (!announced || was != master):
			e.logger.Debug("role: announced", "master", master)
			announced, was = true, master
		}
	}, func(wctx context.Context) {
		if err := a.Withdraw(wctx); err != nil {
			e.logger.Warn("role: could not withdraw the announcement", "err", err)
		}
	})
}

// roleChanged tells the announcer, if any, that the role changed; it
// never blocks.
func (e *Elector) roleChanged() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}
