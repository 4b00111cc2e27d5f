package role

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/internal/hook"
)

// OnDuplicateID registers f to be called, on the callback goroutine, with
// the owner string of another live process that claims this instance's
// ID (see the package doc), for metrics or alerts: once per sighting that
// Status reports as a new duplicate.
func OnDuplicateID(f func(otherOwner string)) Option {
	return func(e *Elector) { e.ev.duplicate = hook.Join(e.ev.duplicate, f) }
}

// claimant is another member entry that claimed this instance's ID. Only
// one whose data changes between heartbeats is a live duplicate; why, and
// how a member stamps its own entry (memberData.Beat), is in
// docs/safety.md ("Duplicate instance IDs").
type claimant struct {
	data   string // its data then
	same   int    // heartbeats in a row that found data unchanged
	warned bool   // logged as not renewed
}

// staleAfter is how many heartbeats in a row must find a claimant's
// entry unchanged before it is logged as not renewed: a live one renews
// about once per heartbeat of ours, and may miss one by timing.
const staleAfter = 2

// claimants follows them between member heartbeats, on the presence
// goroutine.
type claimants struct {
	seen map[string]claimant // by member name; nil while no entry claims this ID
	beat uint64              // this member's stamp while others claim its ID
}

// data returns this member's entry data for the next heartbeat: its start
// time, with a new beat count while another member claims its ID.
func (c *claimants) data(started time.Time) []byte {
	d := memberData{Started: started}
	if c.seen != nil { // nil: no other entry claims this ID
		c.beat++
		d.Beat = c.beat
	}
	b, _ := json.Marshal(d) // a time and a number cannot fail
	return b
}

// judge reads the entries of dups, the claimants the last heartbeat
// found, reports the first whose data changed since the heartbeat before
// as a duplicate, and logs once an entry found unchanged staleAfter
// heartbeats in a row.
func (e *Elector) judge(ctx context.Context, reg backend.Registry, c *claimants, dups []string) {
	if len(dups) == 0 {
		c.seen = nil
		return
	}
	mctx, cancel := context.WithTimeout(ctx, e.cfg.OperationTimeout)
	ms, err := reg.Members(mctx, e.group)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			e.logger.Warn("role: cannot read the member entries that claim this instance ID", "group", e.group, "err", err)
		}
		if c.seen == nil {
			c.seen = map[string]claimant{} // stamp this member's entry meanwhile
		}
		return
	}
	next := make(map[string]claimant, len(dups))
	reported := false
	for _, m := range ms {
		if !slices.Contains(dups, m.Name) {
			continue
		}
		prev, ok := c.seen[m.Name]
		now := claimant{data: string(m.Data), warned: prev.warned}
		if ok && prev.data == now.data {
			now.same = prev.same + 1
		} else if ok && !reported {
			e.reportDuplicate(m.Name)
			reported = true
		}
		if now.same >= staleAfter && !now.warned {
			now.warned = true
			e.logger.Warn("role: a member entry claims this instance ID but is not renewed by any process; it is not reported as a duplicate. "+
				"If no other process runs with this ID, delete it",
				"entry", e.memberEntry(m.Name), "self", e.owner)
		}
		next[m.Name] = now
	}
	c.seen = next
}

// memberEntry says where member name of the service's group is kept and
// how to delete it, as the store puts it (backend.MemberLocator), else
// by its group and name.
func (e *Elector) memberEntry(name string) string {
	if loc, ok := e.store.(backend.MemberLocator); ok {
		return loc.MemberEntry(e.group, name)
	}
	return fmt.Sprintf("member %q of the group %q", name, e.group)
}

// reportDuplicate records another live process with this instance's ID
// and reports it unless it is still reported (duplicateLocked).
func (e *Elector) reportDuplicate(other string) {
	e.mu.Lock()
	now := e.clock.Now()
	seen := e.duplicateLocked(now) == other
	e.duplicate, e.duplicateAt = other, now
	e.mu.Unlock()
	if seen {
		return
	}
	e.logger.Error("role: another live process claims this instance ID; instance IDs must be unique (different host or port)",
		"other", other, "self", e.owner)
	e.ev.step(Event{}, bind(e.ev.duplicate, other))
}

// duplicateLocked returns the duplicate still reported at now, or "";
// e.mu must be held. A live one is seen at each member heartbeat (every
// two intervals) and while it holds the role; a stopped one's entry lasts
// the role TTL and one interval more: unseen for longer, it is gone.
func (e *Elector) duplicateLocked(now time.Time) string {
	if e.duplicate == "" || now.Sub(e.duplicateAt) >= e.cfg.HeartbeatExpiration+2*e.cfg.HeartbeatInterval {
		return ""
	}
	return e.duplicate
}
