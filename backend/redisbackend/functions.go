package redisbackend

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Redis functions.
//
// A store sends its scripts with EVALSHA (and EVAL), so its user may run
// any Lua script: confined to its keys and commands, but not in time. A
// store WithFunctions calls the functions of baton's library instead
// (FCALL), which an administrator loads once per server (LoadFunctions,
// or FunctionLibrary with redis-cli); its user needs FCALL and neither
// EVAL nor EVALSHA (TenantACLRules), so it runs baton's code alone.
//
// The library is named after its code, "baton_<12 hex digits>", and so
// is each of its functions ("baton_<digits>_acquire", ...): a fleet in
// the middle of an upgrade uses two libraries side by side, each version
// its own, and FUNCTION DELETE removes the old one afterwards.

// WithFunctions makes the store call baton's Redis functions (FCALL)
// instead of sending its Lua scripts (EVALSHA, EVAL), so that its ACL
// user needs no EVAL (TenantACLRules). An administrator loads the
// functions of this version of baton into the server before the store
// is used: LoadFunctions, or
//
//	redis-cli -x FUNCTION LOAD REPLACE < library.lua
//
// with FunctionLibrary's text; functions are kept in RDB and AOF files
// and replicated, but a server restarted without its data has lost them,
// and then every call fails with an error that says to load them. It
// needs Redis 7.0 or later.
func WithFunctions() Option {
	return func(s *Store) error {
		s.scripts = functionScripts()
		return nil
	}
}

// LoadFunctions loads baton's Redis functions (FunctionLibrary) into the
// server of rdb, or into every master of a Cluster, replacing the library
// of the same version if the server has it. Its user needs FUNCTION
// (an administrator's user, not a tenant's).
func LoadFunctions(ctx context.Context, rdb redis.UniversalClient) error {
	lib := FunctionLibrary()
	load := func(ctx context.Context, c *redis.Client) error { return c.FunctionLoadReplace(ctx, lib).Err() }
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, load)
	case *redis.Client:
		err = load(ctx, c)
	default:
		err = rdb.FunctionLoadReplace(ctx, lib).Err()
	}
	if err != nil {
		return fmt.Errorf("redisbackend: loading baton's Redis functions (library %s): %w", libraryName(), err)
	}
	return nil
}

// FunctionLibrary returns the Lua source of baton's Redis function
// library, for FUNCTION LOAD (see WithFunctions).
func FunctionLibrary() string { return library().src }

// libraryName returns the name of baton's function library.
func libraryName() string { return library().name }

type lib struct{ name, src string }

// library builds baton's function library from the store's scripts: one
// function per script, whose parameters are the KEYS and ARGV the script
// reads. The lease scripts' shared part (the fencing rule and the
// prelude, which only define functions) is in the library once, at its
// top, so that it is made when the library loads, not on every call; it
// reads the KEYS and ARGV of the call that runs, which each function
// sets first, and its body is the script's own text. A group script's
// function holds the whole script.
var library = sync.OnceValue(func() lib {
	h := sha1.New()
	scripts := leaseScripts.all()
	for _, sc := range scripts {
		fmt.Fprintf(h, "%s\n%s\n", sc.name, sc.src)
	}
	name := "baton_" + hex.EncodeToString(h.Sum(nil))[:12]
	var b strings.Builder
	fmt.Fprintf(&b, "#!lua name=%s\n\n", name)
	b.WriteString("-- The KEYS and ARGV of the function that runs (each sets them first),\n" +
		"-- for the lease scripts' shared part below, which reads them.\nlocal KEYS, ARGV\n\n")
	b.WriteString(leaseScripts.acquire.shared)
	for _, sc := range scripts {
		if sc.shared != "" {
			fmt.Fprintf(&b, "\nredis.register_function('%s_%s', function(keys, argv)\nKEYS, ARGV = keys, argv\n%s\nend)\n", name, sc.name, sc.body)
			continue
		}
		fmt.Fprintf(&b, "\nredis.register_function('%s_%s', function(KEYS, ARGV)\n%s\nend)\n", name, sc.name, sc.src)
	}
	return lib{name: name, src: b.String()}
})

// functionScripts returns the scripts of a store WithFunctions: each
// runs the function of baton's library named after it.
var functionScripts = sync.OnceValue(func() *scriptSet {
	set := *leaseScripts
	name := libraryName()
	set.each(func(sc **script) {
		fn := *(*sc)
		fn.fn = name + "_" + fn.name
		fn.head = [2]any{"fcall", fn.fn}
		*sc = &fn
	})
	return &set
})

// each calls f with the address of every script of set. (A test checks
// that it names every field.)
func (set *scriptSet) each(f func(**script)) {
	for _, sc := range []**script{
		&set.acquire, &set.acquireQueued, &set.dequeue, &set.renew, &set.release, &set.mark, &set.get, &set.breakLease, &set.inspect,
		&set.heartbeat, &set.members, &set.leave, &set.top,
	} {
		f(sc)
	}
}

// all returns the scripts of set.
func (set *scriptSet) all() []*script {
	var out []*script
	set.each(func(sc **script) { out = append(out, *sc) })
	return out
}
