-- heartbeat (Store.Heartbeat). ARGV: name, identity, data, ttl-ms.
-- Replies "ok" and the names of the other live members that claim the
-- identity. All three keys live twice the ttl after the last heartbeat.
local name, identity, data, ttl = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])

for _, k in ipairs(KEYS) do
  local ty = redis.call('TYPE', k).ok
  local want = 'hash'
  if k == Z then want = 'zset' end
  if ty ~= 'none' and ty ~= want then return {'corrupt', 'key ' .. k .. ' is a ' .. ty .. ', not a ' .. want} end
end
purge()
local out, keep = {'ok'}, {name}
for n in string.gmatch(redis.call('HGET', I, identity) or '', '%S+') do
  if n ~= name then
    local exp = redis.call('ZSCORE', Z, n)
    if exp and tonumber(exp) > now then
      keep[#keep + 1] = n
      out[#out + 1] = n
    end
  end
end
redis.call('ZADD', Z, now + ttl, name)
redis.call('HSET', D, name, now .. '\n' .. identity .. '\n' .. data)
redis.call('HSET', I, identity, table.concat(keep, ' '))
for _, k in ipairs(KEYS) do
  if redis.call('PTTL', k) < 2 * ttl then redis.call('PEXPIRE', k, 2 * ttl) end
end
return out
