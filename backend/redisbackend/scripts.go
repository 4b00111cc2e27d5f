package redisbackend

import "github.com/redis/go-redis/v9"

// Every operation is one Lua script, so that the owner check and the write
// that depends on it (and the fencing increment and the release
// notification) happen atomically on the server. The lease is a string,
// "<token> <owner>", or "<token> <owner> released" after a Release that
// keeps the key, with a PX expiry (owners hold no spaces: backend
// validates them). The fencing counter is a plain integer key that never
// expires.
// A key's waiting line (backend.Queue) is a sorted set of owners scored by
// arrival (microseconds of the server's clock) and a hash of what each
// waiter asked for and when its place lapses ("<ttl-ms> <floor>
// <due-ms>"); both expire once every place in them has lapsed. A release
// hands the key to the first live waiter (backend.Handover): it grants it
// and adds the lease to the waiter's mailbox, a stream
// "<lease key>:handover:<owner>" that the waiter reads with XREAD BLOCK.
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
//	corrupt description                 the key holds data baton did not write
//
// Every field is returned as a string or an integer so a missing value
// (Lua false) can never truncate the reply. The scripts take the
// cheapest path when nothing is wrong (acquiring a free key nobody waits
// for, renewing or releasing one's own) and classify the key in detail
// only when something is. Each redis.call, each closure a script creates
// and each element of a reply costs the server measurable work on every
// lock cycle, so a fast path runs before the shared functions are defined
// and answers with a single string.

// readLease reads the lease KEYS[1], "<token> <owner>" or, after a
// Release that keeps the key, "<token> <owner> released", into tok, own
// and rel (rel is empty, or " released"); all are nil when the key is
// missing or not in that shape. It defines no function, so fast paths can
// use it.
const readLease = `
local v = redis.pcall('GET', KEYS[1])
local tok, own, rel
if type(v) == 'string' then tok, own, rel = string.match(v, ` + leaseShape + `) end
`

// leaseShape is the Lua pattern of a lease value: token, owner and an
// optional flag word.
const leaseShape = `'^(%d+) (%S+)( ?%l*)$'`

// grantFn defines grant, which gives the free KEYS[1] to owner for ttl ms
// with the next token of the counter KEYS[2]: max(counter, floor) + 1.
// It returns the token, or nil and a corrupt reply. Tokens below 2^53 are
// exact Lua numbers; above that the counter is read back as a string. The
// token is written and returned as a decimal string either way (Lua's
// tostring would write large numbers in exponent form). It comes before
// the fast paths that need it, and before common, whose closures those
// paths do not pay for.
const grantFn = `
local function grant(owner, ttl, floor)
  local tok = redis.pcall('INCR', KEYS[2])
  if type(tok) == 'table' then
    local f = redis.call('TYPE', KEYS[2]).ok
    if f ~= 'string' then
      return nil, {'corrupt', 'fencing counter ' .. KEYS[2] .. ' is a ' .. f .. ', not an integer'}
    end
    return nil, {'corrupt', 'fencing counter ' .. KEYS[2] .. ' holds ' .. string.sub(redis.call('GET', KEYS[2]), 1, 40) .. ', not an integer'}
  end
  if tok >= 9007199254740992 or string.len(floor) > 15 then
    local cur = redis.call('GET', KEYS[2])
    if string.len(floor) > string.len(cur) or (string.len(floor) == string.len(cur) and floor >= cur) then
      redis.call('SET', KEYS[2], floor)
      redis.call('INCR', KEYS[2])
    end
    tok = redis.call('GET', KEYS[2])
  else
    if tonumber(floor) >= tok then
      redis.call('SET', KEYS[2], floor)
      tok = redis.call('INCR', KEYS[2])
    end
    tok = string.format('%d', tok)
  end
  redis.call('SET', KEYS[1], tok .. ' ' .. owner, 'PX', ttl)
  return tok
end
`

