-- Acquire: give the shared key K to owner for ttl ms if nobody holds it.
-- KEYS: K, the key the Java side reads too; O, baton's record of who
--       holds K ("<token> <owner> <value>"); F, K's fencing counter
-- ARGV: the value to write in K, owner, ttl ms, floor
-- Reply: {'ok', token}, {'held', K's value, K's pttl, O or '', the
--        server's clock in µs}, {'floor-ahead', what} or {'corrupt', what}
--
-- The fencing limit: no grant makes a token above the server's clock in
-- µs plus backend.MaxTokenLead (366 days, 31622400000000 µs), at most
-- 2^53-1 (9007199254740991). A floor at or above it is refused, and a
-- counter above it is corrupt (forged, or written while the clock was
-- ahead).
local K, O, F = KEYS[1], KEYS[2], KEYS[3]
local t = redis.call('TIME')
t = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.pcall('GET', K)
if type(v) == 'table' then
  return {'corrupt', K .. ' is a ' .. redis.call('TYPE', K).ok .. ', not a string'}
end
if v then
  local o = redis.pcall('GET', O)
  if type(o) ~= 'string' then o = '' end
  return {'held', v, redis.call('PTTL', K), o, t}
end
local limit = math.min(t + 31622400000000, 9007199254740991)
if tonumber(ARGV[4]) >= limit then
  return {'floor-ahead', 'floor ' .. ARGV[4] .. ' is not below ' .. string.format('%d', limit) .. ', the server\'s clock in µs plus 366 days'}
end
local c = redis.pcall('GET', F)
local cn = 0
if c then
  cn = type(c) == 'string' and string.match(c, '^%d+$') and tonumber(c)
  if not cn or cn > 9007199254740991 then
    return {'corrupt', 'fencing counter ' .. F .. ' is not a token (an integer up to 2^53-1)'}
  end
  if cn > limit then
    return {'corrupt', 'fencing counter ' .. F .. ' holds token ' .. c .. ', more than 366 days ahead of the server\'s clock: no grant made it (forged, or written while the clock was ahead); delete it'}
  end
end
local n = math.max(cn, tonumber(ARGV[4]), t) + 1
if n > 9007199254740991 then
  return {'corrupt', 'fencing counter ' .. F .. ' is at the largest token; delete it'}
end
local tok = string.format('%d', n)
redis.call('SET', K, ARGV[1], 'PX', ARGV[3])
redis.call('SET', O, tok .. ' ' .. ARGV[2] .. ' ' .. ARGV[1], 'PX', ARGV[3])
redis.call('SET', F, tok, 'PX', math.max(tonumber(ARGV[3]), 3600000))
return {'ok', tok}
