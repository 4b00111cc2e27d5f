package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// hist builds synthetic histories for the checker. Times are offsets in
// milliseconds from an arbitrary origin.
type hist struct {
	events []Event
	seq    uint64
	ops    map[string]uint64
	value  int64 // the counter as the ledger holds it
}

const origin = int64(1_800_000_000_000_000_000)

func at(msec int64) int64 { return origin + msec*int64(time.Millisecond) }

func (h *hist) add(e Event) *hist { h.events = append(h.events, e); return h }

func (h *hist) start(node string, msec int64) *hist {
	return h.add(Event{Kind: KindStart, Node: node, Start: at(msec), Pid: 1})
}

func (h *hist) master(node string, epoch uint64, from, to int64) *hist {
	// Written twice, as a node rewrites an interval while it lasts.
	h.add(Event{Kind: KindMaster, Node: node, Start: at(from), End: at((from + to) / 2), Token: epoch})
	return h.add(Event{Kind: KindMaster, Node: node, Start: at(from), End: at(to), Token: epoch})
}

// write records a node's write with the given outcome and, when applied,
// the ledger's entry.
func (h *hist) write(node, res string, token uint64, holding string, value, fire, msec int64, result string) *hist {
	if h.ops == nil {
		h.ops = map[string]uint64{}
	}
	h.ops[node]++
	e := Event{Kind: KindWrite, Node: node, Op: h.ops[node], Start: at(msec), Resource: res, Token: token,
		Holding: holding, Value: value, Fire: fire, Result: ResultInvoke}
	h.add(e)
	if result == "" { // the node died before the outcome
		return h
	}
	e.Result, e.End = result, at(msec)+1000
	h.add(e)
	if result == ResultOK {
		h.accept(node, res, token, holding, value, fire, msec)
	}
	return h
}

func (h *hist) accept(node, res string, token uint64, holding string, value, fire, msec int64) *hist {
	h.seq++
	if res == ResCounter {
		h.value = value
	}
	return h.add(Event{Kind: KindAccepted, Node: node, Seq: h.seq, Start: at(msec) + 500, Resource: res,
		Token: token, Holding: holding, Value: value, Fire: fire})
}

// inc is one correct counter increment by node under lock token.
func (h *hist) inc(node string, token uint64, msec int64) *hist {
	holding := node + "/" + time.Duration(token).String()
	h.add(Event{Kind: KindHold, Node: node, Start: at(msec) - 1, Resource: ResLock, Token: token, Holding: holding})
	return h.write(node, ResCounter, token, holding, h.value+1, 0, msec, ResultOK)
}

func (h *hist) fault(kind string, from, to int64) *hist {
	return h.add(Event{Kind: KindFault, Node: "nemesis", Fault: kind, Start: at(from), End: at(to), Target: "n1.0"})
}

func (h *hist) final() []Event {
	out := slices.Clone(h.events)
	out = append(out, Event{Kind: KindFinal, Resource: ResCounter, Value: h.value})
	return out
}

var opts = CheckOptions{MasterBound: 3 * time.Second, LockBound: 3 * time.Second}

// clean is a history of a correct run with one fault of each shape: the
// master n1 is killed at 1 s, n2 takes over at 2.6 s; increments go on
// under increasing tokens; a stale write is rejected.
func clean() *hist {
	h := &hist{}
	h.start("n1.0", 0).start("n2.0", 0)
	h.master("n1.0", 100, 10, 1000)
	tok := uint64(1000)
	for ms := int64(20); ms < 6000; ms += 200 {
		if ms > 1000 && ms < 2600 {
			continue // the lock's holder died with n1: a standstill
		}
		tok++
		node := "n1.0"
		if ms > 1000 {
			node = "n2.0"
		}
		h.inc(node, tok, ms)
	}
	h.write("n1.0", ResCounter, 1001, "n1.0/old", 2, 0, 2700, ResultRejected)
	// Fenced reads: one let through (not an increment), one refused.
	for _, r := range []string{ResultInvoke, ResultOK} {
		h.add(Event{Kind: KindRead, Node: "n2.0", Op: 900, Start: at(2650), Resource: ResCounter, Token: 2000, Value: 7, Result: r})
	}
	for _, r := range []string{ResultInvoke, ResultRejected} {
		h.add(Event{Kind: KindRead, Node: "n1.0", Op: 901, Start: at(2660), Resource: ResCounter, Token: 1001, Result: r})
	}
	h.fault(FaultKill9, 1000, 1000)
	h.start("n1.1", 1010)
	h.master("n2.0", 200, 2600, 6000)
	h.write("n2.0", ResRole, 200, "n2.0/epoch-200", 0, 0, 2700, ResultOK)
	h.write("n2.0", ResRole, 200, "n2.0/epoch-200", 0, 0, 2900, ResultOK)
	h.write("n2.0", ResJob, 5000, "n2.0/job-1", 0, 3000, 3000, ResultOK)
	h.write("n1.1", ResJob, 5001, "n1.1/job-2", 0, 4000, 4000, ResultOK)
	h.add(Event{Kind: KindError, Node: "n2.0", Start: at(1500), Class: ClassDocumented, Err: "synclock: lock lease expired", Detail: "synclock.DoKey"})
	return h
}