// common is shared by every script. lease(t) classifies KEYS[1], whose
// TYPE is t (nil: look it up). The line functions work on the line keys L
// (arrival) and R (requests and deadlines), which each script names.
const common = `
local function lease(t)
  t = t or redis.call('TYPE', KEYS[1]).ok
  if t == 'none' then return nil end
  if t ~= 'string' then return {'corrupt', 'key ' .. KEYS[1] .. ' is a ' .. t .. ', not a baton lease'} end
  local v = redis.call('GET', KEYS[1])
  local tok, own, rel = string.match(v, ` + leaseShape + `)
  if not tok or (rel ~= '' and rel ~= ' released') then
    return {'corrupt', 'key ' .. KEYS[1] .. ' holds "' .. string.sub(v, 1, 40) .. '", not a baton lease "<token> <owner>"'}
  end
  return {'held', own, tok, redis.call('PTTL', KEYS[1]), rel ~= ''}
end

-- holder is the reply that says what is on KEYS[1] instead of the
-- caller's lease: free, corrupt, or held (without the released flag).
local function holder()
  local l = lease()
  if not l then return {'free'} end
  return {l[1], l[2], l[3], l[4]}
end

local nowus
local function now()
  if not nowus then
    local t = redis.call('TIME')
    nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return nowus
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
-- are dropped when they reach it, or when they join again. A key without
-- a line costs one EXISTS, which a caller that has just seen the line
-- skips (seen; were the line gone after all, ZRANGE would find nobody).
local function first(L, R, seen)
  if not seen and redis.call('EXISTS', L) == 0 then return '' end
  local ms = math.floor(now() / 1000)
  while true do
    local head = redis.call('ZRANGE', L, 0, 0)[1]
    if not head then return '' end
    local req = redis.call('HGET', R, head)
    if live(req, ms) then return head, req end
    redis.call('ZREM', L, head)
    if req then redis.call('HDEL', R, head) end
  end
end

-- join puts owner at the back of the line (or keeps its place) until
-- patience ms from now, asking for ttl ms and floor if handed the key. An
-- owner whose place lapsed joins at the back again.
local function join(L, R, owner, patience, ttl, floor)
  if patience <= 0 then return end
  local ms = math.floor(now() / 1000)
  local old = redis.call('HGET', R, owner)
  if old and not live(old, ms) then redis.call('ZREM', L, owner) end
  redis.call('ZADD', L, 'NX', now(), owner)
  redis.call('HSET', R, owner, ttl .. ' ' .. floor .. ' ' .. (ms + patience))
  if redis.call('PTTL', L) < patience then
    redis.call('PEXPIRE', L, patience)
    redis.call('PEXPIRE', R, patience)
  end
end

local function leave(L, R, owner)
  redis.call('HDEL', R, owner)
  return redis.call('ZREM', L, owner)
end

local function mailbox(owner)
  return KEYS[1] .. '` + mailboxInfix + `' .. owner
end

-- handover grants the free KEYS[1] (fence KEYS[2]) to nxt, the first live
-- waiter, with the ttl and floor of its request req (both as first()
-- returned them), puts the lease in its mailbox and tells watchers the key
-- is held for ttl (command pub). It returns whether it did, and the waiter
-- first in line.
local function handover(L, R, pub, nxt, req)
  local ttl, floor = string.match(req, '^(%d+) (%d+) %d+$')
  leave(L, R, nxt)
  local tok = grant(nxt, ttl, floor)
  if not tok then return false, first(L, R, true) end
  local box = mailbox(nxt)
  redis.call('XADD', box, '*', 'token', tok, 'ttl', ttl)
  redis.call('PEXPIRE', box, ttl)
  redis.call(pub, KEYS[1], 'renewed ' .. tok .. ' ' .. ttl)
  return true, nxt
end

-- pass hands the freed KEYS[1] over if hand is '1' and someone is in
-- line, and otherwise publishes "released <token> <next>".
local function pass(L, R, pub, hand, token, seen)
  local nxt, req = first(L, R, seen)
  if hand == '1' and nxt ~= '' then
    local done
    done, nxt = handover(L, R, pub, nxt, req)
    if done then return end
  end
  redis.call(pub, KEYS[1], 'released ' .. token .. ' ' .. nxt)
end
`

// acquireScript: KEYS[1] lease, KEYS[2] fence; ARGV owner, ttl-ms, floor.
var acquireScript = redis.NewScript(grantFn + `
if redis.call('EXISTS', KEYS[1]) == 0 then
  local tok, bad = grant(ARGV[1], ARGV[2], ARGV[3])
  return tok or bad
end
` + common + `
return holder()
`)

