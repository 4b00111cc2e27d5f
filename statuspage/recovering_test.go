package statuspage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/statuspage"
)

// TestRecoveringShown checks that while the store refuses the role to
// everyone after a restart without its data (its restart guard), /status
// says until when (instance.recovering_until and recovering_ms) and the
// page says the store is recovering; the instance is a slave with no
// master, and not unhealthy for it.
func TestRecoveringShown(t *testing.T) {
	const guard = time.Minute
	mem := membackend.New(membackend.WithRestartGuard(guard))
	t.Cleanup(func() { mem.Close() })
	mem.Restart()
	in := start(t, func(testing.TB) backend.Store { return mem }, newApp(), 8081)
	var s statuspage.Status
	waitFor(t, "/status to say the store is recovering", func() bool {
		s = status(t, in)
		return s.Instance.RecoveringUntil != nil
	})
	if left := s.Instance.RecoveringMillis; left <= 0 || left > guard.Milliseconds() {
		t.Errorf("/status says recovering_ms %d; want in (0, %d]", left, guard.Milliseconds())
	}
	if until := s.Instance.RecoveringUntil; !until.After(s.GeneratedAt) || until.After(s.GeneratedAt.Add(guard)) {
		t.Errorf("/status says recovering_until %v, read at %v; want within %v after", until, s.GeneratedAt, guard)
	}
	if s.Master != nil || s.Instance.Role != "slave" || !s.Healthy {
		t.Errorf("/status while recovering: master %+v, role %q, healthy %v (problems %q); want no master, a healthy slave", s.Master, s.Instance.Role, s.Healthy, s.Problems)
	}
	_, page := get(t, in, "")
	if !strings.Contains(page, `id="recovering"`) || !strings.Contains(page, "The store is recovering") {
		t.Errorf("the page while the store recovers does not say so:\n%s", page)
	}
}
