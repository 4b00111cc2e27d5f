-- Get: who holds K.
-- KEYS: K, O, F (see acquire.lua)
-- Reply: {'ok', K's value (false if none), K's pttl, O or '', the
--        server's clock in µs}
local K, O = KEYS[1], KEYS[2]
local v, o = redis.pcall('GET', K), redis.pcall('GET', O)
if type(v) == 'table' then
  return {'corrupt', K .. ' is a ' .. redis.call('TYPE', K).ok .. ', not a string'}
end
if type(o) ~= 'string' then o = '' end
local t = redis.call('TIME')
return {'ok', v, redis.call('PTTL', K), o, tonumber(t[1]) * 1000000 + tonumber(t[2])}
