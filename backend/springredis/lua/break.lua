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
--        (see acquire.lua) is corrupt.
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
local c = redis.pcall('GET', F)
local cn = 0
if c then
  cn = type(c) == 'string' and string.match(c, '^%d+$') and tonumber(c)
  if not cn or cn > 9007199254740991 then
    return {'corrupt', 'fencing counter ' .. F .. ' is not a token (an integer up to 2^53-1)'}
  end
end
local tok = string.match(o, '^(%d+) ') or string.match(o, '^kept (%d+) ')
local t = redis.call('TIME')
t = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = math.min(t + 31622400000000, 9007199254740991)
if cn > limit or tonumber(tok or '0') > limit then
  return {'corrupt', (cn > limit and 'fencing counter ' .. F or 'record ' .. O) ..
    ' holds a token more than 366 days ahead of the server\'s clock: no grant made it (forged, or written while the clock was ahead); delete it'}
end
local n = math.max(cn, tonumber(tok or '0'), t) + 1
if n > 9007199254740991 then
  return {'corrupt', 'fencing counter ' .. F .. ' is at the largest token; delete it'}
end
redis.call('SET', F, string.format('%d', n), 'PX', math.max(pttl, 3600000))
redis.call('DEL', K, O)
redis.call('PUBLISH', ARGV[1], ARGV[2] .. (tok or '-'))
return {'ok', v, pttl, o, t}
