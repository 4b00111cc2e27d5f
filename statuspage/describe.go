package statuspage

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/baton-go/baton/backend"
)

// The functions below make the master, the members and the locks in the
// shapes that /status serves; batonctl's --output json uses them too, so
// that both describe one store state with the same fields and values.

// MasterOf describes l, the lease on a service's role key, read from
// store at now. Since is left nil: only an instance that saw the tenure
// begin can tell.
func MasterOf(store backend.Store, l backend.Lease, now time.Time) *Master {
	return &Master{
		ID: ownerID(l.Owner), Owner: l.Owner, Key: l.Key, StoreKey: StoreKey(store, l.Key), Epoch: l.Token,
		LeaseMillis: l.TTL.Milliseconds(), HeldAtLeastMillis: heldAtLeast(l.Token, now).Milliseconds(),
	}
}

// MemberOf describes m, an entry of a service's member group as the role
// package's electors write it; master is the role key's owner ("" if
// none). Self is left false.
func MemberOf(m backend.Member, master string) Member {
	return Member{
		ID: m.Identity, Owner: m.Name, Master: m.Name == master,
		StartedAt: startedAt(m.Data), LastHeartbeatMillis: m.Age.Milliseconds(), TTLMillis: m.TTL.Milliseconds(),
	}
}

// LockOf describes l, a lease held in store, read at now; prefix is the
// part of its key that Name leaves out (the service's, {tenant:app}:).
func LockOf(store backend.Store, l backend.LeaseInfo, prefix string, now time.Time) Lock {
	lk := Lock{
		Key: l.Key, Kind: "other", Name: strings.TrimPrefix(l.Key, prefix), StoreKey: StoreKey(store, l.Key),
		Holder: ownerID(l.Owner), Owner: l.Owner, Token: l.Token,
		LeaseMillis: l.TTL.Milliseconds(), HeldAtLeastMillis: heldAtLeast(l.Token, now).Milliseconds(),
		Waiters: WaiterNames(l.Waiters), WaitersMore: l.MoreWaiting,
	}
	for _, kind := range []string{"lock", "job"} {
		if name, ok := strings.CutPrefix(lk.Name, kind+":"); ok {
			lk.Kind, lk.Name = kind, name
			break
		}
	}
	return lk
}

// WaiterNames names the owners in a waiting line by their instance IDs.
// A process waits in a key's line once (its goroutines queue behind it),
// so two places with one instance ID are two processes that share the
// ID: those keep their owner strings, ID and process nonce, so that they
// can be told apart. The result is never nil.
func WaiterNames(owners []string) []string {
	count := make(map[string]int, len(owners))
	for _, o := range owners {
		count[ownerID(o)]++
	}
	names := make([]string, len(owners))
	for i, o := range owners {
		if id := ownerID(o); count[id] == 1 {
			names[i] = id
		} else {
			names[i] = o
		}
	}
	return names
}

// StoreKey returns the key in which store keeps the lease on key: the
// Redis key with its prefix (redisbackend; for springredis, the Java
// side's key), or the Consul KV path (consulbackend); "" when the store
// does not say.
func StoreKey(store backend.Store, key string) string {
	switch s := store.(type) {
	case interface{ LeaseKey(string) string }:
		return s.LeaseKey(key)
	case interface{ Shared(string) string }:
		return s.Shared(key)
	}
	return ""
}

// startedAt reads the start time out of the member data a role.Elector
// writes ({"started": time}); data in another shape has none.
func startedAt(data []byte) time.Time {
	var d struct {
		Started time.Time `json:"started"`
	}
	if json.Unmarshal(data, &d) != nil {
		return time.Time{}
	}
	return d.Started
}

// heldAtLeast is how long a lease whose fencing token is token has been
// held at least: every store makes a token at least its clock in µs at
// the grant, so the grant came no later than the token read as a time.
// It is 0 when that time is not in the past of now.
func heldAtLeast(token uint64, now time.Time) time.Duration {
	if token > backend.MaxToken {
		return 0
	}
	return max(now.Sub(time.UnixMicro(int64(token))), 0)
}

// ownerID returns the instance ID part of an owner string: what comes
// before the process nonce ("#...").
func ownerID(owner string) string {
	if i := strings.LastIndexByte(owner, '#'); i >= 0 {
		return owner[:i]
	}
	return owner
}