func checks(r Result) []string {
	var out []string
	for _, v := range r.Violations {
		out = append(out, v.Check)
	}
	return out
}

func TestCheckCleanHistory(t *testing.T) {
	r := Check(clean().final(), opts)
	if len(r.Violations) > 0 {
		t.Fatalf("clean history: %d violations:\n%s", len(r.Violations), r.Summary())
	}
	if r.StaleRejected != 2 || r.Increments != r.Accepted[ResCounter] || r.FinalCounter != int64(r.Increments) {
		t.Errorf("figures: %s", r.Summary())
	}
	if r.HealsChecked != 1 || r.HealsSkipped != 0 {
		t.Errorf("heals checked %d, skipped %d; want 1, 0", r.HealsChecked, r.HealsSkipped)
	}
	// n1 read true until 1.0 s, n2 from 2.6 s.
	if r.MaxNoMasterMs != 1600 {
		t.Errorf("MaxNoMasterMs = %v, want 1600", r.MaxNoMasterMs)
	}
	if r.MaxLockUnavailableMs < 1600 || r.MaxLockUnavailableMs > 1800 {
		t.Errorf("MaxLockUnavailableMs = %v, want the 1.6-1.8 s standstill", r.MaxLockUnavailableMs)
	}
	if r.MaxTwoMastersMs != 0 || r.Faults[FaultKill9] != 1 {
		t.Errorf("MaxTwoMastersMs %v, faults %v", r.MaxTwoMastersMs, r.Faults)
	}
}

