-- top (Store.MembersUpTo): at most ARGV[1] live members, first those
-- that claim an identity in ARGV[2..], then those that expire last.
-- Replies "ok", the server's clock in ms, how many other live members
-- the group has, then per member listed its name, expiry-ms and entry.
-- Its calls are bounded by ARGV[1] (each identity's names included),
-- whatever the size of the group, and it writes nothing.
local ty = redis.call('TYPE', Z).ok
if ty ~= 'none' and ty ~= 'zset' then return {'corrupt', 'key ' .. Z .. ' is a ' .. ty .. ', not a zset'} end
local limit = tonumber(ARGV[1])
local out, listed, n = {'ok', tostring(now), '0'}, {}, 0
local function add(name, exp)
  if n >= limit or listed[name] then return end
  listed[name] = true
  n = n + 1
  out[#out + 1] = name
  out[#out + 1] = exp
  out[#out + 1] = redis.call('HGET', D, name) or ''
end
for i = 2, #ARGV do
  local tried = 0
  for name in string.gmatch(redis.call('HGET', I, ARGV[i]) or '', '%S+') do
    tried = tried + 1
    if n >= limit or tried > limit then break end
    local exp = redis.call('ZSCORE', Z, name)
    if exp and tonumber(exp) > now then add(name, exp) end
  end
end
if n < limit then
  local top = redis.call('ZRANGE', Z, '+inf', '(' .. now, 'BYSCORE', 'REV', 'LIMIT', 0, limit, 'WITHSCORES')
  for i = 1, #top, 2 do add(top[i], top[i + 1]) end
end
out[3] = tostring(redis.call('ZCOUNT', Z, '(' .. now, '+inf') - n)
return out
