package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Names of the checks, as Violation.Check reports them.
const (
	CheckTokenOrder      = "token-order"      // accepted tokens strictly increase per resource
	CheckTokenReuse      = "token-reuse"      // one token, two holdings
	CheckEpochUnique     = "epoch-unique"     // one epoch, two nodes
	CheckTwoMasters      = "two-masters"      // IsMaster true on two nodes at once
	CheckCounter         = "counter"          // final counter vs acknowledged increments
	CheckCounterSequence = "counter-sequence" // each accepted value is the previous one + 1
	CheckJobOnce         = "job-once"         // at most one run per fire time
	CheckLivenessMaster  = "liveness-master"  // a master again within MasterBound of a heal
	CheckLivenessLock    = "liveness-lock"    // the counter moves again within LockBound of a heal
	CheckErrors          = "errors"           // every error a node saw is documented
)

// CheckOptions are the bounds of the liveness checks.
type CheckOptions struct {
	// MasterBound: after each fault heals, some node must read IsMaster
	// true within this long.
	MasterBound time.Duration
	// LockBound: after each fault heals, the ledger must accept a counter
	// increment within this long.
	LockBound time.Duration
	// Around is how many events of the merged history a violation shows
	// around the place it was found. Default 12.
	Around int
	// End is when the run's faults ended and the nodes were asked to stop
	// (Unix ns): the time without a master is measured up to it, not
	// through the shutdown. Zero means the last event a node wrote.
	End int64
}

// Violation is one breach of a guarantee found in a history.
type Violation struct {
	Check   string
	Message string
	At      int64   // when it happened (Unix ns), where Around is taken
	Around  []Event // the merged history around At
}

// Result is what Check found: the violations and the run's figures.
type Result struct {
	Violations []Violation

	Operations    int            // fenced operations attempted: writes and reads
	Accepted      map[string]int // writes the ledger applied, per resource
	StaleRejected int            // operations the ledger refused as stale: fencing at work
	WriteErrors   int            // writes that failed otherwise (not applied)
	Indeterminate int            // writes whose node died before the outcome
	Increments    int            // counter increments acknowledged to their node
	FinalCounter  int64          // the counter's value at the end

	HealsChecked int // heals whose liveness was checked
	HealsSkipped int // heals too close to another fault or to the end

	MaxNoMasterMs        float64 // longest time with no node reading IsMaster true
	MaxTwoMastersMs      float64 // longest overlap of two nodes' IsMaster intervals
	MaxLockUnavailableMs float64 // longest gap between accepted counter increments
	Faults               map[string]int
}

// interval is one node's IsMaster-true interval.
type interval struct {
	node       string
	start, end int64
	epoch      uint64
}

// Check reads a merged history (node, nemesis and ledger events, in any
// order) and reports every violation of baton's guarantees in it. It is
// pure: the same history gives the same result.
func Check(events []Event, o CheckOptions) Result {
	if o.Around <= 0 {
		o.Around = 12
	}
	c := &checker{o: o, r: Result{Accepted: map[string]int{}, Faults: map[string]int{}}}
	c.index(events)
	c.writes()
	c.ledger()
	c.holdings()
	c.masters()
	c.counter()
	c.liveness()
	c.errors()
	slices.SortStableFunc(c.r.Violations, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })
	return c.r
}

type checker struct {
	o CheckOptions
	r Result

	timeline  []Event // every event with a time, by time: for Around
	accepted  []Event // ledger order
	faults    []Event
	finals    []Event // KindFinal: they carry no time
	intervals []interval
	end       int64 // the last moment of the history

	twiceRun map[int64]bool // job fire times already reported as run twice
}

// jobRanTwice reports a second run of the job's fire time fire, once per
// fire time: the ledger's writes and the nodes' runs may both show it.
func (c *checker) jobRanTwice(fire, at int64, first, second Event) {
	if c.twiceRun[fire] {
		return
	}
	if c.twiceRun == nil {
		c.twiceRun = map[int64]bool{}
	}
	c.twiceRun[fire] = true
	c.violate(CheckJobOnce, at, "job: fire time %s ran twice: %s (token %d) and %s (token %d)",
		time.UnixMilli(fire).UTC().Format("15:04:05.000"), first.Node, first.Token, second.Node, second.Token)
}

