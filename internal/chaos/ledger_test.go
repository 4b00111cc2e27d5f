package chaos

import (
	"context"
	"testing"

	"github.com/baton-go/baton/internal/testenv"
)

func TestLedgerFencing(t *testing.T) {
	r := testenv.NewRedis(t)
	l := NewLedger(r.Client(t))
	ctx := context.Background()
	write := func(node, res string, token uint64) bool {
		t.Helper()
		ok, err := l.Write(ctx, node, res, token, node+"/h", int64(token), 0)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// Strict resources: only a larger token, compared as numbers even
	// when the decimal lengths differ.
	for _, c := range []struct {
		node  string
		token uint64
		want  bool
	}{
		{"n1.0", 9, true}, {"n2.0", 10, true}, {"n1.0", 9, false}, {"n2.0", 10, false},
		{"n1.0", 1795537379490096, true}, {"n2.0", 999999999999999, false},
	} {
		if got := write(c.node, ResCounter, c.token); got != c.want {
			t.Errorf("counter write by %s with token %d: applied %v, want %v", c.node, c.token, got, c.want)
		}
	}
	// The role: an equal epoch again from its writer only.
	for _, c := range []struct {
		node  string
		token uint64
		want  bool
	}{
		{"n1.0", 5, true}, {"n1.0", 5, true}, {"n2.0", 5, false}, {"n2.0", 6, true}, {"n1.0", 5, false},
	} {
		if got := write(c.node, ResRole, c.token); got != c.want {
			t.Errorf("role write by %s with epoch %d: applied %v, want %v", c.node, c.token, got, c.want)
		}
	}
	// The broken build accepts a stale token.
	l.Unfenced = true
	if !write("n1.0", ResJob, 7) || !write("n2.0", ResJob, 3) {
		t.Error("unfenced ledger rejected a write")
	}

	h, err := l.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var accepted []Event
	final := map[string]int64{}
	for _, e := range h {
		switch e.Kind {
		case KindAccepted:
			accepted = append(accepted, e)
		case KindFinal:
			final[e.Resource] = e.Value
		}
	}
	// 3 counter + 3 role + 2 job writes applied.
	if len(accepted) != 8 {
		t.Fatalf("%d accepted events, want 8: %v", len(accepted), accepted)
	}
	for i, e := range accepted {
		if e.Seq != uint64(i+1) || e.Start == 0 || e.Holding != e.Node+"/h" {
			t.Errorf("accepted[%d] = %v: want seq %d, a time and the holding", i, e, i+1)
		}
	}
	if a := accepted[2]; a.Resource != ResCounter || a.Token != 1795537379490096 || a.Node != "n1.0" || a.Value != 1795537379490096 {
		t.Errorf("third accepted write = %v", a)
	}
	if final[ResCounter] != 1795537379490096 || final[ResRole] != 6 || final[ResJob] != 3 {
		t.Errorf("final values %v", final)
	}
}

func TestParseLogEntry(t *testing.T) {
	if _, err := parseLogEntry("counter 5 n1.0 h 1 0"); err == nil {
		t.Error("six fields parsed")
	}
	if _, err := parseLogEntry("counter x n1.0 h 1 0 1"); err == nil {
		t.Error("a bad token parsed")
	}
	e, err := parseLogEntry("job 12 n3.1 n3.1/job-4 0 1795537382000 1795537382000548")
	if err != nil {
		t.Fatal(err)
	}
	if e.Resource != ResJob || e.Token != 12 || e.Node != "n3.1" || e.Holding != "n3.1/job-4" || e.Fire != 1795537382000 || e.Start != 1795537382000548000 {
		t.Errorf("parsed %v", e)
	}
}
