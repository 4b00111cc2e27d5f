package role

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/baton-go/baton/backend"
)

// A member entry that claims this instance's ID is a duplicate only if a
// live process keeps renewing it: a single write (an entry forged, or
// left with a long TTL) must not mark this instance unhealthy for as long
// as it lasts. Heartbeats alone cannot tell the two apart (a store
// reports a member as live until its entry expires, and on Consul a
// renewal leaves no trace), so a member that sees another claim its ID
// stamps its entry with a beat count that changes at every heartbeat
// (memberData.Beat), and judges each other claimant by its entry: one
// whose data changed between two of its own heartbeats in a row is a
// live process, reported (reportDuplicate); one whose data stays the same
// is logged once as an entry to delete, and not reported. While another
// entry claims its ID, each member heartbeat reads the member list once
// more to see the claimants' data.

// claimant is another member entry that claimed this instance's ID at
// the last member heartbeat.
type claimant struct {
	data string // its data then
	same int    // heartbeats in a row that found data unchanged
}

// staleAfter is how many heartbeats in a row must find a claimant's
// entry unchanged before it is logged as not renewed: a live one renews
// about once per heartbeat of ours, and may miss one by timing.
const staleAfter = 2

// claimants follows the other members that claim this instance's ID,
// between member heartbeats. It belongs to the presence goroutine.
type claimants struct {
	seen   map[string]claimant // by member name
	warned map[string]bool     // logged as not renewed
	beat   uint64              // this member's stamp while others claim its ID
}

// data returns this member's entry data for the next heartbeat: its start
// time, with a new beat count while another member claims its ID.
func (c *claimants) data(started time.Time) []byte {
	d := memberData{Started: started}
	if len(c.seen) > 0 {
		c.beat++
		d.Beat = c.beat
	}
	b, _ := json.Marshal(d) // a time and a number cannot fail
	return b
}

// judge reads the entries of dups, the other members that the last
// heartbeat found claiming this instance's ID, and reports the first
// whose data changed since the heartbeat before (a live process) as a
// duplicate. An entry found unchanged staleAfter heartbeats in a row is
// logged once, with where it is kept.
func (e *Elector) judge(ctx context.Context, reg backend.Registry, ev *events, c *claimants, dups []string) {
	if len(dups) == 0 {
		c.seen, c.warned = nil, nil
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
		if c.see(next, m.Name, string(m.Data)) && !reported {
			e.reportDuplicate(ev, m.Name)
			reported = true
		}
		if next[m.Name].same >= staleAfter {
			e.warnStale(c, m.Name)
		}
	}
	for name := range c.warned {
		if _, ok := next[name]; !ok {
			delete(c.warned, name)
		}
	}
	c.seen = next
}

// see records in next the data of member name's entry at this heartbeat,
// and reports whether it changed since the heartbeat before.
func (c *claimants) see(next map[string]claimant, name, data string) (changed bool) {
	now := claimant{data: data}
	prev, ok := c.seen[name]
	if ok && prev.data == data {
		now.same = prev.same + 1
	}
	next[name] = now
	return ok && prev.data != data
}

// warnStale logs, once per entry, a member entry that claims this
// instance's ID and is not renewed.
func (e *Elector) warnStale(c *claimants, name string) {
	if c.warned[name] {
		return
	}
	if c.warned == nil {
		c.warned = map[string]bool{}
	}
	c.warned[name] = true
	e.logger.Warn("role: a member entry claims this instance ID but is not renewed by any process; it is not reported as a duplicate. "+
		"If no other process runs with this ID, delete it",
		"entry", e.memberEntry(name), "self", e.owner)
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