// Each bug, planted in the clean history, must be reported by its check
// with a message that names it.
func TestCheckFindsEachViolation(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(h *hist)
		check string
		words []string
	}{
		{"stale counter write applied", func(h *hist) {
			h.accept("n1.0", ResCounter, 900, "n1.0/stale", h.value+1, 0, 6100)
		}, CheckTokenOrder, []string{"counter", "token 900", "after token"}},
		{"stale job write applied", func(h *hist) {
			h.accept("n1.1", ResJob, 4999, "n1.1/job-3", 0, 5000, 5000)
		}, CheckTokenOrder, []string{"job", "4999"}},
		{"older epoch applied", func(h *hist) {
			h.accept("n1.0", ResRole, 100, "n1.0/epoch-100", 0, 0, 3100)
		}, CheckTokenOrder, []string{"role", "token 100"}},
		{"one epoch from two nodes", func(h *hist) {
			h.accept("n1.1", ResRole, 200, "n1.1/epoch-200", 0, 0, 3100)
		}, CheckEpochUnique, []string{"epoch 200", "n2.0", "n1.1"}},
		{"one epoch read by two nodes", func(h *hist) {
			h.master("n1.1", 200, 7000, 7100)
		}, CheckEpochUnique, []string{"epoch 200", "n1.1"}},
		{"two masters at once", func(h *hist) {
			h.master("n1.1", 300, 5000, 5300)
		}, CheckTwoMasters, []string{"n2.0", "n1.1", "300.0 ms"}},
		{"lost increment", func(h *hist) {
			h.write("n1.1", ResCounter, 9000, "n1.1/x", h.value, 0, 6100, ResultOK) // wrote value, not value+1
		}, CheckCounterSequence, []string{"lost"}},
		{"undone increments", func(h *hist) {
			h.write("n1.1", ResCounter, 9000, "n1.1/x", 3, 0, 6100, ResultOK)
		}, CheckCounterSequence, []string{"went back"}},
		{"acknowledged but not in the counter", func(h *hist) {
			h.write("n1.1", ResCounter, 9000, "n1.1/x", h.value+1, 0, 6100, ResultOK)
			h.value -= 2 // the final read shows two fewer
		}, CheckCounter, []string{"2 lost"}},
		{"counter beyond acknowledged", func(h *hist) {
			h.value += 3
		}, CheckCounter, []string{"3 doubled"}},
		{"token granted twice", func(h *hist) {
			h.add(Event{Kind: KindHold, Node: "n1.1", Start: at(5500), Resource: ResLock, Token: 1002, Holding: "n1.1/dup"})
		}, CheckTokenReuse, []string{"token 1002", "n1.1/dup"}},
		{"job fire time run twice", func(h *hist) {
			h.write("n2.0", ResJob, 5002, "n2.0/job-9", 0, 4000, 4300, ResultOK)
		}, CheckJobOnce, []string{"ran twice", "n1.1", "n2.0"}},
		{"job fire time run again late, its write lost", func(h *hist) {
			h.add(Event{Kind: KindHold, Node: "n1.1", Start: at(7000), Resource: ResJob, Token: 5100, Holding: "n1.1/job-20", Fire: 7000})
			h.add(Event{Kind: KindHold, Node: "n2.0", Start: at(9500), Resource: ResJob, Token: 5101, Holding: "n2.0/job-21", Fire: 7000})
		}, CheckJobOnce, []string{"ran twice", "n1.1", "n2.0"}},
		{"no master after a heal", func(h *hist) {
			h.fault(FaultPartition, 6500, 7000)
			h.inc("n2.0", 8000, 7500)
			h.start("n3.0", 10500) // the history runs past the window
		}, CheckLivenessMaster, []string{"partition", "3s"}},
		{"lock stuck after a heal", func(h *hist) {
			h.master("n2.0", 200, 6000, 11000)
			h.fault(FaultServerPause, 6500, 7000)
		}, CheckLivenessLock, []string{"server_pause", "no counter increment"}},
		{"undocumented error", func(h *hist) {
			h.add(Event{Kind: KindError, Node: "n2.0", Start: at(3000), Class: ClassUndocumented, Err: "unexpected data in store", Detail: "synclock.DoKey"})
		}, CheckErrors, []string{"undocumented", "unexpected data in store"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := clean()
			c.plant(h)
			r := Check(h.final(), opts)
			var found *Violation
			for i, v := range r.Violations {
				if v.Check == c.check {
					found = &r.Violations[i]
					break
				}
			}
			if found == nil {
				t.Fatalf("check %s not reported; reported %v:\n%s", c.check, checks(r), r.Summary())
			}
			for _, w := range c.words {
				if !strings.Contains(found.Message, w) {
					t.Errorf("message %q does not say %q", found.Message, w)
				}
			}
			if len(found.Around) == 0 {
				t.Error("no history around the violation")
			}
			if !strings.Contains(r.Summary(), found.Message) {
				t.Error("Summary does not show the violation")
			}
		})
	}
}

func TestCheckIndeterminateWrites(t *testing.T) {
	h := clean()
	// Two writes whose node died before the outcome; one of them landed.
	h.write("n1.1", ResCounter, 9000, "n1.1/a", h.value+1, 0, 6100, "")
	h.accept("n1.1", ResCounter, 9000, "n1.1/a", h.value+1, 0, 6100)
	h.write("n1.1", ResCounter, 9001, "n1.1/b", h.value+1, 0, 6200, "")
	r := Check(h.final(), opts)
	if len(r.Violations) > 0 {
		t.Fatalf("indeterminate writes within bounds: %v\n%s", checks(r), r.Summary())
	}
	if r.Indeterminate != 2 {
		t.Errorf("Indeterminate = %d, want 2", r.Indeterminate)
	}
	h.value += 2 // now beyond acknowledged + indeterminate
	if r := Check(h.final(), opts); !slices.Contains(checks(r), CheckCounter) {
		t.Errorf("counter beyond acknowledged + indeterminate not reported: %v", checks(r))
	}
}

