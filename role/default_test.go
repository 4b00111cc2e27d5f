package role

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/baton-go/baton/internal/testenv"
)

// IsMaster with no default registered reports false and says so once, in
// an error naming its caller and the call that registers the default;
// after a SetDefault it says so again the next time none is set.
func TestIsMasterWithoutDefaultLogsOnce(t *testing.T) {
	var logs testenv.SyncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev); SetDefault(nil) })
	SetDefault(nil)

	if IsMaster() || IsMaster() {
		t.Fatal("IsMaster true without a default")
	}
	out := logs.String()
	if n := strings.Count(out, "level=ERROR"); n != 1 {
		t.Fatalf("two calls logged %d errors, want 1:\n%s", n, out)
	}
	for _, want := range []string{"role.SetDefault(el)", "no default elector", "caller=github.com/baton-go/baton/role.TestIsMasterWithoutDefaultLogsOnce"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}

	a, _ := NewElector(newStore(t), mustID(t, 1), fast, quiet)
	SetDefault(a)
	SetDefault(nil)
	if IsMaster() {
		t.Fatal("IsMaster true after the default was cleared")
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 2 {
		t.Fatalf("after SetDefault(nil) IsMaster logged %d errors in all, want 2", n)
	}
}
