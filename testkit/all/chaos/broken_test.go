//go:build chaos

package chaos_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/baton-go/baton/testkit/all/chaos"
)

// TestChaosBrokenFencing shows that the checker can fail. Two nodes share
// the counter; the lock holder is paused past its lease, in the middle of
// its read-modify-write, until the other node has taken the lock and
// written. With the ledger's fencing check on, the paused node's late write
// is rejected and the checker finds nothing; with it off (the node's
// test-only -unfenced switch, a deliberately broken build) the late write
// lands out of token order and undoes an increment, and the checker must
// report both.
func TestChaosBrokenFencing(t *testing.T) {
	for _, unfenced := range []bool{false, true} {
		name := "fenced"
		if unfenced {
			name = "unfenced"
		}
		t.Run(name, func(t *testing.T) { runBroken(t, unfenced) })
	}
}

func runBroken(t *testing.T, unfenced bool) {
	ctx := t.Context()
	c := newCluster(t, "standalone", unfenced)
	// A long think time: the holder spends most of its holding between
	// its read and its write, where the pause has to catch it.
	c.args = []string{"-think", "100ms", "-workers", "1"}
	c.addNode()
	c.addNode()
	if err := c.waitLive(ctx); err != nil {
		t.Fatal(err)
	}
	const attempts = 15
	caught := false
	for i := 0; i < attempts && !caught; i++ {
		n, err := c.target(ctx, chaos.VariantHolder)
		if err != nil {
			t.Fatal(err)
		}
		f := chaos.Event{Kind: chaos.KindFault, Node: "nemesis", Fault: chaos.FaultSigstop, Target: n.name(), Start: time.Now().UnixNano()}
		c.pause(n)
		sleep(ctx, 2*lockHold)
		c.resume(n)
		f.End = time.Now().UnixNano()
		if err := c.nemesis.Write(f); err != nil {
			t.Fatal(err)
		}
		sleep(ctx, time.Second) // the late write lands
		caught = staleWriteSeen(t, ctx, c)
	}
	if !caught {
		t.Fatalf("no stale write in %d pauses of the lock holder: the scenario did not happen, so it proves nothing", attempts)
	}
	events, stop := c.history(ctx)
	res := chaos.Check(events, checkOptions(stop))
	t.Log("\n" + res.Summary())
	var checks []string
	for _, v := range res.Violations {
		checks = append(checks, v.Check)
	}
	if !unfenced {
		if len(res.Violations) > 0 {
			t.Errorf("fenced run: %d violations, want none:\n%s", len(res.Violations), res.Summary())
		}
		if res.StaleRejected == 0 {
			t.Error("fenced run: the checker counted no stale operation, yet the ledger refused one")
		}
		return
	}
	for _, want := range []string{"token-order", "counter-sequence"} {
		if !slices.Contains(checks, want) {
			t.Errorf("unfenced run: the checker did not report %q (reported: %v)", want, checks)
		}
	}
}

// staleWriteSeen reports whether a paused holder's late write (or read)
// reached the ledger: rejected (fenced) or applied out of token order
// (unfenced).
func staleWriteSeen(t *testing.T, ctx context.Context, c *cluster) bool {
	t.Helper()
	if c.unfenced {
		ledger, err := c.ledger.History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var last uint64
		for _, e := range ledger {
			if e.Kind == chaos.KindAccepted && e.Resource == chaos.ResCounter {
				if e.Token < last {
					return true
				}
				last = e.Token
			}
		}
		return false
	}
	events, err := chaos.ReadDir(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(events, func(e chaos.Event) bool {
		return (e.Kind == chaos.KindWrite || e.Kind == chaos.KindRead) && e.Resource == chaos.ResCounter && e.Result == chaos.ResultRejected
	})
}
