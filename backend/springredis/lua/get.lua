-- Get: who holds K.
-- KEYS: K, O, F (see acquire.lua)
-- Reply: {'ok', K's value (false if none), K's pttl, O or ''}
local K, O = KEYS[1], KEYS[2]
local v, o = redis.pcall('GET', K), redis.pcall('GET', O)
if type(v) == 'table' then
  return {'corrupt', K .. ' is a ' .. redis.call('TYPE', K).ok .. ', not a string'}
end
if type(o) ~= 'string' then o = '' end
return {'ok', v, redis.call('PTTL', K), o}
