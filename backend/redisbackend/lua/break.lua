-- break (Breaker.Break). ARGV[4..5]: owner, token of the grant to end.
-- If K's lease is that grant (a kept one included), the counter F first
-- moves past its token and the server's clock, so that every later grant
-- of K is above it; K then goes on as after its owner's release at once:
-- handed to the first waiter, or freed with "released <token> <next>"
-- published, also for a plain lease (a watcher may follow it without a
-- mark). Replies {'ok', owner, token, pttl-ms} of the broken lease,
-- {'held', owner, token, pttl-ms} of another grant on K (nothing
-- changed), {'free'} or {'corrupt', why}.
local slow = lib()
local l = slow.classify()
if not l then return {'free'} end
if l[1] ~= 'held' then return l end
local own, tok, pttl = l[2], l[3], l[4]
if own ~= ARGV[4] or tonumber(tok) ~= tonumber(ARGV[5]) then return slow.holder(l) end
local line, bad = slow.scan(0) -- read before anything is written
if not line then return bad end

local c = redis.pcall('GET', F)
if type(c) == 'table' then
  return {'corrupt', 'fencing counter ' .. F .. ' is a ' .. redis.call('TYPE', F).ok .. ', not an integer'}
end
local cn = c and string.match(c, '^%d+$') and tonumber(c)
if c and not (cn and cn <= 9007199254740991) then
  return {'corrupt', 'fencing counter ' .. F .. ' holds ' .. string.sub(c, 1, 40) .. ', not a token (an integer up to 2^53-1)'}
end
local t = slow.now()
local bad = c and ahead('fencing counter ' .. F, c, t)
if bad then return bad end
local n = math.max(cn or 0, tonumber(tok), t) + 1
if n > 9007199254740991 then
  return {'corrupt', 'fencing counter ' .. F .. ' is at the largest token; delete the counter or use another prefix'}
end
local life = math.max(pttl, 3600000)
if n - t <= life * 1000 then
  redis.call('SET', F, string.format('%d', n), 'PX', life)
else
  redis.call('SET', F, string.format('%d', n))
end

redis.call('DEL', K, M)
slow.pass(tok, line)
return {'ok', own, tok, pttl}
