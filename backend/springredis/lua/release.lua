-- Release: end owner's lease on K, at once (keep 0) or keep ms from now.
-- KEYS: K, O, F (see acquire.lua)
-- ARGV: owner, keep ms, the channel of K's watchers and the starts of
--       their messages for a release and for a renewal
-- Reply: {'ok', token, the server's clock in µs} or {'not-held', K's
--        value (false if none), K's pttl, O or '', the server's clock in µs}
local K, O = KEYS[1], KEYS[2]
local t = redis.call('TIME')
t = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v, o = redis.pcall('GET', K), redis.pcall('GET', O)
if type(v) ~= 'string' then v = false end
if type(o) ~= 'string' then o = '' end
local kept = string.sub(o, 1, 5) == 'kept '
local tok, own, val = string.match(kept and string.sub(o, 6) or o, '^(%d+) (%S+) (.*)$')
if not v or own ~= ARGV[1] or v ~= val then
  return {'not-held', v, redis.call('PTTL', K), o, t}
end
if tonumber(ARGV[2]) > 0 then
  -- Kept, as ShedLock keeps a job lock until lockAtLeastFor; a lease
  -- already kept stays as it is.
  if not kept then
    redis.call('PEXPIRE', K, ARGV[2])
    redis.call('SET', O, 'kept ' .. o, 'PX', ARGV[2])
    redis.call('PUBLISH', ARGV[3], ARGV[5] .. tok .. ' ' .. ARGV[2])
  end
  return {'ok', tok, t}
end
redis.call('DEL', K, O)
redis.call('PUBLISH', ARGV[3], ARGV[4] .. tok)
return {'ok', tok, t}
