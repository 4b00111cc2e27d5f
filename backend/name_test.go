package backend_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/backend/springredis"
)

var (
	_ backend.Namer = (*membackend.Store)(nil)
	_ backend.Namer = (*redisbackend.Store)(nil)
	_ backend.Namer = (*springredis.Store)(nil)
)

// wrapped is a store that does not name itself, as a test's wrapper.
type wrapped struct{ backend.Store }

// renamed names itself "" and so leaves the name to the fallback.
type renamed struct{ backend.Store }

func (renamed) StoreName() string { return "" }

// Stores name the kind of store they talk to, so that a log line says
// backend=redis, sentinel or cluster rather than the package of a type
// that wraps the store (config.RedisStore logged backend=config).
func TestStoreName(t *testing.T) {
	clients := map[string]redis.UniversalClient{
		"redis":    redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}),
		"sentinel": redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}}),
		"cluster":  redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}),
		"ring":     redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}),
	}
	for want, rdb := range clients {
		defer rdb.Close()
		s, err := redisbackend.New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		if got := backend.StoreName(s); got != want {
			t.Errorf("StoreName of a redisbackend store on a %T = %q, want %q", rdb, got, want)
		}
		sp, err := springredis.New(rdb, springredis.Layout{})
		if want == "redis" && err == nil {
			if got := backend.StoreName(sp); got != "spring" {
				t.Errorf("StoreName of a springredis store = %q, want spring", got)
			}
		}
	}
	for _, tc := range []struct {
		s    backend.Store
		want string
	}{
		{membackend.New(), "memory"},
		{wrapped{membackend.New()}, "backend_test"},
		{renamed{membackend.New()}, "backend_test"},
		{(*redisbackend.Store)(nil), "redisbackend"}, // no panic
		{nil, ""},
	} {
		if got := backend.StoreName(tc.s); got != tc.want {
			t.Errorf("StoreName(%T) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
