-- Break: end the lease on K, a Java instance's too, if K and O still
-- hold what the caller read, and move the fencing counter F past its
-- token and the clock, so that every later grant is above it; watchers
-- are told of a release.
-- KEYS: K, O, F (see acquire.lua)
-- ARGV: the channel of K's watchers, the start of a release message, and
--       K's value and O (or '') as the caller read them
-- Reply: {'ok', K's value, K's pttl, O or '', the server's clock in µs}
--        of the lease ended, {'changed', K's value, K's pttl, O or ''}
--        when K or O changed since (nothing ended), {'free'} or
--        {'corrupt', what}. A token or counter beyond the fencing limit
--        is corrupt; the counter moves by the rule both Redis stores
--        share (fence.lua, sent in front).
local K, O, F = KEYS[1], KEYS[2], KEYS[3]
local v = redis.pcall('GET', K)
if type(v) == 'table' then
  return {'corrupt', K .. ' is a ' .. redis.call('TYPE', K).ok .. ', not a string'}
end
if not v then return {'free'} end
local o = redis.pcall('GET', O)
if type(o) ~= 'string' then o = '' end
if v ~= ARGV[3] or o ~= ARGV[4] then return {'changed', v, redis.call('PTTL', K), o} end
local pttl = redis.call('PTTL', K)
local tok = string.match(o, '^(%d+) ') or string.match(o, '^kept (%d+) ')
local t = redis.call('TIME')
t = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cn, bad = fenceRead(F, t)
if cn == nil then return bad end
if tonumber(tok or '0') > fenceLimit(t) then
  return {'corrupt', 'record ' .. O .. ' holds a token more than 366 days ahead of the server\'s clock: no grant made it (forged, or written while the clock was ahead); delete it'}
end
local fenced
fenced, bad = fenceNext(F, cn, tonumber(tok or '0'), t, pttl)
if not fenced then return bad end
redis.call('DEL', K, O)
redis.call('PUBLISH', ARGV[1], ARGV[2] .. (tok or '-'))
return {'ok', v, pttl, o, t}
