package chaos

import (
	"slices"
	"testing"
	"time"
)

func TestScheduleReplaysFromSeed(t *testing.T) {
	o := ScheduleOptions{Kinds: FaultKinds, Duration: 3 * time.Minute, TTL: 2 * time.Second}
	a, err := Schedule(42, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Schedule(42, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		t.Fatalf("seed 42 gave two schedules:\n%v\n%v", a, b)
	}
	c, err := Schedule(43, o)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 gave the same schedule %v", a)
	}
}

func TestScheduleInjectsEveryKindFirst(t *testing.T) {
	kinds := []string{FaultKill9, FaultSigstop, FaultPartition, FaultServerPause}
	for seed := range int64(20) {
		steps, err := Schedule(seed, ScheduleOptions{Kinds: kinds, Duration: time.Second, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		// The duration fits no step, yet every kind is injected once.
		if len(steps) != len(kinds) {
			t.Fatalf("seed %d: %d steps, want one per kind (%d): %v", seed, len(steps), len(kinds), steps)
		}
		var got []string
		for _, s := range steps {
			got = append(got, s.Fault)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(kinds))
		if !slices.Equal(got, want) {
			t.Errorf("seed %d: kinds %v, want each of %v once", seed, got, want)
		}
	}
}

func TestScheduleTiming(t *testing.T) {
	ttl := 2 * time.Second
	steps, err := Schedule(7, ScheduleOptions{Kinds: FaultKinds, Duration: 10 * time.Minute, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	var spent time.Duration
	for _, s := range steps {
		spent += s.Hold + s.Quiet
		switch s.Fault {
		case FaultSigstop, FaultPartition, FaultServerPause:
			if s.Hold < ttl*6/5 || s.Hold > 2*ttl {
				t.Errorf("%v: hold outside 1.2..2 TTL", s)
			}
		case FaultKill9, FaultServerRestart, FaultSentinelFailover:
			if s.Hold != 0 {
				t.Errorf("%v: an instant fault has a hold", s)
			}
		}
		if s.Quiet != 4*ttl {
			t.Errorf("%v: quiet %v, want the default 4 TTL", s, s.Quiet)
		}
	}
	if spent > 10*time.Minute {
		t.Errorf("schedule spends %v, more than its 10m", spent)
	}
	if len(steps) < 20 {
		t.Errorf("only %d steps in 10 minutes of 2 s TTLs", len(steps))
	}
}

func TestScheduleRejectsBadOptions(t *testing.T) {
	for name, o := range map[string]ScheduleOptions{
		"no kinds":     {TTL: time.Second},
		"zero ttl":     {Kinds: FaultKinds},
		"unknown kind": {Kinds: []string{"meteor"}, TTL: time.Second},
	} {
		if _, err := Schedule(1, o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Three runs rotated 0, 1, 2 inject every variant in their first passes.
func TestScheduleRotatesVariants(t *testing.T) {
	seen := map[string]bool{}
	for rotate := range 3 {
		steps, err := Schedule(9, ScheduleOptions{Kinds: FaultKinds, TTL: time.Second, Rotate: rotate})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			seen[s.Fault+"/"+s.Variant] = true
		}
	}
	for _, want := range []string{
		"kill9/master", "kill9/holder", "sigstop/late-fire", "sigstop/master", "sigstop/holder", "partition/master", "partition/holder",
		"server_restart_empty/plain", "server_restart_empty/new-node", "server_restart_empty/paused-holder",
	} {
		if !seen[want] {
			t.Errorf("variant %s never injected in three rotated first passes (seen %v)", want, seen)
		}
	}
}