func TestCheckSkipsHealsItCannotJudge(t *testing.T) {
	h := clean()
	// A second fault starts within the first's window, and a third heals
	// too near the end of the history.
	h.fault(FaultSigstop, 1500, 2000)
	h.fault(FaultPartition, 5800, 5900)
	r := Check(h.final(), opts)
	if r.HealsChecked != 1 || r.HealsSkipped != 2 {
		t.Errorf("checked %d, skipped %d; want 1 (the sigstop), 2", r.HealsChecked, r.HealsSkipped)
	}
	if slices.Contains(checks(r), CheckLivenessMaster) {
		t.Errorf("a skipped heal was judged: %s", r.Summary())
	}
}

func TestCheckMergesRewrittenIntervals(t *testing.T) {
	h := &hist{}
	// n1's interval is written three times with growing ends, out of
	// order; n2's starts after the largest end: no overlap.
	h.add(Event{Kind: KindMaster, Node: "n1.0", Start: at(0), End: at(900), Token: 1})
	h.add(Event{Kind: KindMaster, Node: "n1.0", Start: at(0), End: at(300), Token: 1})
	h.add(Event{Kind: KindMaster, Node: "n1.0", Start: at(0), End: at(600), Token: 1})
	h.master("n2.0", 2, 950, 2000)
	r := Check(h.final(), opts)
	if len(r.Violations) > 0 || r.MaxNoMasterMs != 50 {
		t.Errorf("violations %v, MaxNoMasterMs %v (want 50):\n%s", checks(r), r.MaxNoMasterMs, r.Summary())
	}
	// n2 from 850 ms overlaps n1's largest end by 50 ms.
	h.master("n3.0", 3, 850, 870)
	r = Check(h.final(), opts)
	if !slices.Contains(checks(r), CheckTwoMasters) || r.MaxTwoMastersMs != 20 {
		t.Errorf("overlap with the largest end: %v, MaxTwoMastersMs %v (want 20)", checks(r), r.MaxTwoMastersMs)
	}
}

func TestReport(t *testing.T) {
	h := clean()
	h.accept("n1.0", ResCounter, 900, "n1.0/stale", h.value+1, 0, 6100)
	events := h.final()
	r := Check(events, opts)
	rep := NewReport(7, 61*time.Second, "redis", "standalone", r, events)
	if rep.Seed != 7 || rep.DurationS != 61 || rep.Nodes != 3 || rep.Violations != len(r.Violations) || rep.Violations == 0 {
		t.Errorf("report %+v", rep)
	}
	for _, k := range FaultKinds {
		if _, ok := rep.Faults[k]; !ok {
			t.Errorf("report lacks fault kind %s", k)
		}
	}
	if rep.Faults[FaultKill9] != 1 || rep.ViolationDetails[0].Check != CheckTokenOrder {
		t.Errorf("faults %v, details %v", rep.Faults, rep.ViolationDetails)
	}
	table := rep.Table()
	for _, w := range []string{"seed 7", "kill9 1", "violations", "token-order"} {
		if !strings.Contains(table, w) {
			t.Errorf("table lacks %q:\n%s", w, table)
		}
	}
	path := t.TempDir() + "/chaos-report.json"
	if err := WriteReports(path, []Report{rep}); err != nil {
		t.Fatal(err)
	}
}

// A fire time run twice is one violation, though the nodes' runs and the
// ledger's writes both show it.
func TestJobFireRunTwiceReportedOnce(t *testing.T) {
	h := clean()
	h.add(Event{Kind: KindHold, Node: "n1.1", Start: at(3990), Resource: ResJob, Token: 5001, Holding: "n1.1/job-1", Fire: 4000})
	h.add(Event{Kind: KindHold, Node: "n2.0", Start: at(4290), Resource: ResJob, Token: 5002, Holding: "n2.0/job-9", Fire: 4000})
	h.write("n2.0", ResJob, 5002, "n2.0/job-9", 0, 4000, 4300, ResultOK)
	r := Check(h.final(), opts)
	n := 0
	for _, v := range r.Violations {
		if v.Check == CheckJobOnce {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d job-once violations, want 1:\n%s", n, r.Summary())
	}
}
