package redisbackend

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend/internal/redislua"
)

// Every lease operation is one Lua script, so that the owner check and
// the write that depends on it (and the fencing increment and the
// release notification) happen atomically on the server. Each script is
// a file in lua/, sent behind a shared part: the fencing rule that both
// Redis stores share (backend/internal/redislua) and lua/prelude.lua,
// which defines the functions the scripts share and reads the store's
// settings; then lua/keys.lua names the eight keys every lease script
// declares (K, its fencing counter, line, requests, watch marker and
// mailbox, and the restart guard's markers of its service and tenant).
// The states and transitions they implement are tabled in the package
// doc. The group scripts of the Registry (registry.go) are in lua/group,
// behind a prelude of their own.
//
// A script that did what was asked (granted, renewed or released the
// caller's lease) replies with the lease's token alone, a string: the
// caller knows the owner and the ttl it asked for. Every other reply is
// an array whose first element is a status (see status).

//go:embed lua/*.lua lua/group/*.lua
var luaFiles embed.FS

// scriptSet is the store's scripts: the lease scripts and the
// Registry's group scripts. Every field is a *script, named in each
// (functions.go).
type scriptSet struct {
	acquire, acquireQueued, dequeue, renew, release, mark, get, breakLease, inspect *script
	heartbeat, members, leave, top                                                  *script
}

// leaseScripts are the scripts every store runs.
var leaseScripts = loadScripts("")

// loadScripts reads the scripts: each lease script lua/<name>.lua behind
// lua/keys.lua and the shared part (the fencing rule and the prelude),
// and each group script lua/group/<name>.lua behind
// lua/group/prelude.lua, with shim (Lua that tests add) in front of every
// one.
func loadScripts(shim string) *scriptSet {
	shared := shim + redislua.Fence + readLua("prelude")
	keys := readLua("keys")
	lease := func(name string) *script { return newScript(name, shared, keys+readLua(name)) }
	groupPrelude := shim + readLua("group/prelude")
	group := func(name string) *script {
		return newScript("group_"+name, "", groupPrelude+readLua("group/"+name))
	}
	return &scriptSet{
		acquire:       lease("acquire"),
		acquireQueued: lease("acquire_queued"),
		dequeue:       lease("dequeue"),
		renew:         lease("renew"),
		release:       lease("release"),
		mark:          lease("mark"),
		get:           lease("get"),
		breakLease:    lease("break"),
		inspect:       lease("inspect"),
		heartbeat:     group("heartbeat"),
		members:       group("members"),
		leave:         group("leave"),
		top:           group("top"),
	}
}

// script is one of the store's Lua scripts. A store sends it (EVALSHA,
// and EVAL when the server does not have it yet) or, WithFunctions,
// calls the function of baton's library that runs it (FCALL).
type script struct {
	name string // its name in the library: lowercase letters and '_'
	src  string // shared + body: the text EVAL sends
	// shared is the part of src that only defines functions, the same for
	// every lease script ("" for the group scripts): the library holds it
	// once (functions.go); body is the rest.
	shared, body string
	lua          *redis.Script
	fn           string // the function to call; "" to send the script
	// head is the start of the command that runs it, boxed once:
	// EVALSHA and the script's digest, or FCALL and fn.
	head [2]any
}

func newScript(name, shared, body string) *script {
	src := shared + body
	lua := redis.NewScript(src)
	return &script{name: name, src: src, shared: shared, body: body, lua: lua, head: [2]any{"evalsha", lua.Hash()}}
}

// caller is what runs a script: a client or a pipeline.
type caller interface {
	redis.Scripter
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
}

// run runs sc on c: FCALL of its function, or EVALSHA, then EVAL if the
// server does not have the script.
func (sc *script) run(ctx context.Context, c caller, keys []string, args ...any) *redis.Cmd {
	if sc.fn != "" {
		return c.FCall(ctx, sc.fn, keys, args...)
	}
	return sc.lua.Run(ctx, c, keys, args...)
}

// runLease runs sc, a lease script, on c with keys as keyNames.args
// gives them (their count first, then the keys, boxed once) and the
// store's settings in front of args: FCALL of its function, or EVALSHA,
// then EVAL if the server does not have the script. The command is built
// in one slice: go-redis's EvalSha and FCall would box every key again
// on every call.
func (sc *script) runLease(ctx context.Context, c redis.UniversalClient, keys, settings []any, args ...any) *redis.Cmd {
	cmd := c.Do(ctx, command(sc.head[:], keys, settings, args)...)
	if err := cmd.Err(); err != nil && sc.fn == "" && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return c.Do(ctx, command([]any{"eval", sc.src}, keys, settings, args)...)
	}
	return cmd
}

// command returns the parts given, in order, in one slice.
func command(head, keys, settings, args []any) []any {
	cmd := make([]any, 0, len(head)+len(keys)+len(settings)+len(args))
	cmd = append(cmd, head...)
	cmd = append(cmd, keys...)
	cmd = append(cmd, settings...)
	return append(cmd, args...)
}

// send queues sc on the pipeline pipe: FCALL of its function, or
// EVALSHA (a NOSCRIPT reply asks the caller to load it).
func (sc *script) send(ctx context.Context, pipe redis.Pipeliner, keys []string, args ...any) *redis.Cmd {
	if sc.fn != "" {
		return pipe.FCall(ctx, sc.fn, keys, args...)
	}
	return sc.lua.EvalSha(ctx, pipe, keys, args...)
}

