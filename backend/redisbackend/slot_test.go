package redisbackend

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/testkit/testenv"
)

// hashSlot agrees with the server's CLUSTER KEYSLOT.
func TestHashSlotMatchesServer(t *testing.T) {
	r := testenv.NewRedis(t, testenv.RedisOptions{Config: []string{"cluster-enabled yes"}})
	rdb := redis.NewClient(r.Options())
	defer rdb.Close()
	for _, key := range []string{"", "a", "123456789", "baton:{acme:billing}:role", "{}x", "x{}y", "{a}{b}", "x{y", "héllo", "baton:{invoice:42}"} {
		want, err := rdb.ClusterKeySlot(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := hashSlot(key); int64(got) != want {
			t.Errorf("hashSlot(%q) = %d, server says %d", key, got, want)
		}
	}
}
