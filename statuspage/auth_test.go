package statuspage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/statuspage"
	"github.com/baton-go/baton/testkit/testenv"
)

// A page whose store logs in with a wrong password says that the store
// refused the credentials, not that it is unreachable: the fix is the
// password, not the network.
func TestHealthzWrongPassword(t *testing.T) {
	srv := testenv.NewRedis(t, testenv.RedisOptions{Config: []string{"requirepass right-pw"}})
	store := func(pw string) *redisbackend.Store {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: pw})
		s, err := redisbackend.New(rdb, redisbackend.WithoutRestartGuard())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(); rdb.Close() })
		return s
	}
	id, err := instanceid.New("127.0.0.1", "acme", newApp(), 8081)
	if err != nil {
		t.Fatal(err)
	}
	el, err := role.NewElector(store("right-pw"), id, fastRole, role.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	page, err := statuspage.New(store("wrong-pw"), el)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Start(el, el.Run)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		testenv.Stop(ctx, el)
	})
	rec := httptest.NewRecorder()
	page.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, "store refused the credentials") || strings.Contains(body, "unreachable") {
		t.Errorf("/healthz with a wrong password answered %d %q; want 503 saying the store refused the credentials", rec.Code, body)
	}
	if strings.Contains(body, "wrong-pw") {
		t.Errorf("/healthz shows the password: %q", body)
	}
}
