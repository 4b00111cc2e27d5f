package main

import (
	"context"
	"fmt"
	"io"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend/redisbackend"
)

// functions runs "functions" (print baton's Redis function library) and
// "functions load" (load it into the configured Redis, every master of a
// Cluster), which needs no service and no store.
func functions(ctx context.Context, o options, args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		_, err := io.WriteString(stdout, redisbackend.FunctionLibrary())
		return err
	case len(args) > 1 || args[0] != "load":
		return usagef("usage: batonctl [flags] functions [load]")
	}
	cfg, err := loadConfig(o)
	if err != nil {
		return err
	}
	opts, err := cfg.Redis.ClientOptions()
	if err != nil {
		return err
	}
	rdb := redis.NewUniversalClient(opts)
	defer rdb.Close()
	lctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := redisbackend.LoadFunctions(lctx, rdb); err != nil {
		return fmt.Errorf("%w (at %s)", err, cfg.Redis.Where())
	}
	_, err = fmt.Fprintf(stdout, "loaded baton's Redis functions into %s\n", cfg.Redis.Where())
	return err
}
