package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Step is one fault of a schedule: what to inject, at whom, for how long,
// and how long to wait after it heals before the next one (the quiet time
// in which the checker expects the fleet to recover).
type Step struct {
	Fault string
	// Variant refines the fault: for kill9, sigstop and partition the
	// target, VariantMaster or VariantHolder (the holder of the counter's
	// lock), and for sigstop also VariantLateFire (a node that is not the
	// master, paused over fires of the locked job, which starts the
	// overdue fire late when it wakes up); for server_restart_empty, VariantPlain, VariantNewNode (a
	// brand-new instance starts right after the restart) or
	// VariantPausedHolder (the lock holder is paused across the restart).
	Variant string
	// Hold is how long the fault lasts: a pause, a partition, a server
	// pause. Zero for instant faults (kill9, restarts, failover).
	Hold time.Duration
	// Quiet is the time after the fault heals before the next step.
	Quiet time.Duration
}

// Variants of a Step.
const (
	VariantMaster       = "master"
	VariantHolder       = "holder"
	VariantPlain        = "plain"
	VariantNewNode      = "new-node"
	VariantPausedHolder = "paused-holder"
	VariantLateFire     = "late-fire"
)

func (s Step) String() string {
	out := s.Fault
	if s.Variant != "" {
		out += "(" + s.Variant + ")"
	}
	if s.Hold > 0 {
		out += fmt.Sprintf(" for %v", s.Hold)
	}
	return out
}

// ScheduleOptions shape a schedule.
type ScheduleOptions struct {
	// Kinds are the fault kinds to draw from. Each appears at least once,
	// in the first len(Kinds) steps, in an order drawn from the seed.
	Kinds []string
	// Duration bounds the schedule: steps are added while the sum of
	// their Hold and Quiet stays within it (but never fewer than one step
	// per kind).
	Duration time.Duration
	// TTL is the longest lease of the run (role TTL, lock hold): pauses
	// and partitions last 1.2 to 2 TTLs, so that leases lapse under them.
	TTL time.Duration
	// Quiet is the wait after each heal. Default 4 x TTL.
	Quiet time.Duration
	// MaxSteps caps the schedule. Default 1000.
	MaxSteps int
	// Rotate picks the variants of the first steps (one per kind): the
	// variant at index Rotate of each kind's list, so that runs on
	// several topologies with Rotate 0, 1, 2 ... together inject every
	// variant even when each runs one step per kind. Later steps draw
	// their variants from the seed.
	Rotate int
}

// Schedule returns the fault schedule of seed: the same seed and options
// give the same steps, so a run that found a violation can be replayed.
func Schedule(seed int64, o ScheduleOptions) ([]Step, error) {
	if len(o.Kinds) == 0 {
		return nil, fmt.Errorf("chaos: schedule with no fault kinds")
	}
	if o.TTL <= 0 {
		return nil, fmt.Errorf("chaos: schedule TTL %v: want > 0", o.TTL)
	}
	for _, k := range o.Kinds {
		if !validFault(k) {
			return nil, fmt.Errorf("chaos: unknown fault kind %q (known: %v)", k, FaultKinds)
		}
	}
	if o.Quiet <= 0 {
		o.Quiet = 4 * o.TTL
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = 1000
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6261746f6e)) // "baton"
	var steps []Step
	var spent time.Duration
	first := make([]string, len(o.Kinds))
	copy(first, o.Kinds)
	rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	for i := 0; i < o.MaxSteps; i++ {
		var kind string
		if i < len(first) {
			kind = first[i]
		} else {
			kind = o.Kinds[rng.IntN(len(o.Kinds))]
		}
		s := step(rng, kind, o, i < len(first))
		if i >= len(first) && spent+s.Hold+s.Quiet > o.Duration {
			break
		}
		spent += s.Hold + s.Quiet
		steps = append(steps, s)
	}
	return steps, nil
}

// step draws the variant and timing of one fault of kind; a step of the
// first pass takes its variant from o.Rotate.
func step(rng *rand.Rand, kind string, o ScheduleOptions, first bool) Step {
	s := Step{Fault: kind, Quiet: o.Quiet}
	lapse := o.TTL + time.Duration(rng.Int64N(int64(o.TTL)))/5*4 + o.TTL/5 // 1.2..2 TTL
	pick := func(vs ...string) string {
		i := rng.IntN(len(vs))
		if first {
			i = ((o.Rotate % len(vs)) + len(vs)) % len(vs)
		}
		return vs[i]
	}
	switch kind {
	case FaultKill9:
		s.Variant = pick(VariantMaster, VariantHolder)
	case FaultSigstop:
		s.Variant = pick(VariantLateFire, VariantMaster, VariantHolder)
		s.Hold = lapse
	case FaultPartition:
		s.Variant = pick(VariantMaster, VariantHolder)
		s.Hold = lapse
	case FaultServerPause:
		s.Hold = lapse
	case FaultServerRestartEmpty:
		s.Variant = pick(VariantPlain, VariantNewNode, VariantPausedHolder)
		if s.Variant == VariantPausedHolder {
			s.Hold = lapse
		}
	}
	return s
}

func validFault(k string) bool {
	for _, f := range FaultKinds {
		if f == k {
			return true
		}
	}
	return false
}
