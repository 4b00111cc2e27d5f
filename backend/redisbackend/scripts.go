package redisbackend

import "github.com/redis/go-redis/v9"

// Every operation is one Lua script, so that the owner check and the write
// that depends on it (and the fencing increment and the release
// notification) happen atomically on the server. The lease is a hash with
// the fields owner, token and, after a Release that keeps the key,
// released. The fencing counter is a plain integer key that never expires.
//
// Replies are arrays whose first element says what happened:
//
//	ok      owner token ttl-ms     the operation succeeded
//	held    owner token pttl-ms    another lease is on the key
//	free                           no lease is on the key
//	corrupt description            the key holds data baton did not write
//
// Every field is returned as a string or an integer so a missing hash
// field (Lua false) can never truncate the reply.

// checkLease is shared by every script: it classifies KEYS[1].
const checkLease = `
local function lease()
  local t = redis.call('TYPE', KEYS[1]).ok
  if t == 'none' then return nil end
  if t ~= 'hash' then return {'corrupt', 'key ' .. KEYS[1] .. ' is a ' .. t .. ', not a baton lease hash'} end
  local v = redis.call('HMGET', KEYS[1], 'owner', 'token', 'released')
  return {'held', v[1] or '', v[2] or '', redis.call('PTTL', KEYS[1]), v[3] and true or false}
end
`

// acquireScript: KEYS[1] lease, KEYS[2] fence; ARGV owner, ttl-ms, floor.
var acquireScript = redis.NewScript(checkLease + `
local l = lease()
if l then return {l[1], l[2], l[3], l[4]} end
local f = redis.call('TYPE', KEYS[2]).ok
if f ~= 'none' and f ~= 'string' then
  return {'corrupt', 'fencing counter ' .. KEYS[2] .. ' is a ' .. f .. ', not an integer'}
end
local cur = redis.call('GET', KEYS[2])
if cur and not string.match(cur, '^%d+$') then
  return {'corrupt', 'fencing counter ' .. KEYS[2] .. ' holds ' .. string.sub(cur, 1, 40) .. ', not an integer'}
end
local floor = ARGV[3]
if not cur or string.len(floor) > string.len(cur) or (string.len(floor) == string.len(cur) and floor > cur) then
  redis.call('SET', KEYS[2], floor)
end
redis.call('INCR', KEYS[2])
local tok = redis.call('GET', KEYS[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', tok)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {'ok', ARGV[1], tok, tonumber(ARGV[2])}
`)

// renewScript: KEYS[1] lease; ARGV owner, ttl-ms, publish command
// (PUBLISH, or SPUBLISH on a Cluster). A renewal publishes
// "renewed <token> <ttl-ms>" on the channel named after the lease key, so
// that waiters learn the new expiry without asking.
var renewScript = redis.NewScript(checkLease + `
local l = lease()
if not l then return {'free'} end
if l[1] ~= 'held' then return l end
if l[2] ~= ARGV[1] or l[5] then return {l[1], l[2], l[3], l[4]} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call(ARGV[3], KEYS[1], 'renewed ' .. l[3] .. ' ' .. ARGV[2])
return {'ok', l[2], l[3], tonumber(ARGV[2])}
`)

// releaseScript: KEYS[1] lease; ARGV owner, keep-ms (0: delete now),
// publish command.
// Deleting publishes "released <token>" on the channel named after the
// lease key, which is what wakes watchers; keeping the key publishes
// "renewed <token> <keep-ms>", so that waiters sleep exactly that long.
var releaseScript = redis.NewScript(checkLease + `
local l = lease()
if not l then return {'free'} end
if l[1] ~= 'held' then return l end
if l[2] ~= ARGV[1] then return {l[1], l[2], l[3], l[4]} end
local keep = tonumber(ARGV[2])
if keep > 0 then
  if not l[5] then
    redis.call('HSET', KEYS[1], 'released', '1')
    redis.call('PEXPIRE', KEYS[1], keep)
    redis.call(ARGV[3], KEYS[1], 'renewed ' .. l[3] .. ' ' .. keep)
  end
  return {'ok', l[2], l[3], redis.call('PTTL', KEYS[1])}
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[3], KEYS[1], 'released ' .. l[3])
return {'ok', l[2], l[3], 0}
`)

// getScript: KEYS[1] lease.
var getScript = redis.NewScript(checkLease + `
local l = lease()
if not l then return {'free'} end
return {l[1], l[2], l[3], l[4]}
`)
