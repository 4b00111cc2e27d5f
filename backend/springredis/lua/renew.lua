-- Renew: extend owner's lease on K to ttl ms from now.
-- KEYS: K, O, F (see acquire.lua)
-- ARGV: owner, ttl ms, the channel of K's watchers and the start of
--       their message for a renewal
-- Reply: {'ok', token, the server's clock in µs} or {'not-held', K's
--        value (false if none), K's pttl, O or '', the server's clock in µs}
local K, O = KEYS[1], KEYS[2]
local t = redis.call('TIME')
t = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v, o = redis.pcall('GET', K), redis.pcall('GET', O)
if type(v) ~= 'string' then v = false end
if type(o) ~= 'string' then o = '' end
-- A record starting "kept " was released with a keep time: not renewable.
local tok, own, val = string.match(o, '^(%d+) (%S+) (.*)$')
if v and own == ARGV[1] and v == val then
  redis.call('PEXPIRE', K, ARGV[2])
  redis.call('PEXPIRE', O, ARGV[2])
  redis.call('PUBLISH', ARGV[3], ARGV[4] .. tok .. ' ' .. ARGV[2])
  return {'ok', tok, t}
end
return {'not-held', v, redis.call('PTTL', K), o, t}
