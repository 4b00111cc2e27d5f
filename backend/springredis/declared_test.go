package springredis_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/springredis"
)

// declaredShim returns redisbackend's testdata/declared.lua, the Lua that
// makes a script fail on a key it touches without declaring it in KEYS
// (redisbackend's tests put it in front of their store's scripts).
func declaredShim(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("../redisbackend/testdata/declared.lua")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// declaredKeys is a client hook that runs every script of the client
// behind the declared-keys shim: it puts the shim in front of each EVAL's
// script and answers each EVALSHA with NOSCRIPT without sending it, so
// that go-redis sends the script again with EVAL. It covers the store's
// own scripts and those of the redisbackend store beside it (watch marks,
// members) alike. Scripts in a pipeline are not rewritten; the store
// sends none.
type declaredKeys struct{ shim string }

// checkDeclared makes every script rdb runs fail on a key it did not
// declare in KEYS, as servers that enforce Redis's scripting rules refuse
// it. Hooking a client twice puts the shim in front once.
func checkDeclared(t testing.TB, rdb redis.UniversalClient) {
	t.Helper()
	rdb.AddHook(declaredKeys{shim: declaredShim(t)})
}

func (declaredKeys) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d declaredKeys) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		switch name := strings.ToLower(cmd.Name()); {
		case name == "evalsha" || name == "evalsha_ro":
			cmd.SetErr(redis.ErrNoScript)
			return redis.ErrNoScript
		case (name == "eval" || name == "eval_ro") && len(args) > 1:
			if src, ok := args[1].(string); ok && !strings.HasPrefix(src, d.shim) {
				args[1] = d.shim + src
			}
		}
		return next(ctx, cmd)
	}
}

func (declaredKeys) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The hook that newStore puts on its client makes a script that touches a
// key it did not declare fail, sent with EVALSHA or EVAL, and leaves the
// store's own scripts working: each of them declares all it touches.
func TestDeclaredKeysHook(t *testing.T) {
	ctx := ctxT(t)
	rdb := server.Client(t)
	s := newStore(t, rdb, springredis.Layout{})
	undeclared := redis.NewScript("return redis.call('GET', KEYS[1] .. ':elsewhere')")
	if err := undeclared.Run(ctx, rdb, []string{"{hook}:k"}).Err(); err == nil || !strings.Contains(err.Error(), "undeclared key") {
		t.Errorf("a script touching an undeclared key: %v; want the shim to refuse it", err)
	}
	if err := rdb.Eval(ctx, "return redis.call('SET', 'elsewhere', '1')", nil).Err(); err == nil || !strings.Contains(err.Error(), "undeclared key") {
		t.Errorf("EVAL touching an undeclared key: %v; want the shim to refuse it", err)
	}
	key := backend.AppKey("acme", "billing", "lock", "declared")
	w, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l, err := s.Acquire(ctx, key, goID+"#me", patience, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx, key, goID+"#me", patience); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Break(ctx, key, goID+"#me", l.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, key, goID+"#me", patience, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, goID+"#me", 0); err != nil {
		t.Fatal(err)
	}
	group := backend.AppKey("acme", "billing", "members")
	if _, err := s.Heartbeat(ctx, group, backend.Member{Name: goID + "#me", Identity: goID}, patience); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Members(ctx, group); err != nil {
		t.Fatal(err)
	}
	if err := s.Leave(ctx, group, goID+"#me"); err != nil {
		t.Fatal(err)
	}
}