func (c *checker) index(events []Event) {
	masters := map[[2]string]*interval{}
	var keys [][2]string
	for _, e := range events {
		if e.Start != 0 {
			c.timeline = append(c.timeline, e)
		}
		c.end = max(c.end, e.Start, e.End)
		switch e.Kind {
		case KindAccepted:
			c.accepted = append(c.accepted, e)
		case KindFinal:
			c.finals = append(c.finals, e)
		case KindFault:
			c.faults = append(c.faults, e)
			c.r.Faults[e.Fault]++
		case KindMaster:
			k := [2]string{e.Node, fmt.Sprint(e.Start)}
			if iv, ok := masters[k]; ok {
				iv.end = max(iv.end, e.End)
				iv.epoch = cmp.Or(iv.epoch, e.Token)
				continue
			}
			masters[k] = &interval{node: e.Node, start: e.Start, end: max(e.End, e.Start), epoch: e.Token}
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		c.intervals = append(c.intervals, *masters[k])
	}
	slices.SortFunc(c.intervals, func(a, b interval) int { return cmp.Compare(a.start, b.start) })
	sort.SliceStable(c.timeline, func(i, j int) bool { return c.timeline[i].Start < c.timeline[j].Start })
	sort.SliceStable(c.accepted, func(i, j int) bool { return c.accepted[i].Seq < c.accepted[j].Seq })
	sort.SliceStable(c.faults, func(i, j int) bool { return c.faults[i].Start < c.faults[j].Start })
}

// violate records a violation at time at.
func (c *checker) violate(check string, at int64, format string, args ...any) {
	c.r.Violations = append(c.r.Violations, Violation{
		Check: check, Message: fmt.Sprintf(format, args...), At: at, Around: c.around(at),
	})
}

// around returns the events of the timeline nearest to at.
func (c *checker) around(at int64) []Event {
	i := sort.Search(len(c.timeline), func(i int) bool { return c.timeline[i].Start >= at })
	lo := max(0, i-c.o.Around/2)
	hi := min(len(c.timeline), lo+c.o.Around)
	lo = max(0, hi-c.o.Around)
	return slices.Clone(c.timeline[lo:hi])
}

// writes pairs each write's invoke with its outcome.
func (c *checker) writes() {
	type key struct {
		node string
		op   uint64
	}
	invoked := map[key]Event{}
	done := map[key]bool{}
	for _, e := range c.timeline {
		if e.Kind == KindRead {
			switch e.Result {
			case ResultInvoke:
				c.r.Operations++
			case ResultRejected:
				c.r.StaleRejected++
			}
			continue
		}
		if e.Kind != KindWrite {
			continue
		}
		k := key{e.Node, e.Op}
		switch e.Result {
		case ResultInvoke:
			invoked[k] = e
			c.r.Operations++
		case ResultOK:
			done[k] = true
			if e.Resource == ResCounter {
				c.r.Increments++
			}
		case ResultRejected:
			done[k] = true
			c.r.StaleRejected++
		default:
			done[k] = true
			c.r.WriteErrors++
		}
	}
	for k, e := range invoked {
		if !done[k] && e.Resource == ResCounter {
			c.r.Indeterminate++
		}
	}
}

// strict reports whether res accepts each token at most once.
func strict(res string) bool { return res != ResRole }

// ledger checks the ledger's own log: token order, one node per epoch,
// consecutive counter values, one job run per fire time.
func (c *checker) ledger() {
	l := ledgerCheck{
		c:         c,
		lastOf:    map[string]ledgerLast{},
		epochNode: map[uint64]string{},
		fires:     map[int64]Event{},
	}
	for _, e := range c.accepted {
		c.r.Accepted[e.Resource]++
		l.tokenOrder(e)
		switch e.Resource {
		case ResRole:
			l.epoch(e)
		case ResCounter:
			l.counter(e)
		case ResJob:
			l.fire(e)
		}
	}
}

// ledgerLast is the highest token the ledger accepted for a resource so
// far, and the last write it accepted.
type ledgerLast struct {
	token uint64
	e     Event
}

// ledgerCheck is what ledger remembers of the writes it has read.
type ledgerCheck struct {
	c           *checker
	lastOf      map[string]ledgerLast
	epochNode   map[uint64]string
	fires       map[int64]Event
	prevValue   int64
	prevCounter int64 // time of the previous accepted increment
}

// tokenOrder checks that e's token is not below (or, for a strict
// resource, equal to) one the ledger accepted before.
func (l *ledgerCheck) tokenOrder(e Event) {
	if last, ok := l.lastOf[e.Resource]; ok {
		if e.Token < last.token || (e.Token == last.token && strict(e.Resource)) {
			l.c.violate(CheckTokenOrder, e.Start,
				"%s: the ledger accepted token %d from %s (%s) after token %d from %s (%s): a stale holder's write landed",
				e.Resource, e.Token, e.Node, e.Holding, last.token, last.e.Node, last.e.Holding)
		}
	}
	l.lastOf[e.Resource] = ledgerLast{max(e.Token, l.lastOf[e.Resource].token), e}
}

// epoch checks that the role's epoch of e was accepted from one node only.
func (l *ledgerCheck) epoch(e Event) {
	if n, ok := l.epochNode[e.Token]; ok && n != e.Node {
		l.c.violate(CheckEpochUnique, e.Start, "role: epoch %d was accepted from two nodes, %s and %s", e.Token, n, e.Node)
	}
	l.epochNode[e.Token] = e.Node
}

// counter checks that e set the counter to one more than the write before,
// and measures the longest time between two increments.
func (l *ledgerCheck) counter(e Event) {
	if e.Value != l.prevValue+1 {
		l.c.violate(CheckCounterSequence, e.Start,
			"counter: the ledger's write #%d by %s (token %d) set %d after %d: %s", e.Seq, e.Node, e.Token, e.Value, l.prevValue, counterGap(e.Value, l.prevValue))
	}
	l.prevValue = e.Value
	if l.prevCounter != 0 {
		l.c.r.MaxLockUnavailableMs = max(l.c.r.MaxLockUnavailableMs, ms(e.Start-l.prevCounter))
	}
	l.prevCounter = e.Start
}

// counterGap says what a counter write of value after prev, not prev+1,
// means.
func counterGap(value, prev int64) string {
	switch {
	case value < prev:
		return "the counter went back: increments were undone"
	case value > prev+1:
		return "the counter jumped: a write left no entry in the ledger's log"
	}
	return "an increment was lost: the write was based on a stale read"
}

// fire checks that the job's run e is the first for its fire time.
func (l *ledgerCheck) fire(e Event) {
	if first, ok := l.fires[e.Fire]; ok {
		l.c.jobRanTwice(e.Fire, e.Start, first, e)
	} else {
		l.fires[e.Fire] = e
	}
}

// holdings checks that no token was granted to two holdings, and that
// no two runs of the job were for one fire time (whether or not their
// writes reached the ledger).
func (c *checker) holdings() {
	type key struct {
		res   string
		token uint64
	}
	seen := map[key]Event{}
	fires := map[int64]Event{}
	for _, e := range c.timeline {
		if e.Kind != KindHold {
			continue
		}
		if e.Resource == ResJob && e.Fire != 0 {
			if first, ok := fires[e.Fire]; ok {
				c.jobRanTwice(e.Fire, e.Start, first, e)
			} else {
				fires[e.Fire] = e
			}
		}
		k := key{e.Resource, e.Token}
		if first, ok := seen[k]; ok && first.Holding != e.Holding {
			c.violate(CheckTokenReuse, e.Start, "%s: token %d was granted to two holdings, %s and %s", e.Resource, e.Token, first.Holding, e.Holding)
			continue
		}
		seen[k] = e
	}
}

// masters checks the IsMaster intervals: one node per epoch, never two
// nodes at once; and measures the longest time without a master.
func (c *checker) masters() {
	epochNode := map[uint64]string{}
	for _, iv := range c.intervals {
		if iv.epoch == 0 {
			continue
		}
		if n, ok := epochNode[iv.epoch]; ok && n != iv.node {
			c.violate(CheckEpochUnique, iv.start, "role: %s and %s both read IsMaster true in epoch %d", n, iv.node, iv.epoch)
		}
		epochNode[iv.epoch] = iv.node
	}
	for i, a := range c.intervals {
		for _, b := range c.intervals[i+1:] {
			if b.start > a.end {
				break
			}
			if a.node == b.node {
				continue
			}
			overlap := min(a.end, b.end) - b.start
			if overlap <= 0 {
				continue
			}
			c.r.MaxTwoMastersMs = max(c.r.MaxTwoMastersMs, ms(overlap))
			c.violate(CheckTwoMasters, b.start, "role: %s (epoch %d) and %s (epoch %d) both read IsMaster true for %.1f ms",
				a.node, a.epoch, b.node, b.epoch, ms(overlap))
		}
	}
	if len(c.intervals) == 0 {
		return
	}
	covered := c.intervals[0].end
	for _, iv := range c.intervals[1:] {
		if iv.start > covered {
			c.r.MaxNoMasterMs = max(c.r.MaxNoMasterMs, ms(iv.start-covered))
		}
		covered = max(covered, iv.end)
	}
	end := c.o.End
	if end == 0 {
		end = c.lastNodeEvent()
	}
	c.r.MaxNoMasterMs = max(c.r.MaxNoMasterMs, ms(end-covered))
}

// lastNodeEvent returns the time of the last event a node wrote.
func (c *checker) lastNodeEvent() int64 {
	var t int64
	for _, e := range c.timeline {
		if e.Kind == KindStart || e.Kind == KindWrite || e.Kind == KindHold || e.Kind == KindMaster || e.Kind == KindError {
			t = max(t, e.Start, e.End)
		}
	}
	return t
}

// counter checks the final counter against the acknowledged increments.
func (c *checker) counter() {
	final, ok := Event{}, false
	for _, e := range c.finals {
		if e.Resource == ResCounter {
			final, ok = e, true
		}
	}
	if !ok {
		return
	}
	c.r.FinalCounter = final.Value
	acked, indet := int64(c.r.Increments), int64(c.r.Indeterminate)
	switch {
	case final.Value < acked:
		c.violate(CheckCounter, c.end, "counter: %d increments were acknowledged but the counter ends at %d: %d lost",
			acked, final.Value, acked-final.Value)
	case final.Value > acked+indet:
		c.violate(CheckCounter, c.end, "counter: it ends at %d, more than the %d acknowledged increments plus %d whose outcome is unknown: %d doubled",
			final.Value, acked, indet, final.Value-acked-indet)
	}
}

// liveness checks that the fleet recovers after every heal: a master
// within MasterBound, an accepted increment within LockBound. A heal is
// skipped when another fault is active in its window or the history ends
// before the window does.
func (c *checker) liveness() {
	for i, f := range c.faults {
		heal := f.End
		if heal == 0 {
			c.r.HealsSkipped++
			continue
		}
		window := heal + int64(max(c.o.MasterBound, c.o.LockBound))
		busy := false
		for j, g := range c.faults {
			if j != i && g.Start < window && cmp.Or(g.End, g.Start) > heal {
				busy = true
				break
			}
		}
		if busy || window > c.end {
			c.r.HealsSkipped++
			continue
		}
		c.r.HealsChecked++
		if c.o.MasterBound > 0 && !c.masterBetween(heal, heal+int64(c.o.MasterBound)) {
			c.violate(CheckLivenessMaster, heal, "no node read IsMaster true within %v after %s (%s) healed",
				c.o.MasterBound, f.Fault, f.Detail)
		}
		if c.o.LockBound > 0 && !c.incrementBetween(heal, heal+int64(c.o.LockBound)) {
			c.violate(CheckLivenessLock, heal, "the ledger accepted no counter increment within %v after %s (%s) healed",
				c.o.LockBound, f.Fault, f.Detail)
		}
	}
}

func (c *checker) masterBetween(from, to int64) bool {
	return slices.ContainsFunc(c.intervals, func(iv interval) bool { return iv.end >= from && iv.start <= to })
}

func (c *checker) incrementBetween(from, to int64) bool {
	return slices.ContainsFunc(c.accepted, func(e Event) bool {
		return e.Resource == ResCounter && e.Start >= from && e.Start <= to
	})
}

// errors reports every undocumented error a node saw.
func (c *checker) errors() {
	for _, e := range c.timeline {
		if e.Kind == KindError && e.Class != ClassDocumented {
			c.violate(CheckErrors, e.Start, "%s got an undocumented error from %s: %s", e.Node, e.Detail, e.Err)
		}
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// Summary renders the result for people: the figures, then each
// violation with the history around it.
func (r Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operations %d, accepted %v, stale writes rejected %d, write errors %d, indeterminate %d\n",
		r.Operations, r.Accepted, r.StaleRejected, r.WriteErrors, r.Indeterminate)
	fmt.Fprintf(&b, "counter %d for %d acknowledged increments; heals checked %d, skipped %d\n",
		r.FinalCounter, r.Increments, r.HealsChecked, r.HealsSkipped)
	fmt.Fprintf(&b, "longest without a master %.0f ms, with two masters %.1f ms, without a lock increment %.0f ms\n",
		r.MaxNoMasterMs, r.MaxTwoMastersMs, r.MaxLockUnavailableMs)
	fmt.Fprintf(&b, "violations: %d\n", len(r.Violations))
	for i, v := range r.Violations {
		fmt.Fprintf(&b, "\n%d. [%s] at %s: %s\n", i+1, v.Check, time.Unix(0, v.At).UTC().Format("15:04:05.000000"), v.Message)
		for _, e := range v.Around {
			fmt.Fprintf(&b, "     %s\n", e)
		}
	}
	return b.String()
}
