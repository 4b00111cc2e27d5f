package role

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
)

// Member is one live instance of the service, as listed by Members.
type Member struct {
	// ID is the instance ID the member claims.
	ID string
	// Owner is the member's owner string: its ID plus a per-process nonce.
	// Two members with one ID and different owners are two processes
	// sharing an instance ID.
	Owner string
	// Master reports whether the member holds the role key.
	Master bool
	// Self reports whether the member is the elector that listed it.
	Self bool
	// StartedAt is when the member's elector started, on its own clock.
	StartedAt time.Time
	// LastSeen is how long ago the store received its last heartbeat.
	LastSeen time.Duration
}

type memberData struct {
	Started time.Time `json:"started"`
	Beat    uint64    `json:"beat,omitempty"` // see claimants
}

// Members lists the live instances of this elector's service: every
// elector that heartbeated within the role TTL. It needs a store that
// implements backend.Registry (every built-in store does); on another it
// returns an error wrapping errors.ErrUnsupported.
func (e *Elector) Members(ctx context.Context) ([]Member, error) {
	reg, ok := e.store.(backend.Registry)
	if !ok {
		return nil, fmt.Errorf("role: the store %s keeps no member list (it does not implement backend.Registry): %w", backend.StoreName(e.store), errors.ErrUnsupported)
	}
	ms, err := reg.Members(ctx, e.group)
	if err != nil {
		return nil, fmt.Errorf("role: listing the members of %s/%s: %w", e.id.Tenant, e.id.App, err)
	}
	master, err := e.roleOwner(ctx, e.key)
	if err != nil {
		return nil, fmt.Errorf("role: reading the master of %s/%s: %w", e.id.Tenant, e.id.App, err)
	}
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, Member{
			ID:        m.Identity,
			Owner:     m.Name,
			Master:    m.Name == master,
			Self:      m.Name == e.owner,
			StartedAt: startedAt(m.Data),
			LastSeen:  m.Age,
		})
	}
	return out, nil
}

// startedAt reads the start time out of member data as presence writes
// it. It is informational: data in another shape (a foreign entry) has
// none, even when a field before the one that failed to decode was read.
func startedAt(data []byte) time.Time {
	var d memberData
	if err := json.Unmarshal(data, &d); err != nil {
		return time.Time{}
	}
	return d.Started
}

// presence heartbeats this elector's member entry every two heartbeat
// intervals until ctx ends, then leaves the group. It returns at once when
// the store keeps no member list. Other live processes that claim this
// instance's ID are reported (see claimants).
func (e *Elector) presence(ctx context.Context) {
	reg, ok := e.store.(backend.Registry)
	if !ok {
		return
	}
	started := e.clock.Now()
	me := backend.Member{Name: e.owner, Identity: e.idText}
	var others claimants
	ttl := e.cfg.HeartbeatExpiration + e.cfg.HeartbeatInterval
	e.every(ctx, 2*e.cfg.HeartbeatInterval, nil, func(hctx context.Context) {
		me.Data = others.data(started)
		dups, err := reg.Heartbeat(hctx, e.group, me, ttl)
		switch {
		case err != nil && ctx.Err() == nil:
			e.warn(err, "role: member heartbeat failed", "group", e.group)
		case err == nil:
			e.judge(ctx, reg, &others, dups)
		}
	}, func(lctx context.Context) {
		if err := reg.Leave(lctx, e.group, e.owner); err != nil {
			e.logger.Debug("role: could not leave the member list; the entry expires by itself", "err", err)
		}
	})
}

// every calls beat at once, then d after each call and whenever kick
// fires, until ctx ends; then it calls leave. Each call's context ends
// after the operation timeout; leave's is not ended by ctx.
func (e *Elector) every(ctx context.Context, d time.Duration, kick <-chan struct{}, beat, leave func(context.Context)) {
	t := e.clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.OperationTimeout)
			defer cancel()
			leave(lctx)
			return
		case <-kick:
		case <-t.C():
		}
		bctx, cancel := context.WithTimeout(ctx, e.cfg.OperationTimeout)
		beat(bctx)
		cancel()
		t.Reset(d)
	}
}
