package chaos

import (
	"context"
	"testing"

	"github.com/baton-go/baton/testkit/testenv"
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

// A read presents its token too: once a newer holder has read, an older
// one can neither read nor write, even before the newer one wrote.
func TestLedgerFencedRead(t *testing.T) {
	r := testenv.NewRedis(t)
	l := NewLedger(r.Client(t))
	ctx := context.Background()
	if ok, err := l.Write(ctx, "n1.0", ResCounter, 3, "n1.0/a", 1, 0); err != nil || !ok {
		t.Fatalf("first write: %v, %v", ok, err)
	}
	if v, ok, err := l.Read(ctx, "n2.0", ResCounter, 5); err != nil || !ok || v != 1 {
		t.Fatalf("read with token 5: %d, %v, %v; want 1, true", v, ok, err)
	}
	if _, ok, err := l.Read(ctx, "n1.0", ResCounter, 4); err != nil || ok {
		t.Errorf("read with token 4 after one with 5: ok %v, %v; want refused", ok, err)
	}
	if ok, err := l.Write(ctx, "n1.0", ResCounter, 4, "n1.0/b", 2, 0); err != nil || ok {
		t.Errorf("write with token 4 after a read with 5: ok %v, %v; want refused", ok, err)
	}
	if ok, err := l.Write(ctx, "n2.0", ResCounter, 5, "n2.0/a", 2, 0); err != nil || !ok {
		t.Errorf("write with token 5 after its own read: ok %v, %v", ok, err)
	}
	if v, err := l.Value(ctx, ResCounter); err != nil || v != 2 {
		t.Errorf("value %d, %v; want 2", v, err)
	}
	l.Unfenced = true
	if v, ok, err := l.Read(ctx, "n1.0", ResCounter, 1); err != nil || !ok || v != 2 {
		t.Errorf("unfenced read with an old token: %d, %v, %v; want 2, true", v, ok, err)
	}
}
