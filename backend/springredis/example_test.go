package springredis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/backend/springredis"
)

// A Go instance takes the role of service payroll in the Spring
// framework's layout: the key is the service's name and its value the
// instance ID, which a Java instance of payroll reads as its master.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr()}) // your Redis's address
	defer rdb.Close()

	// The restart guard is off only because this Redis was started for
	// the example; a service keeps it.
	store, err := springredis.New(rdb, springredis.Layout{}, redisbackend.WithoutRestartGuard())
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	key := backend.AppKey("acme", "payroll", "role")
	owner := "10.0.0.7:acme:payroll:8080#3f9a"
	if _, err := store.Acquire(ctx, key, owner, 45*time.Second, 0); err != nil {
		panic(err)
	}
	defer store.Release(ctx, key, owner, 0) // hand the role back
	v, _ := rdb.Get(ctx, store.Shared(key)).Result()
	fmt.Printf("%s = %s\n", store.Shared(key), v)
	fmt.Println(store.Shared(backend.AppKey("acme", "payroll", "job", "nightly-export")))
	// Output:
	// payroll = 10.0.0.7:acme:payroll:8080
	// job-lock:default:nightly-export
}
