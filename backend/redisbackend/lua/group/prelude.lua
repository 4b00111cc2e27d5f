-- The prelude of every group script (backend.Registry): the store sends
-- it in front of the script's own text, as one script.
--
-- KEYS, the same three for every group script, all in G's Cluster slot:
--   Z  the group G: member name -> expiry (server ms), a sorted set
--   D  G:member-data: name -> "<seen-ms>\n<identity>\n<data>"
--   I  G:member-ids: identity -> the space-separated names that claim it
--
-- Every call first purges at most 100 expired members, so its cost stays
-- bounded.

local Z, D, I = KEYS[1], KEYS[2], KEYS[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- forget drops member n's entry and its name from its identity's list.
local function forget(n)
  local v = redis.call('HGET', D, n)
  if not v then return end
  local _, _, ident = string.find(v, '^%d+\n([^\n]*)\n')
  if ident then
    local keep = {}
    for m in string.gmatch(redis.call('HGET', I, ident) or '', '%S+') do
      if m ~= n then keep[#keep + 1] = m end
    end
    if #keep == 0 then redis.call('HDEL', I, ident) else redis.call('HSET', I, ident, table.concat(keep, ' ')) end
  end
  redis.call('HDEL', D, n)
end

local function purge()
  for _, n in ipairs(redis.call('ZRANGEBYSCORE', Z, '-inf', now, 'LIMIT', 0, 100)) do
    forget(n)
    redis.call('ZREM', Z, n)
  end
end

