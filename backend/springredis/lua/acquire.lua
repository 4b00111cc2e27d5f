-- Acquire: give the shared key K to owner for ttl ms if nobody holds it.
-- KEYS: K, the key the Java side reads too; O, baton's record of who
--       holds K ("<token> <owner> <value>"); F, K's fencing counter
-- ARGV: the value to write in K, owner, ttl ms, floor
-- Reply: {'ok', token}, {'held', K's value, K's pttl, O or ''} or
--        {'corrupt', what}
local K, O, F = KEYS[1], KEYS[2], KEYS[3]
local v = redis.pcall('GET', K)
if type(v) == 'table' then
  return {'corrupt', K .. ' is a ' .. redis.call('TYPE', K).ok .. ', not a string'}
end
if v then
  local o = redis.pcall('GET', O)
  if type(o) ~= 'string' then o = '' end
  return {'held', v, redis.call('PTTL', K), o}
end
local c = redis.pcall('GET', F)
local cn = 0
if c then
  cn = type(c) == 'string' and string.match(c, '^%d+$') and tonumber(c)
  if not cn or cn > 9007199254740991 then
    return {'corrupt', 'fencing counter ' .. F .. ' is not a token (an integer up to 2^53-1)'}
  end
end
local t = redis.call('TIME')
local n = math.max(cn, tonumber(ARGV[4]), tonumber(t[1]) * 1000000 + tonumber(t[2])) + 1
if n > 9007199254740991 then
  return {'corrupt', 'fencing counter ' .. F .. ' is at the largest token; delete it'}
end
local tok = string.format('%d', n)
redis.call('SET', K, ARGV[1], 'PX', ARGV[3])
redis.call('SET', O, tok .. ' ' .. ARGV[2] .. ' ' .. ARGV[1], 'PX', ARGV[3])
redis.call('SET', F, tok, 'PX', math.max(tonumber(ARGV[3]), 3600000))
return {'ok', tok}
