package redisbackend

import (
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Every operation is one Lua script, so that the owner check and the write
// that depends on it (and the fencing increment and the release
// notification) happen atomically on the server.
//
// A script names one key, the lease key K (KEYS[1]), and derives the
// others from it: the fencing counter K:fence, the waiting line K:line and
// K:line-req, the watch marker K:watch-mark and the mailboxes
// K:handover:<owner>. They all share K's hash tag, hence its Cluster slot,
// so the server allows it; naming them in KEYS would cost the server work
// on every call.
//
// The lease is a string, "<token> <owner>" with a PX expiry, followed by a
// flag word when it is not a plain lease (owners hold no spaces: backend
// validates them):
//
//	(none)      nobody has shown interest: a release just deletes it
//	contended   someone waits in line, watches the key, or was handed it:
//	            a release hands over or publishes, and clears the mailbox
//	released    released with a keep time; it only expires
//
// A lease is flagged contended when it is granted while the line or the
// watch marker exists, when it is handed over, when a waiter joins the
// line behind it, and when a Watch starts (which also sets the marker and
// keeps it alive), so a release finds out from the lease alone whether
// anyone could be waiting for it.
//
// The fencing counter is a plain integer key that lapses max(ttl, 1 h)
// after the key's last grant (see grantFn). A key's
// waiting line (backend.Queue) is a sorted set of owners scored by arrival
// (microseconds of the server's clock) and a hash of what each waiter
// asked for and when its place lapses ("<ttl-ms> <floor> <due-ms>"); both
// expire once every place in them has lapsed. A release hands the key to
// the first live waiter (backend.Handover): it grants it, adds the lease
// to the waiter's mailbox, a stream the waiter looks in once it is
// subscribed to K's channel, and publishes "renewed <token> <ttl-ms>
// <waiter>" there, which is what the waiter waits for.
//
// A script that did what was asked (granted, renewed or released the
// caller's lease) replies with the lease's token alone, a string: the
// caller knows the owner and the ttl it asked for. Every other reply is an
// array whose first element says what happened:
//
//	ok      owner token pttl-ms         the caller already holds the key
//	held    owner token pttl-ms [next]  another lease is on the key
//	queued  next                        the key is free but kept for next
//	free                                no lease is on the key
//	recovering ms-left                  the restart guard refuses the grant
//	corrupt description                 the key holds data baton did not write
//
// Every field is returned as a string or an integer so a missing value
// (Lua false) can never truncate the reply. The scripts take the
// cheapest path when nothing is wrong (acquiring a free key nobody waits
// for or watches, renewing or releasing one's own plain lease) and
// classify the key in detail only when something is. Each redis.call,
// each key and argument, each closure a script creates and each element
// of a reply costs the server measurable work on every lock cycle, so a
// fast path runs before the shared functions are defined and answers with
// a single string.
//
// The sources below use placeholders that scriptSet fills in: $fence,
// $line, $req, $watched and $mailbox (the key suffixes, as Lua strings),
// $pub (the publish command: PUBLISH, or SPUBLISH on a Cluster), $hand
// (whether a release hands the key to the first waiter) and $guard (the
// store's restart guard in ms, or -1 when it is off).

// readLease reads the lease K into tok, own and rel (the flag: empty,
// ' contended' or ' released'); all are nil when the key is missing or not
// in that shape, and rel may then be an unknown flag, which callers treat
// as foreign data. It defines no function, so fast paths can use it.
const readLease = `
local v = redis.pcall('GET', KEYS[1])
local tok, own, rel
if type(v) == 'string' then tok, own, rel = string.match(v, ` + leaseShape + `) end
`

// appendContended flags the plain lease K contended. A statement, not a
// function, so that the mark script, which defines none, can use it too.
const appendContended = `redis.call('APPEND', KEYS[1], ' contended')`

// leaseShape is the Lua pattern of a lease value: token, owner and an
// optional flag word.
const leaseShape = `'^(%d+) (%S+)( ?%l*)$'`

// grantFn defines grant, which gives the free K to owner for ttl ms, with
// flag (empty or ' contended'), and the next token: max(counter, floor,
// the server's clock in µs) + 1. c is the counter K:fence as GET read it
// (false: missing) if the caller read it; grant reads it otherwise.
//
// A missing counter means K was never granted, was idle past the
// counter's life, or the server lost its data. Unless the store's guard
// is off ($guard < 0), grant then reads the server's uptime and refuses
// while it is below max(ttl, $guard) ms plus a second: a lease on K from
// before a restart may still be believed by its holder. (Redis counts
// uptime in whole seconds from the second it started, which overstates it
// by up to a second.) It returns the token, or
// nil and a reply: corrupt, or "recovering <ms left>". A server that
// reports no uptime (not Redis itself) is not guarded. A lease granted
// without a counter is flagged contended: a data loss also erased the
// watch markers, so its release is published to watchers the scripts
// cannot see.
//
// Tokens below 2^53 are exact Lua numbers (the clock is about 1.8e15 µs);
// a counter or floor at or above that is compared and incremented as a
// string. The counter lives max(ttl, 1 h) after the grant, or forever if
// a floor put it further ahead of the clock than that (the clock alone
// could not then keep the next token above it). Tokens are written and
// returned as decimal strings (Lua's tostring would use exponent form).
// It comes before the fast paths that need it, and before common, whose
// closures those paths do not pay for.
const grantFn = `
local function grant(owner, ttl, floor, flag, c)
  local F = KEYS[1] .. $fence
  if c == nil then c = redis.pcall('GET', F) end
  if type(c) == 'table' then
    return nil, {'corrupt', 'fencing counter ' .. F .. ' is a ' .. redis.call('TYPE', F).ok .. ', not an integer'}
  end
  if c and not string.match(c, '^%d+$') then
    return nil, {'corrupt', 'fencing counter ' .. F .. ' holds ' .. string.sub(c, 1, 40) .. ', not an integer'}
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local life = math.max(tonumber(ttl), 3600000)
  if not c then
    if $guard >= 0 then
      local info = redis.pcall('INFO', 'server')
      local up = type(info) == 'string' and tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
      if up then
        local left = math.max(tonumber(ttl), $guard) + 1000 - up * 1000
        if left > 0 then return nil, {'recovering', string.format('%d', left)} end
      end
    end
    c, flag = '0', ' contended'
  end
  local tok
  local cn, fn = tonumber(c), tonumber(floor)
  if cn < 9007199254740992 and fn < 9007199254740992 then
    local n = math.max(cn, fn, now) + 1
    tok = string.format('%d', n)
    if n - now <= life * 1000 then
      redis.call('SET', F, tok, 'PX', life)
    else
      redis.call('SET', F, tok)
    end
  else
    if string.len(floor) > string.len(c) or (string.len(floor) == string.len(c) and floor > c) then c = floor end
    redis.call('SET', F, c)
    if type(redis.pcall('INCR', F)) == 'table' then
      return nil, {'corrupt', 'fencing counter ' .. F .. ' is at the largest token ' .. c .. ', and no larger one exists; delete the counter or use another prefix'}
    end
    tok = redis.call('GET', F)
  end
  redis.call('SET', KEYS[1], tok .. ' ' .. owner .. flag, 'PX', ttl)
  return tok
end
`

// common is shared by every slow path. lease() classifies K. The line
// functions work on the line keys L (arrival) and R (requests and
// deadlines).
const common = `
local function lease()
  local v = redis.pcall('GET', KEYS[1])
  if not v then return nil end
  if type(v) ~= 'string' then
    return {'corrupt', 'key ' .. KEYS[1] .. ' is a ' .. redis.call('TYPE', KEYS[1]).ok .. ', not a baton lease'}
  end
  local tok, own, rel = string.match(v, ` + leaseShape + `)
  if not tok or (rel ~= '' and rel ~= ' contended' and rel ~= ' released') then
    return {'corrupt', 'key ' .. KEYS[1] .. ' holds "' .. string.sub(v, 1, 40) .. '", not a baton lease "<token> <owner>"'}
  end
  return {'held', own, tok, redis.call('PTTL', KEYS[1]), rel}
end

-- holder is the reply that says what is on K instead of the caller's
-- lease: free, corrupt, or held (without the flag). It classifies K
-- unless given l, what lease() returned.
local function holder(l)
  l = l or lease()
  if not l then return {'free'} end
  return {l[1], l[2], l[3], l[4]}
end

-- contend flags K, a plain lease, contended: its release must look for
-- waiters and watchers.
local function contend()
  ` + appendContended + `
end

-- now returns the server's clock in microseconds, as a number and as a
-- decimal string (Lua would format the number as a float, at a cost).
local nowus, nows
local function now()
  if not nowus then
    local t = redis.call('TIME')
    nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
    nows = t[1] .. string.sub('00000' .. t[2], -6)
  end
  return nowus, nows
end

-- A waiter's request in R is "<ttl-ms> <floor> <due-ms>": what it asks
-- for if handed the key, and when its place lapses (server clock). live
-- reports whether a request (or nil) holds a place at ms.
local function live(req, ms)
  local due = req and tonumber(string.match(req, '^%d+ %d+ (%d+)$'))
  return due ~= nil and due > ms
end

-- first returns the first waiter in line whose place has not lapsed, and
-- its request, or ''. It drops the lapsed waiters it finds at the head
-- (and one whose request is not in baton's shape); those further back
-- are dropped when they reach it, or when they join again.
local function first(L, R)
  local head = redis.call('ZRANGE', L, 0, 0)[1]
  if not head then return '' end
  local ms = math.floor(now() / 1000)
  while head do
    local req = redis.call('HGET', R, head)
    if live(req, ms) then return head, req end
    redis.call('ZREM', L, head)
    if req then redis.call('HDEL', R, head) end
    head = redis.call('ZRANGE', L, 0, 0)[1]
  end
  return ''
end

-- join puts owner at the back of the line (or keeps its place) until
-- patience ms (pms, its decimal string) from now, asking for ttl ms and
-- floor if handed the key. An owner whose place lapsed joins at the back
-- again. Numbers go to the server as strings: formatting them costs more.
local function join(L, R, owner, patience, pms, ttl, floor)
  if patience <= 0 then return end
  local us, arrival = now()
  local ms = math.floor(us / 1000)
  local old = redis.call('HGET', R, owner)
  if old and not live(old, ms) then redis.call('ZREM', L, owner) end
  redis.call('ZADD', L, 'NX', arrival, owner)
  redis.call('HSET', R, owner, ttl .. ' ' .. floor .. ' ' .. string.format('%d', ms + patience))
  if redis.call('PTTL', L) < patience then
    redis.call('PEXPIRE', L, pms)
    redis.call('PEXPIRE', R, pms)
  end
end

local function leave(L, R, owner)
  redis.call('HDEL', R, owner)
  return redis.call('ZREM', L, owner)
end

local function mailbox(owner)
  return KEYS[1] .. $mailbox .. owner
end

-- take is first() for a waiter about to be handed the key: it pops the
-- head of the line (ZPOPMIN: one call where ZRANGE and ZREM are two)
-- until it finds a live waiter, and returns it and its request, or ''.
local function take(L, R)
  while true do
    local head = redis.call('ZPOPMIN', L)[1]
    if not head then return '' end
    local req = redis.call('HGET', R, head)
    if req then redis.call('HDEL', R, head) end
    if live(req, math.floor(now() / 1000)) then return head, req end
  end
end

-- handover grants the free K to the first live waiter, with the ttl and
-- floor of its request, puts the lease in its mailbox and publishes
-- "renewed <token> <ttl> <waiter>": watchers learn the key is held for
-- ttl, the waiter that the key is its own. It reports whether it did.
local function handover(L, R)
  local nxt, req = take(L, R)
  if nxt == '' then return false end
  local ttl, floor = string.match(req, '^(%d+) (%d+) %d+$')
  local tok = grant(nxt, ttl, floor, ' contended')
  if not tok then return false end
  local box = mailbox(nxt)
  redis.call('XADD', box, '*', 'token', tok, 'ttl', ttl)
  redis.call('PEXPIRE', box, ttl)
  redis.call($pub, KEYS[1], 'renewed ' .. tok .. ' ' .. ttl .. ' ' .. nxt)
  return true
end

-- pass hands the freed K over if the store hands over and someone is in
-- line, and otherwise publishes "released <token> <next>".
local function pass(L, R, token)
  if $hand and handover(L, R) then return end
  redis.call($pub, KEYS[1], 'released ' .. token .. ' ' .. first(L, R))
end
`

// fastGrant is the fast path of the acquiring scripts, for a key with no
// lease, no line and no watch marker, which one EXISTS checks together
// with the fencing counter: one of the four existing must be the counter,
// which grant reads anyway; none means a fresh key (or a lost one), which
// grant guards.
const fastGrant = `
local n = redis.call('EXISTS', KEYS[1], KEYS[1] .. $line, KEYS[1] .. $watched, KEYS[1] .. $fence)
if n <= 1 then
  local c = false
  if n == 1 then c = redis.pcall('GET', KEYS[1] .. $fence) end
  if n == 0 or c then
    local tok, bad = grant(ARGV[1], ARGV[2], ARGV[3], '', c)
    return tok or bad
  end
end
`

// acquireSource: ARGV owner, ttl-ms, floor. After the fast path, a lease
// granted while there is a line or a marker is flagged contended.
const acquireSource = grantFn + fastGrant + common + `
local l = lease()
if l then return holder(l) end
local tok, bad = grant(ARGV[1], ARGV[2], ARGV[3], ' contended')
return tok or bad
`

// acquireQueuedSource: ARGV owner, ttl-ms, floor, patience-ms. A lease
// handed to owner is returned as granted. The fast path is fastGrant's. A
// waiter first in line keeps its place when the grant is refused as
// recovering.
const acquireQueuedSource = grantFn + fastGrant + common + `
local L = KEYS[1] .. $line
local R = KEYS[1] .. $req
local owner, patience = ARGV[1], tonumber(ARGV[4])
local nxt = first(L, R)
local l = lease()
if l then
  if l[1] ~= 'held' then return l end
  if l[2] == owner and l[5] ~= ' released' then
    redis.call('DEL', mailbox(owner))
    return {'ok', l[2], l[3], l[4]}
  end
  join(L, R, owner, patience, ARGV[4], ARGV[2], ARGV[3])
  if patience > 0 and l[5] == '' then contend() end
  if nxt == '' and patience > 0 then nxt = owner end
  return {l[1], l[2], l[3], l[4], nxt}
end
if nxt ~= '' and nxt ~= owner then
  join(L, R, owner, patience, ARGV[4], ARGV[2], ARGV[3])
  return {'queued', nxt}
end
local tok, bad = grant(owner, ARGV[2], ARGV[3], ' contended')
if tok and nxt == owner then leave(L, R, owner) end
return tok or bad
`

// dequeueSource: ARGV owner. A key already handed to owner is released.
// If owner was first for the free key, the key goes to the next waiter:
// handed over, or else "released - <next>" is published so that the next
// waiter claims at once.
const dequeueSource = grantFn + common + `
local L, R = KEYS[1] .. $line, KEYS[1] .. $req
local owner = ARGV[1]
local was = first(L, R)
local left = leave(L, R, owner)
` + readLease + `
if own == owner and (rel == '' or rel == ' contended') then
  redis.call('DEL', KEYS[1], mailbox(owner))
  pass(L, R, tok)
  return {'free'}
end
if left == 0 or was ~= owner or redis.call('EXISTS', KEYS[1]) == 1 then return {'free'} end
pass(L, R, '-')
return {'free'}
`

// renewSource: ARGV owner, ttl-ms. Renewing a contended lease publishes
// "renewed <token> <ttl-ms>" on the channel named after the lease key, so
// that waiters learn the new expiry without asking.
const renewSource = readLease + `
if own == ARGV[1] and (rel == '' or rel == ' contended') then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if rel ~= '' then redis.call($pub, KEYS[1], 'renewed ' .. tok .. ' ' .. ARGV[2]) end
  return tok
end
` + grantFn + common + `
return holder()
`

// releaseSource: ARGV owner, keep-ms (absent: delete now). Releasing a
// plain lease deletes it and tells nobody: nobody is waiting or watching.
// Releasing a contended one hands the key over ("renewed <new token>
// <ttl-ms> <waiter>" is published: the key stays held) or publishes
// "released <token> <next>" (next: the waiter first in line, or empty),
// which is what wakes watchers. Keeping the key publishes "renewed <token>
// <keep-ms>", so that waiters sleep exactly that long.
const releaseSource = readLease + `
if own == ARGV[1] and rel == '' and not ARGV[2] then
  redis.call('DEL', KEYS[1])
  return tok
end
` + grantFn + common + `
if own ~= ARGV[1] or (rel ~= '' and rel ~= ' contended' and rel ~= ' released') then return holder() end
local keep = tonumber(ARGV[2] or '0')
if keep > 0 then
  if rel ~= ' released' then
    redis.call('SET', KEYS[1], tok .. ' ' .. own .. ' released', 'PX', keep)
    if rel ~= '' then
      redis.call('DEL', mailbox(own))
      redis.call($pub, KEYS[1], 'renewed ' .. tok .. ' ' .. keep)
    end
  end
  return tok
end
redis.call('DEL', KEYS[1], mailbox(own))
pass(KEYS[1] .. $line, KEYS[1] .. $req, tok)
return tok
`

// markSource: ARGV marker-ttl-ms. It sets (or refreshes) the watch marker
// and flags a plain lease on K contended, so that its release is
// published.
const markSource = `
redis.call('SET', KEYS[1] .. $watched, '1', 'PX', ARGV[1])
` + readLease + `
if tok and rel == '' then ` + appendContended + ` end
return 1
`

// getSource: K's lease, as holder() reports it.
const getSource = grantFn + common + `
return holder()
`

// scriptSet is the scripts of one kind of store: publishing with PUBLISH
// or SPUBLISH, handing keys over or not.
type scriptSet struct {
	acquire, acquireQueued, dequeue, renew, release, mark, get *redis.Script
}

// scriptKind is what a store's scripts depend on.
type scriptKind struct {
	sharded, hand bool
	guard         int64 // the restart guard in ms, -1 when off
}

// scriptSets holds the scripts built so far, by kind: stores of one kind
// share them.
var scriptSets sync.Map // scriptKind -> *scriptSet

func scriptsFor(k scriptKind) *scriptSet {
	if set, ok := scriptSets.Load(k); ok {
		return set.(*scriptSet)
	}
	set, _ := scriptSets.LoadOrStore(k, newScriptSet(k.sharded, k.hand, k.guard))
	return set.(*scriptSet)
}

func newScriptSet(sharded, hand bool, guard int64) *scriptSet {
	pub, handLua := "'PUBLISH'", "false"
	if sharded {
		pub = "'SPUBLISH'"
	}
	if hand {
		handLua = "true"
	}
	fill := strings.NewReplacer(
		"$fence", luaString(fenceSuffix),
		"$line", luaString(lineSuffix),
		"$req", luaString(requestSuffix),
		"$watched", luaString(watchedSuffix),
		"$mailbox", luaString(mailboxInfix),
		"$pub", pub,
		"$hand", handLua,
		"$guard", strconv.FormatInt(guard, 10),
	)
	script := func(src string) *redis.Script { return redis.NewScript(fill.Replace(src)) }
	return &scriptSet{
		acquire:       script(acquireSource),
		acquireQueued: script(acquireQueuedSource),
		dequeue:       script(dequeueSource),
		renew:         script(renewSource),
		release:       script(releaseSource),
		mark:          script(markSource),
		get:           script(getSource),
	}
}

// luaString quotes s, which holds no quote or backslash, as a Lua string.
func luaString(s string) string { return "'" + s + "'" }
