-- members (Store.Members). Replies "ok", the server's clock in ms, then
-- per live member its name, expiry-ms and entry.
local ty = redis.call('TYPE', Z).ok
if ty ~= 'none' and ty ~= 'zset' then return {'corrupt', 'key ' .. Z .. ' is a ' .. ty .. ', not a zset'} end
purge()
local out = {'ok', tostring(now)}
local live = redis.call('ZRANGEBYSCORE', Z, '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  out[#out + 1] = live[i]
  out[#out + 1] = live[i + 1]
  out[#out + 1] = redis.call('HGET', D, live[i]) or ''
end
return out
