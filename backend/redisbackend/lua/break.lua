-- break (Breaker.Break). ARGV[4..5]: owner, token of the grant to end.
-- If K's lease is that grant (a kept one included), the counter F first
-- moves past its token and the server's clock, so that every later grant
-- of K is above it; K then goes on as after its owner's release at once:
-- handed to the first waiter, or freed with "released <token> <next>"
-- published, also for a plain lease (a watcher may follow it without a
-- mark). Replies {'ok', owner, token, pttl-ms} of the broken lease,
-- {'held', owner, token, pttl-ms} of another grant on K (nothing
-- changed), {'free'} or {'corrupt', why}.
local slow = lib().lines()
local l = slow.classify()
if not l then return {'free'} end
if l[1] ~= 'held' then return l end
local own, tok, pttl = l[2], l[3], l[4]
if own ~= ARGV[4] or tonumber(tok) ~= tonumber(ARGV[5]) then return slow.holder(l) end
local line, bad = slow.scan(0) -- read before anything is written
if not line then return bad end

local t = slow.now()
local cn, fenced
cn, bad = fenceRead(F, t)
if cn == nil then return bad end
fenced, bad = fenceNext(F, cn, tonumber(tok), t, pttl)
if not fenced then return bad end

slow.pass(tok, line)
return {'ok', own, tok, pttl}
