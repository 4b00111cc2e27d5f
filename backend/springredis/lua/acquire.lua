-- Acquire: give the shared key K to owner for ttl ms if nobody holds it.
-- KEYS: K, the key the Java side reads too; O, baton's record of who
--       holds K ("<token> <owner> <value>"); F, K's fencing counter
-- ARGV: the value to write in K, owner, ttl ms, floor
-- Reply: {'ok', token}, {'held', K's value, K's pttl, O or '', the
--        server's clock in µs}, {'floor-ahead', what} or {'corrupt', what}
--
-- The token, the fencing limit, the counter's checks and its life are
-- the rule that both Redis stores share (fence.lua, sent in front).
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
local bad = fenceFloor(ARGV[4], t)
if bad then return bad end
local cn, tok
cn, bad = fenceRead(F, t)
if cn == nil then return bad end
tok, bad = fenceNext(F, cn, tonumber(ARGV[4]), t, ARGV[3])
if not tok then return bad end
redis.call('SET', K, ARGV[1], 'PX', ARGV[3])
redis.call('SET', O, tok .. ' ' .. ARGV[2] .. ' ' .. ARGV[1], 'PX', ARGV[3])
return {'ok', tok}