func readLua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return string(b)
}

// scriptSettings returns the first three arguments of every lease script:
// the restart guard in ms (-1 when off), the publish command (SPUBLISH
// on a Cluster, whose subscribers use sharded pub/sub) and whether a
// release hands the key over: "0" for a store that waits for replicas
// (the releasing client could not wait for the grantee's), else "w"
// followed by wake, the store's wake-up id (see Store.wakeChannel).
func scriptSettings(guard int64, sharded, hands bool, wake string) []any {
	publish, hand := "PUBLISH", "0"
	if sharded {
		publish = "SPUBLISH"
	}
	if hands {
		hand = "w" + wake
	}
	return []any{strconv.FormatInt(guard, 10), publish, hand}
}

// keySuffixes follow a lease's Redis key in the first six keys of its
// scripts, in the order lua/keys.lua names them.
var keySuffixes = [...]string{"", fenceSuffix, lineSuffix, requestSuffix, watchedSuffix, mailboxSuffix}

// leaseKeys returns the eight keys of the lease whose Redis key is name:
// the six of keySuffixes, which share one string, so that a script call
// allocates twice for them, not eight times; intact, the tag's marker
// (name itself for none); and tenant, the marker of the tenant's data
// on the server (intact itself on a Cluster).
func leaseKeys(name, intact, tenant string) []string {
	var b strings.Builder
	b.Grow(len(keySuffixes)*len(name) + len(fenceSuffix+lineSuffix+requestSuffix+watchedSuffix+mailboxSuffix))
	var ends [len(keySuffixes)]int
	for i, suffix := range keySuffixes {
		b.WriteString(name)
		b.WriteString(suffix)
		ends[i] = b.Len()
	}
	all, keys := b.String(), make([]string, len(keySuffixes)+2)
	start := 0
	for i, end := range ends {
		keys[i], start = all[start:end], end
	}
	keys[len(keySuffixes)], keys[len(keySuffixes)+1] = intact, tenant
	return keys
}

// run runs a lease script on key with the store's settings in front of
// args.
func (s *Store) run(ctx context.Context, script *script, key string, args ...any) *redis.Cmd {
	return script.runLease(ctx, s.rdb, s.keyNames(key).args, s.settings, args...)
}

// leaseKeys returns the eight keys of key's scripts: on a Cluster, whose
// scripts may touch only the keys of one slot, the tag's marker stands in
// for the tenant's (see Restart guard). Callers only read the slice.
func (s *Store) leaseKeys(key string) []string { return s.keyNames(key).keys }

// keyNames returns the names of key's scripts. The names of the last key
// asked for are kept (lastKeys), so that a caller that cycles one key, as
// a Mutex or an elector does, does not build them again on every call.
func (s *Store) keyNames(key string) *keyNames {
	if last := s.lastKeys.Load(); last != nil && last.key == key {
		return last
	}
	keys := s.buildLeaseKeys(key)
	names := &keyNames{key: key, keys: keys, wake: wakeChannel(keys[0], s.wakeSuffix), args: make([]any, 0, 1+len(keys))}
	names.args = append(names.args, strconv.Itoa(len(keys)))
	for _, k := range keys {
		names.args = append(names.args, k)
	}
	s.lastKeys.Store(names)
	return names
}

// wakeChannel returns the store's wake-up channel of key, on which a
// release that hands key to one of the store's waiters publishes it:
// "<lease key> wake <id>", with the store's wake-up id, so that the
// other stores waiting for key are not sent the handover; the lease
// key's own channel when it has no hash tag (a channel named after it
// would not be in its Cluster slot; the scripts' wakeOf agrees). The
// answer for the last key asked for is kept (keyNames): an acquisition
// looks up key's channel three times.
func (s *Store) wakeChannel(key string) string {
	if last := s.lastKeys.Load(); last != nil && last.key == key {
		return last.wake
	}
	return wakeChannel(s.LeaseKey(key), s.wakeSuffix)
}

// wakeChannel returns the wake-up channel of the lease key name for the
// store whose channels end in suffix (wakeSuffix; see Store.wakeChannel).
func wakeChannel(name, suffix string) string {
	if _, ok := hashTag(name); ok {
		return name + suffix
	}
	return name
}

// newWakeID returns a store's wake-up id: 16 random hex digits, so that
// the stores of a fleet do not share one.
func newWakeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

// wakeSuffix returns what a store with wake-up id id adds to a lease
// key's name to name its wake-up channel of the key.
func wakeSuffix(id string) string { return " wake " + id }

// keyNames is a key with the names leaseKeys built for it.
type keyNames struct {
	key  string
	keys []string
	wake string // the store's wake-up channel of key (Store.wakeChannel)
	// args are the keys as a script command's arguments: their count
	// (a string, which go-redis reads when it routes the command on a
	// Cluster), then the keys, each boxed once.
	args []any
}

// buildLeaseKeys builds what leaseKeys returns.
func (s *Store) buildLeaseKeys(key string) []string {
	name := s.LeaseKey(key)
	intact := s.IntactKey(key)
	if intact == "" {
		intact = name
	}
	server := s.TenantIntactKey(key)
	if s.sharded {
		server = intact
	}
	return leaseKeys(name, intact, server)
}

// scriptArgs returns a lease script's arguments: the store's settings
// (scriptSettings) followed by args.
func scriptArgs(settings []any, args ...any) []any {
	return append(append(make([]any, 0, len(settings)+len(args)), settings...), args...)
}
