-- break (Breaker.Break): K's lease ends whoever holds it, kept ones
-- included. The counter F first moves past the broken token and the
-- server's clock, so that every later grant of K is above it; K then goes
-- on as after its owner's release at once: handed to the first waiter,
-- or freed with "released <token> <next>" published, also for a plain
-- lease (a watcher may follow it without a mark). Replies
-- {'ok', owner, token, pttl-ms} of the broken lease, {'free'} or
-- {'corrupt', why}.
local slow = lib()
local l = slow.classify()
if not l then return {'free'} end
if l[1] ~= 'held' then return l end
local own, tok, pttl = l[2], l[3], l[4]
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