// acquireQueuedScript: KEYS[1] lease, KEYS[2] fence, KEYS[3] line,
// KEYS[4] line requests; ARGV owner, ttl-ms,
// floor, patience-ms. A lease handed to owner is returned as granted. The
// fast path (no lease, no line) checks both keys with one EXISTS, whose
// count of 2 also spares first() its look at the line.
var acquireQueuedScript = redis.NewScript(grantFn + `
local found = redis.call('EXISTS', KEYS[1], KEYS[3])
if found == 0 then
  local tok, bad = grant(ARGV[1], ARGV[2], ARGV[3])
  return tok or bad
end
` + common + `
local owner, patience = ARGV[1], tonumber(ARGV[4])
local nxt = first(KEYS[3], KEYS[4], found == 2)
local l = lease()
if l then
  if l[1] ~= 'held' then return l end
  if l[2] == owner and not l[5] then
    redis.call('DEL', mailbox(owner))
    return {'ok', l[2], l[3], l[4]}
  end
  join(KEYS[3], KEYS[4], owner, patience, ARGV[2], ARGV[3])
  if nxt == '' and patience > 0 then nxt = owner end
  return {l[1], l[2], l[3], l[4], nxt}
end
if nxt ~= '' and nxt ~= owner then
  join(KEYS[3], KEYS[4], owner, patience, ARGV[2], ARGV[3])
  return {'queued', nxt}
end
if nxt == owner then leave(KEYS[3], KEYS[4], owner) end
local tok, bad = grant(owner, ARGV[2], ARGV[3])
return tok or bad
`)

// dequeueScript: KEYS[1] lease, KEYS[2] fence, KEYS[3] line, KEYS[4]
// line requests; ARGV owner, publish command,
// handover ("1": hand a freed key to the next waiter). A key already
// handed to owner is released. If owner was first for the free key, the
// key goes to the next waiter: handed over, or else "released - <next>"
// is published so that the next waiter claims at once.
var dequeueScript = redis.NewScript(grantFn + common + `
local owner, pub = ARGV[1], ARGV[2]
local was = first(KEYS[3], KEYS[4])
local left = leave(KEYS[3], KEYS[4], owner)
` + readLease + `
if own == owner and rel == '' then
  redis.call('DEL', KEYS[1], mailbox(owner))
  pass(KEYS[3], KEYS[4], pub, ARGV[3], tok)
  return {'free'}
end
if left == 0 or was ~= owner or redis.call('EXISTS', KEYS[1]) == 1 then return {'free'} end
pass(KEYS[3], KEYS[4], pub, ARGV[3], '-')
return {'free'}
`)

// renewScript: KEYS[1] lease; ARGV owner, ttl-ms, publish command
// (PUBLISH, or SPUBLISH on a Cluster). A renewal publishes
// "renewed <token> <ttl-ms>" on the channel named after the lease key, so
// that waiters learn the new expiry without asking.
var renewScript = redis.NewScript(readLease + `
if own == ARGV[1] and rel == '' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call(ARGV[3], KEYS[1], 'renewed ' .. tok .. ' ' .. ARGV[2])
  return tok
end
` + grantFn + common + `
return holder()
`)

// releaseScript: KEYS[1] lease, KEYS[2] fence, KEYS[3] line, KEYS[4] line
// requests; ARGV owner, keep-ms (0: delete now),
// publish command, handover ("1": hand the key to the first waiter).
// Handing over publishes "renewed <new token> <ttl-ms>" (the key stays
// held); deleting publishes "released <token> <next>" on the channel named
// after the lease key (next: the waiter first in line, or empty), which is
// what wakes watchers; keeping the key publishes "renewed <token>
// <keep-ms>", so that waiters sleep exactly that long. The fast path
// deletes one's own key when nobody is in line.
var releaseScript = redis.NewScript(readLease + `
local mine = own == ARGV[1] and (rel == '' or rel == ' released')
if mine and ARGV[2] == '0' and redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1], KEYS[1] .. '` + mailboxInfix + `' .. ARGV[1])
  redis.call(ARGV[3], KEYS[1], 'released ' .. tok .. ' ')
  return tok
end
` + grantFn + common + `
if not mine then return holder() end
local keep = tonumber(ARGV[2])
if keep > 0 then
  if rel == '' then
    redis.call('SET', KEYS[1], v .. ' released', 'PX', keep)
    redis.call(ARGV[3], KEYS[1], 'renewed ' .. tok .. ' ' .. keep)
  end
  return tok
end
-- Here the fast path saw the line.
redis.call('DEL', KEYS[1], mailbox(ARGV[1]))
pass(KEYS[3], KEYS[4], ARGV[3], ARGV[4], tok, true)
return tok
`)

// getScript: KEYS[1] lease.
var getScript = redis.NewScript(grantFn + common + `
return holder()
`)
